/** Helpers for workerd integration tests: signed webhooks, RPC calls, a fake connector. */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { vi } from "vitest";
import { SIGNATURE_HEADER, signBody } from "../../src/auth/signature";

export const SECRET = "test-connector-secret";
export const TOKEN = "test-token";

export async function inbound(channel: string, body: unknown, opts: { secret?: string; at?: number } = {}) {
  const raw = typeof body === "string" ? body : JSON.stringify(body);
  return exports.default.fetch(`http://gw.test/hooks/inbound/${channel}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      [SIGNATURE_HEADER]: await signBody(opts.secret ?? SECRET, raw, opts.at),
    },
    body: raw,
  });
}

export async function rpc<T = Record<string, unknown>>(method: string, params: unknown = {}) {
  const res = await exports.default.fetch(`http://gw.test/rpc/${method}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  const body = (await res.json()) as { ok: boolean; payload: T; error?: { code: string; message: string } };
  return { status: res.status, ...body };
}

export interface Delivered {
  url: string;
  signature: string | null;
  body: Record<string, unknown>;
}

/**
 * Intercepts outbound fetches to https://connector.test/* (the DOs run in this isolate).
 * `respond` decides the status per call; deliveries are recorded in order.
 */
export function fakeConnector(respond: (n: number) => number = () => 200) {
  const delivered: Delivered[] = [];
  const real = globalThis.fetch;
  let n = 0;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith("https://connector.test/")) return real(input, init);
    const status = respond(n++);
    const text = typeof init?.body === "string" ? init.body : "";
    if (status >= 200 && status < 300) {
      delivered.push({
        url,
        signature: new Headers(init?.headers).get(SIGNATURE_HEADER),
        body: JSON.parse(text) as Record<string, unknown>,
      });
    }
    return new Response(status < 300 ? "ok" : "down", { status });
  });
  return { delivered, attempts: () => n, restore: () => spy.mockRestore() };
}

export function actor(sessionKey: string) {
  return env.SESSION_ACTOR.getByName(sessionKey);
}

/** Polls until `check` returns a value (bounded: throws after `timeoutMs`). */
export async function eventually<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 5000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits server-side (agent.wait) for a run to end and returns the wait result. */
export async function waitRun(runId: string, timeoutMs = 10_000) {
  const res = await rpc<{ status: string; runStatus: string; error?: string }>("agent.wait", {
    runId,
    timeoutMs,
  });
  return res.payload;
}

/**
 * Waits until the session's actor has nothing left to do or to write: no queued or running
 * run, and no deferred D1 records in its journal (a connector's message is recorded after its
 * ack, with the run's next write).
 */
export async function actorSettled(sessionKey: string) {
  await eventually(() =>
    runInDurableObject(actor(sessionKey), (_instance, state) => {
      const count = (table: string) =>
        state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${table}`).one().n;
      return count("queue") === 0 && count("d1_pending") === 0;
    }),
  );
}

/** Runs a pending alarm of the actor right away, if one is set. */
export function fireAlarm(sessionKey: string) {
  return runDurableObjectAlarm(actor(sessionKey));
}

let counter = 0;
export function dm(text: string, extra: Record<string, unknown> = {}) {
  counter++;
  return { messageId: `m-${Date.now()}-${counter}`, chatType: "direct", from: "user-1", text, ...extra };
}
