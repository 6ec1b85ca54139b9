/** Helpers for the operator RPC and transcript tests: raw calls, other configs, seeded D1 rows, a slow model. */
import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { vi } from "vitest";
import type { Config } from "../../src/config/schema";
import { appendMessages } from "../../src/db/messages";
import { databaseOfKey } from "../../src/db/placement";
import {
  database,
  getSessionBySessionId,
  recordTranscript,
  type SessionRow,
  transcriptOwner,
  upsertSessionStatement,
} from "../../src/db/queries";
import * as schema from "../../src/db/schema";
import { app } from "../../src/http/app";
import { actorSessions } from "../../src/session/client";
import { newSessionRow } from "../../src/session/entry/rules";
import type { ToolContext } from "../../src/tools/types";
import type { TranscriptMessage } from "../../src/transcript/message";
import { changeActorEnv, configText, TOKEN } from "./support";

export interface RpcAnswer<T> {
  status: number;
  ok: boolean;
  payload: T;
  error?: { code: string; message: string };
}

/** POST /rpc/<method> with a raw body and headers of the caller's choosing. */
export async function rpcRaw(method: string, init: { body?: string; headers?: Record<string, string> }) {
  return exports.default.fetch(`http://gw.test/rpc/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...init.headers },
    body: init.body ?? "{}",
  });
}

/** Calls an RPC method through the Worker app with another config (the DOs keep the test config). */
export async function rpcWithConfig<T = Record<string, unknown>>(
  config: unknown,
  method: string,
  params: unknown = {},
): Promise<RpcAnswer<T>> {
  const res = await app.fetch(
    new Request(`http://gw.test/rpc/${method}`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(params),
    }),
    { ...env, SWITCHBOARD_CONFIG: configText(config) },
    createExecutionContext(),
  );
  return { status: res.status, ...((await res.json()) as Omit<RpcAnswer<T>, "status">) };
}

/** GET a transcript export; `token: null` sends no Authorization header. */
export async function exportTranscript(file: string, token: string | null = TOKEN) {
  return exports.default.fetch(`http://gw.test/v1/transcripts/${file}`, {
    headers: token === null ? {} : { authorization: `Bearer ${token}` },
  });
}

