/**
 * The world of the run lifecycle tests (run-lifecycle.test.ts, run-records.test.ts): a scripted
 * model and a connector that can be held mid-request, an actor whose D1 binding logs (and can
 * hold or break) every statement and batch, and a simulated crash: `crash(w)` aborts every
 * Durable Object, and whatever the dead instance was holding fails instead of going on.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import { SIGNATURE_HEADER } from "../../src/auth/signature";
import type { SessionActor } from "../../src/session/actor";
import type { TranscriptMessage } from "../../src/transcript/message";
import { CONNECTORS, group, groupMessage, history, SCRIPTED_MODEL_CONFIG } from "./model-support";
import { actor, changeActorEnv, type Delivered, drain, eventually, inbound, rpc, waitRun } from "./support";

const crashError = () => new Error("simulated crash: the process died here");

/**
 * Polls (in whichever context calls it) until `open()`; a held fetch still honours its signal.
 * Held by an instance that has crashed since (`born` is no longer `w.epoch`), it fails.
 */
async function until(open: () => boolean, signal?: AbortSignal | null, alive: () => boolean = () => true) {
  while (!open() && alive()) {
    if (signal?.aborted) throw signal.reason;
    await new Promise((r) => setTimeout(r, 5));
  }
  if (!alive()) throw crashError();
}

/**
 * An OpenAI-compatible model at https://model.test and a connector at https://connector.test
 * that can each be held (their answers wait until released), behind one fetch spy. The model
 * answers `re: <the user texts since the last assistant message, joined by " | ">`, so a reply
 * shows which inputs it answered. `events` records, in order, model calls, connector POSTs and
 * (through `setupActor`) the D1 statements and batches of an actor.
 */