/** Parses a JSONL body into objects (the body must end with a newline). */
export async function jsonLines(res: Response): Promise<Array<Record<string, unknown>>> {
  // Decoded by hand: workerd warns when .text() reads a body whose type is not text/*.
  const text = new TextDecoder().decode(await res.arrayBuffer());
  if (!text.endsWith("\n")) throw new Error("JSONL body does not end with a newline");
  return text
    .slice(0, -1)
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** A complete session row with neutral defaults; `key` and `agentId` are required. */
export function sessionRow(fields: Partial<SessionRow> & { key: string; agentId: string }): SessionRow {
  const now = fields.updatedAt ?? Date.now();
  const base = newSessionRow(
    fields.key,
    { agentId: fields.agentId, kind: "other", chatType: "direct", channel: null },
    now,
    crypto.randomUUID(),
  );
  return { ...base, ...fields };
}

/** Writes session rows (and their transcript owners) straight to D1. */
export async function seedSessions(rows: SessionRow[]): Promise<SessionRow[]> {
  for (let i = 0; i < rows.length; i += 50) {
    await Promise.all(
      rows
        .slice(i, i + 50)
        .flatMap((r) => [
          upsertSessionStatement(databaseOfKey(env, r.key), r).run(),
          recordTranscript(env, r.sessionId, r.key, r.createdAt),
        ]),
    );
  }
  return rows;
}

/**
 * `count` transcript messages: every `toolEvery`-th is a tool result answering the call in the
 * assistant message just before it; the rest alternate user / assistant. Ids are `<prefix>-<n>`.
 */
export function transcriptMessages(
  prefix: string,
  count: number,
  opts: { toolEvery?: number; start?: number } = {},
): TranscriptMessage[] {
  const start = opts.start ?? 1_700_000_000_000;
  const out: TranscriptMessage[] = [];
  for (let n = 1; n <= count; n++) {
    const id = `${prefix}-${n}`;
    const timestamp = start + n * 1000;
    if (opts.toolEvery && n % opts.toolEvery === 0) {
      out.push({
        id,
        role: "toolResult",
        content: [{ type: "text", text: JSON.stringify({ n }) }],
        toolCallId: `call-${prefix}-${n}`,
        toolName: "current_time",
        isError: false,
        timestamp,
      });
    } else if (opts.toolEvery && (n + 1) % opts.toolEvery === 0) {
      out.push({
        id,
        role: "assistant",
        content: [{ type: "toolCall", id: `call-${prefix}-${n + 1}`, name: "current_time", arguments: {} }],
        timestamp,
      });
    } else {
      out.push({
        id,
        role: n % 2 === 1 ? "user" : "assistant",
        content: [{ type: "text", text: `message ${n}` }],
        timestamp,
      });
    }
  }
  return out;
}

/** Appends messages to a transcript in chunks (each append is one D1 batch). */
export async function seedMessages(sessionId: string, messages: TranscriptMessage[]): Promise<void> {
  // The transcript's rows live in its session's database.
  const key =
    (await transcriptOwner(env, sessionId))?.sessionKey ?? (await getSessionBySessionId(env, sessionId))?.key;
  if (!key) throw new Error(`seedMessages: no session or transcript has sessionId ${sessionId}`);
  for (let i = 0; i < messages.length; i += 100)
    await appendMessages(env, key, sessionId, messages.slice(i, i + 100));
}

/** Writes delivery rows straight to D1. */
export async function seedDeliveries(rows: Array<typeof schema.deliveries.$inferInsert>): Promise<void> {
  for (const row of rows)
    await database(databaseOfKey(env, row.sessionKey)).insert(schema.deliveries).values(row).run();
}

/** Gives one actor instance another config (DOs read the project's test config otherwise). */
export async function withActorConfig(sessionKey: string, config: unknown): Promise<void> {
  await changeActorEnv(sessionKey, { config });
}

/**
 * A config whose default model is `slow/model`, served by https://model.test (see hangingModel).
 * Single attempts, so an aborted call is not retried.
 */
export const SLOW_MODEL_CONFIG = {
  models: {
    providers: { slow: { api: "openai-compatible", baseUrl: "https://model.test/v1" } },
    retry: { attempts: 1, baseDelayMs: 1 },
  },
  agents: { defaults: { model: "slow/model" } },
};

/**
 * An endpoint that never answers: requests to URLs under `prefix` hang until their signal
 * aborts (the caller's own timeout). `calls()` counts the requests it has received.
 */
export function hangingFetch(prefix: string) {
  const real = globalThis.fetch;
  let calls = 0;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(prefix)) return real(input, init);
    calls++;
    const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);
    return new Promise<Response>((_resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
  });
  return { calls: () => calls, restore: () => spy.mockRestore() };
}

/** A model endpoint that never answers (https://model.test/*, see hangingFetch). */
export function hangingModel() {
  return hangingFetch("https://model.test/");
}

/** A /tools/invoke answer: the HTTP status and the body. */
export interface ToolAnswer<T> {
  status: number;
  ok: boolean;
  result: T;
  error?: { type: string; message: string };
}

/** POST /tools/invoke with `config` as the gateway config, in the env `rewire` makes of it. */
export async function invokeTools<T = Record<string, unknown>>(
  config: unknown,
  body: Record<string, unknown>,
  rewire: (e: Env) => Env = (e) => e,
): Promise<ToolAnswer<T>> {
  const res = await app.fetch(
    new Request("http://gw.test/tools/invoke", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    }),
    rewire({ ...env, SWITCHBOARD_CONFIG: configText(config) }),
    createExecutionContext(),
  );
  return { status: res.status, ...((await res.json()) as Omit<ToolAnswer<T>, "status">) };
}

/** A tool's context over HTTP as agent `main`'s session `sessionKey`, with `config`. */
export function httpToolContext(sessionKey: string, config: Config): ToolContext {
  return {
    caller: { sessionKey, agentId: "main", trigger: "http" },
    sessions: actorSessions(env),
    toolCallId: crypto.randomUUID(),
    config,
    env,
  };
}

/**
 * The session keys of a family of agents a, b, c: a's main session, a child it spawned, a group
 * session and that group's child; b's main session and a child spawned by a's main; c's main.
 */
export function familyKeys(a: string, b: string, c: string) {
  return {
    aMain: `agent:${a}:main`,
    aChild: `agent:${a}:subagent:c1`,
    aGroup: `agent:${a}:telegram:group:g1`,
    aGroupChild: `agent:${a}:subagent:c2`,
    bMain: `agent:${b}:main`,
    bChildOfA: `agent:${b}:subagent:c3`,
    cMain: `agent:${c}:main`,
  };
}