export function world() {
  const real = globalThis.fetch;
  const w = {
    events: [] as string[],
    delivered: [] as Delivered[],
    /** The non-system messages of each model call. */
    requests: [] as Array<Array<{ role: string; text: string }>>,
    connectorAttempts: 0,
    holdModel: false,
    /** Holds the model call of this index (0-based, in `requests`) like `holdModel`, while true. */
    holdCall: undefined as ((n: number) => boolean) | undefined,
    holdConnector: false,
    connectorStatus: 200,
    /** The tool call the model makes (if any) before it answers the user text it is given. */
    callTool: undefined as ((userText: string) => { name: string; args?: object } | undefined) | undefined,
    /** Bumped by `crash`: what an instance held before it fails instead of going on. */
    epoch: 0,
    restore: () => {},
  };
  const textOf = (content: unknown) =>
    typeof content === "string"
      ? content
      : Array.isArray(content)
        ? content.map((p: { text?: string }) => p.text ?? "").join("")
        : "";
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const body = typeof init?.body === "string" ? init.body : "";
    const signal = init?.signal;
    if (url.startsWith("https://connector.test/")) {
      w.connectorAttempts++;
      const payload = JSON.parse(body) as Record<string, unknown>;
      w.events.push(`post ${String(payload.deliveryId)}`);
      const born = w.epoch;
      await until(
        () => !w.holdConnector,
        signal,
        () => w.epoch === born,
      );
      const status = w.connectorStatus;
      if (status < 300) {
        w.delivered.push({ url, signature: new Headers(init?.headers).get(SIGNATURE_HEADER), body: payload });
      }
      return new Response(status < 300 ? "ok" : "down", { status });
    }
    if (!url.startsWith("https://model.test/")) return real(input, init);
    w.events.push("model");
    const { messages } = JSON.parse(body) as { messages: Array<{ role: string; content: unknown }> };
    const sent = messages
      .filter((m) => m.role !== "system")
      .map((m) => ({ role: m.role, text: textOf(m.content) }));
    const n = w.requests.push(sent) - 1;
    const born = w.epoch;
    await until(
      () => !w.holdModel && !w.holdCall?.(n),
      signal,
      () => w.epoch === born,
    );
    const call = sent.at(-1)?.role === "user" ? w.callTool?.(sent.at(-1)?.text ?? "") : undefined;
    const lastAssistant = sent.map((m) => m.role).lastIndexOf("assistant");
    const users = sent.slice(lastAssistant + 1).filter((m) => m.role === "user");
    const message = call
      ? {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: `call_${w.requests.length}`,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) },
            },
          ],
        }
      : { role: "assistant", content: `re: ${users.map((u) => u.text).join(" | ")}` };
    return Response.json({
      id: `cmpl-${w.requests.length}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: "m",
      choices: [{ index: 0, message, finish_reason: call ? "tool_calls" : "stop" }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
  });
  w.restore = () => spy.mockRestore();
  return w;
}
export type World = ReturnType<typeof world>;

/**
 * The process dies: every Durable Object is aborted, and what its instance was holding (a model
 * call, a POST, a D1 batch) fails. Holds are released for the next instance.
 */
export async function crash(w: World): Promise<void> {
  w.epoch++;
  await abortAllDurableObjects();
  w.holdModel = false;
  w.holdCall = undefined;
  w.holdConnector = false;
}

/** The test config (echo model) with the enqueue written before the ack, as operator surfaces write it. */
export function echoWriteThrough() {
  const config = JSON.parse(env.SWITCHBOARD_CONFIG) as { session?: object };
  return { ...config, session: { ...config.session, writeBehind: false } };
}

/**
 * The scripted model and connector for one actor; `extra` replaces top-level sections. The
 * enqueue is written before the ack (`session.writeBehind: false`) unless `session` says
 * otherwise, as operator surfaces and hooks always write it.
 */
export const scripted = (extra: Record<string, unknown> = {}) => ({
  ...SCRIPTED_MODEL_CONFIG,
  connectors: CONNECTORS,
  delivery: { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200 },
  ...extra,
  session: { writeBehind: false, ...(extra.session as object | undefined) },
});

/**
 * Sets up one actor instance (the change lasts until the instance is gone, see changeActorEnv):
 * `config` replaces its config (otherwise the test config: echo model), its D1 bindings log
 * every prepared statement and batch into `w.events`, `breakAfter` makes D1 batches (and with
 * `breakReads` every statement) fail once that many batches succeeded (as in resume.test.ts),
 * and `holdBatch(n)` holds the n-th batch (0-based) until it returns false (or the instance
 * crashes).
 */
export async function setupActor(
  key: string,
  w: World,
  opts: {
    config?: unknown;
    breakAfter?: number;
    breakReads?: boolean;
    holdBatch?: (n: number) => boolean;
  } = {},
) {
  // The actor learns its key first (one batch: its run-id prefix and its stored entry), so
  // what the test counts is the runs' own writes.
  await runInDurableObject(actor(key), (instance: SessionActor) => instance.getEntry(key));
  let batches = 0;
  let calls = 0;
  const broken = () => opts.breakAfter !== undefined && batches >= opts.breakAfter;
  // Every database of storage.d1, so that what is counted or broken holds wherever the session lives.
  const logged = (db: D1Database) =>
    new Proxy(db, {
      get(target, prop, receiver) {
        if (prop === "batch") {
          return async (stmts: D1PreparedStatement[]) => {
            if (broken()) throw crashError();
            const n = calls++;
            w.events.push(`batch ${stmts.length}`);
            const born = w.epoch;
            await until(
              () => !opts.holdBatch?.(n),
              null,
              () => w.epoch === born,
            );
            const result = await target.batch(stmts);
            batches++;
            return result;
          };
        }
        if (prop === "prepare") {
          return (sql: string) => {
            if (opts.breakReads && broken()) throw crashError();
            w.events.push(`sql ${sql}`);
            return target.prepare(sql);
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  await changeActorEnv(key, { config: opts.config, databases: logged });
}

/** A fresh world for one test, with the actor of group `id` set up in it (see setupActor). */
export async function scene(id: string, opts: Parameters<typeof setupActor>[2] = {}) {
  const w = world();
  scenes.push(w.restore);
  const key = group(id);
  await setupActor(key, w, opts);
  return { w, key };
}

export interface Ack {
  ok: boolean;
  runId: string;
  sessionKey: string;
  status: string;
}

export async function send(id: string, text: string): Promise<Ack> {
  const res = await inbound("telegram", groupMessage(id, text));
  expect(res.status).toBe(202);
  return (await res.json()) as Ack;
}

export interface Run {
  runId: string;
  status: string;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  reply?: string;
  delivered?: boolean;
}

export async function runOf(runId: string): Promise<Run> {
  const res = await rpc<Run>("runs.get", { runId });
  expect(res.status).toBe(200);
  return res.payload;
}

export interface Delivery {
  deliveryId: string;
  runId?: string;
  status: string;
  attempts: number;
  text: string;
  lastError?: string;
  nextAttemptAt?: number;
  deliveredAt?: number;
}

/** A run's reply delivery as its session's deliveries read now (its actor's outcomes written first). */
export async function deliveryOf(runId: string, status?: string): Promise<Delivery | undefined> {
  const run = await rpc<{ sessionKey: string }>("runs.get", { runId });
  const list = await rpc<{ deliveries: Delivery[] }>("deliveries.list", {
    sessionKey: run.payload.sessionKey,
    ...(status ? { status } : {}),
  });
  return list.payload.deliveries.find((d) => d.deliveryId === `${runId}:reply`);
}

export async function runStatusOf(key: string): Promise<string | undefined> {
  const list = await rpc<{ sessions: Array<{ key: string; runStatus?: string }> }>("sessions.list", {
    limit: 200,
  });
  return list.payload.sessions.find((s) => s.key === key)?.runStatus;
}

export const line = (m: TranscriptMessage) =>
  `${m.role}:${m.content.map((p) => ("text" in p ? p.text : p.type)).join("")}`;

/** Transcript ids are unique (no message was appended twice). */
export function expectNoDuplicates(messages: TranscriptMessage[]) {
  expect(new Set(messages.map((m) => m.id)).size).toBe(messages.length);
}

/** The run answered "part one" and "part two" together: stored once each, one reply, delivered once. */
export async function expectOneMergedReply(w: World, key: string, runId: string) {
  expect(await waitRun(runId)).toMatchObject({ status: "ok" });
  expect(await runOf(runId)).toMatchObject({ reply: "re: part one | part two" });
  const transcript = await history(key);
  expect(transcript.map(line)).toEqual([
    "user:part one",
    "user:part two",
    "assistant:re: part one | part two",
  ]);
  expectNoDuplicates(transcript);
  await eventually(async () => w.delivered.length === 1);
  await drain(key);
  expect(w.delivered).toHaveLength(1);
  expect(w.delivered[0]!.body).toMatchObject({ text: "re: part one | part two" });
}

export const batches = (w: World) => w.events.filter((e) => e.startsWith("batch "));
export const postsOf = (w: World, runId: string) =>
  w.events.filter((e) => e === `post ${runId}:reply`).length;
export const repliesTo = (w: World, runId: string) =>
  w.delivered.filter((d) => d.body.deliveryId === `${runId}:reply`);

const scenes: Array<() => void> = [];

/** Restores what the tests' worlds replaced (call from afterEach). */
export function restoreWorlds(): void {
  for (const restore of scenes.splice(0)) restore();
}

/** Registers a world made outside `scene` for `restoreWorlds`. */
export function track(w: World): World {
  scenes.push(w.restore);
  return w;
}

/** Every message of the session's current transcript, tool calls and results included. */
export async function transcriptOf(key: string): Promise<TranscriptMessage[]> {
  const res = await rpc<{ messages: TranscriptMessage[] }>("chat.history", {
    sessionKey: key,
    includeTools: true,
    limit: 1000,
  });
  return res.payload.messages;
}

/**
 * Sends `text` to group `id` with the model held, and waits until its call has arrived: a turn
 * that runs until `w.holdModel` is false again. With `tool`, the held answer asks for that tool.
 */
export async function heldTurn(w: World, id: string, text: string, tool?: string): Promise<Ack> {
  if (tool) w.callTool = (t) => (t === text ? { name: tool } : undefined);
  const before = w.requests.length;
  w.holdModel = true;
  const ack = await send(id, text);
  // This turn's call, found by its text: an actor of an earlier test may still be calling the
  // model (the fetch spy is global), so the count alone says nothing.
  await eventually(async () => w.requests.slice(before).some((r) => r.at(-1)?.text === text));
  return ack;
}

/**
 * Run `runId` ends `ok`; once the session is drained its transcript reads `lines` (`line`'s
 * form) and the run's replies are the last line's text, once per delivery.
 */
export async function expectTurn(w: World, key: string, runId: string, lines: string[]): Promise<void> {
  expect(await waitRun(runId)).toMatchObject({ status: "ok" });
  await drain(key);
  expect((await transcriptOf(key)).map(line)).toEqual(lines);
  const reply = lines.at(-1)?.replace(/^assistant:/, "");
  expect(repliesTo(w, runId).map((d) => d.body.text)).toEqual([reply]);
}
