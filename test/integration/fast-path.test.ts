/**
 * The two fast paths of a run (src/session/actor.ts):
 * - prestart: a run enqueued on an idle actor is marked running, and its inputs stored, by the
 *   enqueue's own D1 batch, so the run start skips its batch;
 * - inline first delivery: the reply is POSTed before the run's finalize batch, which writes
 *   the `deliveries` row once, with that attempt's outcome.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SIGNATURE_HEADER } from "../../src/auth/signature";
import { getSession, upsertSessionStatement, upsertSessionUnlessNewerStatement } from "../../src/db/queries";
import type { SessionActor } from "../../src/session/actor";
import { newSessionRow } from "../../src/session/entry";
import type { TranscriptMessage } from "../../src/transcript/message";
import { CONNECTORS, group, groupMessage, history, SCRIPTED_MODEL_CONFIG } from "./model-support";
import { actor, type Delivered, eventually, inbound, rpc, waitRun } from "./support";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls (in whichever context calls it) until `open()`; a held fetch still honours its signal. */
async function until(open: () => boolean, signal?: AbortSignal | null) {
  while (!open()) {
    if (signal?.aborted) throw signal.reason;
    await sleep(5);
  }
}

/**
 * An OpenAI-compatible model at https://model.test and a connector at https://connector.test
 * that can each be held (their answers wait until released), behind one fetch spy. The model
 * answers `re: <the user texts since the last assistant message, joined by " | ">`, so a reply
 * shows which inputs it answered. `events` records, in order, model calls, connector POSTs and
 * (through `setupActor`) the D1 statements and batches of an actor.
 */
function world() {
  const real = globalThis.fetch;
  const w = {
    events: [] as string[],
    delivered: [] as Delivered[],
    /** The non-system messages of each model call. */
    requests: [] as Array<Array<{ role: string; text: string }>>,
    connectorAttempts: 0,
    holdModel: false,
    holdConnector: false,
    connectorStatus: 200,
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
      await until(() => !w.holdConnector, signal);
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
    w.requests.push(sent);
    await until(() => !w.holdModel, signal);
    const lastAssistant = sent.map((m) => m.role).lastIndexOf("assistant");
    const users = sent.slice(lastAssistant + 1).filter((m) => m.role === "user");
    return Response.json({
      id: `cmpl-${w.requests.length}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: "m",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: `re: ${users.map((u) => u.text).join(" | ")}` },
          finish_reason: "stop",
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
    });
  });
  w.restore = () => spy.mockRestore();
  return w;
}
type World = ReturnType<typeof world>;

/** The test config (echo model) with the enqueue written before the ack, as operator surfaces write it. */
function echoWriteThrough() {
  const config = JSON.parse(env.SWITCHBOARD_CONFIG) as { session?: object };
  return { ...config, session: { ...config.session, writeBehind: false } };
}

/**
 * The scripted model and connector for one actor; `extra` replaces top-level sections. The
 * enqueue is written before the ack (`session.writeBehind: false`) unless `session` says
 * otherwise, as operator surfaces and hooks always write it.
 */
const scripted = (extra: Record<string, unknown> = {}) => ({
  ...SCRIPTED_MODEL_CONFIG,
  connectors: CONNECTORS,
  delivery: { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200 },
  ...extra,
  session: { writeBehind: false, ...(extra.session as object | undefined) },
});

/**
 * Rewires one actor instance (it lasts until the instance is evicted): `config` replaces its
 * config (otherwise the test config: echo model), its D1 binding logs every prepared statement
 * and batch into `w.events`, `breakAfter` makes D1 batches (and with `breakReads` every
 * statement) fail once that many batches succeeded (a simulated crash, as in resume.test.ts),
 * `holdStep` makes its steps (a run's start, from its enqueue or its alarm) wait until it
 * returns false, and `holdBatch(n)` the n-th batch
 * (0-based) until it returns false.
 */
async function setupActor(
  key: string,
  w: World,
  opts: {
    config?: unknown;
    breakAfter?: number;
    breakReads?: boolean;
    holdStep?: () => boolean;
    holdBatch?: (n: number) => boolean;
  } = {},
) {
  await runInDurableObject(actor(key), async (instance: SessionActor) => {
    // The actor learns its key first (one batch: its run-id prefix and its stored entry), so
    // what the test counts is the runs' own writes.
    await instance.getEntry(key);
    let batches = 0;
    let calls = 0;
    const broken = () => opts.breakAfter !== undefined && batches >= opts.breakAfter;
    const crash = () => new Error("simulated crash: the process died here");
    const db = new Proxy(env.DB, {
      get(target, prop, receiver) {
        if (prop === "batch") {
          return async (stmts: D1PreparedStatement[]) => {
            if (broken()) throw crash();
            const n = calls++;
            w.events.push(`batch ${stmts.length}`);
            await until(() => !opts.holdBatch?.(n));
            const result = await target.batch(stmts);
            batches++;
            return result;
          };
        }
        if (prop === "prepare") {
          return (sql: string) => {
            if (opts.breakReads && broken()) throw crash();
            w.events.push(`sql ${sql}`);
            return target.prepare(sql);
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const rewired = { ...env, DB: db } as Env;
    if (opts.config !== undefined) rewired.SWITCHBOARD_CONFIG = JSON.stringify(opts.config);
    (instance as unknown as { env: Env }).env = rewired;
    const held = opts.holdStep;
    if (held) {
      const target = instance as unknown as { step(): Promise<void> };
      const step = target.step.bind(instance);
      Object.defineProperty(instance, "step", {
        configurable: true,
        value: async () => {
          await until(() => !held());
          await step();
        },
      });
    }
  });
}

/** A fresh world for one test, with the actor of group `id` set up in it (see setupActor). */
async function scene(id: string, opts: Parameters<typeof setupActor>[2] = {}) {
  const w = world();
  restore = w.restore;
  const key = group(id);
  await setupActor(key, w, opts);
  return { w, key };
}

/** The specs of the runs in an actor's local queue (state and whether the run was prestarted). */
async function queueSpecs(key: string) {
  return runInDurableObject(actor(key), (_instance, state) =>
    state.storage.sql
      .exec<{ run_id: string; state: string; spec: string }>(
        `SELECT run_id, state, spec FROM queue ORDER BY pos`,
      )
      .toArray()
      .map((r) => {
        const spec = JSON.parse(r.spec) as { prestarted?: unknown; req: { inputs: unknown[] } };
        return {
          runId: r.run_id,
          state: r.state,
          prestarted: spec.prestarted,
          inputs: spec.req.inputs.length,
        };
      }),
  );
}

interface Ack {
  ok: boolean;
  runId: string;
  sessionKey: string;
  status: string;
}

async function send(id: string, text: string): Promise<Ack> {
  const res = await inbound("telegram", groupMessage(id, text));
  expect(res.status).toBe(202);
  return (await res.json()) as Ack;
}

interface Run {
  runId: string;
  status: string;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  reply?: string;
  delivered?: boolean;
}

async function runOf(runId: string): Promise<Run> {
  const res = await rpc<Run>("runs.get", { runId });
  expect(res.status).toBe(200);
  return res.payload;
}

interface Delivery {
  deliveryId: string;
  runId?: string;
  status: string;
  attempts: number;
  text: string;
  lastError?: string;
  nextAttemptAt?: number;
  deliveredAt?: number;
}

async function deliveryOf(runId: string, status?: string): Promise<Delivery | undefined> {
  const list = await rpc<{ deliveries: Delivery[] }>("deliveries.list", status ? { status } : {});
  return list.payload.deliveries.find((d) => d.deliveryId === `${runId}:reply`);
}

async function runStatusOf(key: string): Promise<string | undefined> {
  const list = await rpc<{ sessions: Array<{ key: string; runStatus?: string }> }>("sessions.list", {
    limit: 200,
  });
  return list.payload.sessions.find((s) => s.key === key)?.runStatus;
}

const line = (m: TranscriptMessage) =>
  `${m.role}:${m.content.map((p) => ("text" in p ? p.text : p.type)).join("")}`;

/** Transcript ids are unique (no message was appended twice). */
function expectNoDuplicates(messages: TranscriptMessage[]) {
  expect(new Set(messages.map((m) => m.id)).size).toBe(messages.length);
}

/** The run answered "part one" and "part two" together: stored once each, one reply, delivered once. */
async function expectOneMergedReply(w: World, key: string, runId: string) {
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
  await sleep(200);
  expect(w.delivered).toHaveLength(1);
  expect(w.delivered[0]!.body).toMatchObject({ text: "re: part one | part two" });
}

const batches = (w: World) => w.events.filter((e) => e.startsWith("batch "));
const postsOf = (w: World, runId: string) => w.events.filter((e) => e === `post ${runId}:reply`).length;
const repliesTo = (w: World, runId: string) =>
  w.delivered.filter((d) => d.body.deliveryId === `${runId}:reply`);

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

describe("prestart: a run enqueued on an idle actor starts in the enqueue batch", () => {
  it("shows the run running with its input stored as soon as the message is accepted", async () => {
    const id = "fp-idle";
    // The run's step waits for the 202, so the run cannot start before its enqueue batch is written.
    let stepHeld = true;
    const { w, key } = await scene(id, { config: scripted(), holdStep: () => stepHeld });
    w.holdModel = true;

    const ack = await send(id, "hello");
    expect(ack).toMatchObject({ ok: true, sessionKey: key, status: "queued" });
    // Right after the 202: the enqueue batch already marked the run running and stored the input.
    const run = await runOf(ack.runId);
    expect(run).toMatchObject({ status: "running", startedAt: expect.any(Number) });
    expect(run.startedAt).toBeGreaterThanOrEqual(run.createdAt);
    expect(await runStatusOf(key)).toBe("running");
    expect((await history(key)).map(line)).toEqual(["user:hello"]);
    expect(batches(w)).toHaveLength(1);

    // The model call is under way (held): the run wrote no start batch of its own.
    stepHeld = false;
    await eventually(async () => w.requests.length === 1);
    expect(batches(w)).toHaveLength(1);
    expect(await runOf(ack.runId)).toMatchObject({ status: "running", startedAt: run.startedAt });
    expect((await history(key)).map(line)).toEqual(["user:hello"]);
    // The model saw the input once.
    expect(w.requests[0]).toEqual([{ role: "user", text: "hello" }]);

    w.holdModel = false;
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    const transcript = await history(key);
    expect(transcript.map(line)).toEqual(["user:hello", "assistant:re: hello"]);
    expectNoDuplicates(transcript);
    // Enqueue batch + finalize batch: nothing else was written for the run.
    expect(batches(w)).toHaveLength(2);
    expect(await runOf(ack.runId)).toMatchObject({
      status: "ok",
      startedAt: run.startedAt,
      reply: "re: hello",
      delivered: true,
    });
    expect(await runStatusOf(key)).toBe("idle");
    await eventually(async () => w.delivered.length === 1);
    await sleep(200);
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
    expect(w.delivered).toHaveLength(1);
    expect(w.delivered[0]!.body).toMatchObject({ kind: "reply", text: "re: hello" });
  });

  it("loses no input when two messages reach an idle session at once in collect mode", async () => {
    const id = "fp-collect-race";
    const { w, key } = await scene(id, { config: scripted({ session: { queue: { mode: "collect" } } }) });
    w.holdModel = true;

    const texts = ["first of two", "second of two"];
    const acks = await Promise.all(texts.map((t) => send(id, t)));
    await eventually(async () => w.requests.length === 1);
    w.holdModel = false;
    const runIds = [...new Set(acks.map((a) => a.runId))];
    for (const runId of runIds) expect((await waitRun(runId)).status).toBe("ok");

    const transcript = await history(key);
    expectNoDuplicates(transcript);
    const lines = transcript.map(line);
    for (const t of texts) {
      // Each input is stored exactly once, and an assistant message after it answers it.
      expect(lines.filter((l) => l === `user:${t}`)).toHaveLength(1);
      const at = lines.indexOf(`user:${t}`);
      expect(lines.slice(at + 1).some((l) => l.startsWith("assistant:") && l.includes(t))).toBe(true);
    }
    expect(transcript.filter((m) => m.role === "assistant")).toHaveLength(runIds.length);

    // Every message is answered in a reply delivered once per run.
    await eventually(async () => w.delivered.length === runIds.length);
    await sleep(200);
    expect(w.delivered).toHaveLength(runIds.length);
    for (const runId of runIds) expect(repliesTo(w, runId)).toHaveLength(1);
    for (const t of texts) expect(w.delivered.some((d) => String(d.body.text).includes(t))).toBe(true);
  });

  it("does not prestart a run that takes a second input while its enqueue batch is in flight", async () => {
    const id = "fp-collect-inflight";
    let stepHeld = true;
    let batchHeld = true;
    const { w, key } = await scene(id, {
      config: scripted({ session: { queue: { mode: "collect" } } }),
      holdStep: () => stepHeld,
      holdBatch: (n) => n === 0 && batchHeld,
    });

    // The first enqueue is waiting on its (prestart) batch when the second message is merged in.
    const firstAck = send(id, "part one");
    await eventually(async () => batches(w).length === 1);
    const second = await send(id, "part two");
    batchHeld = false;
    const first = await firstAck;
    expect(second.runId).toBe(first.runId);
    // The prestart batch stored only the first input: the run start must store both.
    expect(await queueSpecs(key)).toEqual([
      { runId: first.runId, state: "queued", prestarted: undefined, inputs: 2 },
    ]);

    stepHeld = false;
    await expectOneMergedReply(w, key, first.runId);
  });

  it("stores a message merged into a prestarted run in collect mode (the run start writes it)", async () => {
    const id = "fp-collect-merge";
    let stepHeld = true;
    const { w, key } = await scene(id, {
      config: scripted({ session: { queue: { mode: "collect" } } }),
      holdStep: () => stepHeld,
    });

    const first = await send(id, "part one");
    // The run has not started (its step is held), and the enqueue batch prestarted it.
    expect(await queueSpecs(key)).toEqual([
      { runId: first.runId, state: "queued", prestarted: expect.any(Object), inputs: 1 },
    ]);
    expect(await runOf(first.runId)).toMatchObject({ status: "running" });
    expect((await history(key)).map(line)).toEqual(["user:part one"]);

    const second = await send(id, "part two");
    expect(second.runId).toBe(first.runId);
    // Merging the second input undoes the prestart: the run start must store it.
    expect(await queueSpecs(key)).toEqual([
      { runId: first.runId, state: "queued", prestarted: undefined, inputs: 2 },
    ]);

    stepHeld = false;
    await expectOneMergedReply(w, key, first.runId);
    expect(w.requests).toEqual([
      [
        { role: "user", text: "part one" },
        { role: "user", text: "part two" },
      ],
    ]);
  });

  it("does not prestart a message that arrives while a run is running", async () => {
    const id = "fp-busy";
    const { w, key } = await scene(id, { config: scripted() });
    w.holdModel = true;

    const first = await send(id, "first");
    await eventually(async () => w.requests.length === 1);
    const second = await send(id, "second");
    expect(second.runId).not.toBe(first.runId);
    // Queued behind the running run, for as long as that run lasts.
    for (let i = 0; i < 3; i++) {
      const run = await runOf(second.runId);
      expect(run.status).toBe("queued");
      expect(run.startedAt).toBeUndefined();
      expect((await history(key)).map(line)).toEqual(["user:first"]);
      expect(await queueSpecs(key)).toEqual([
        expect.objectContaining({ runId: first.runId, state: "running" }),
        { runId: second.runId, state: "queued", prestarted: undefined, inputs: 1 },
      ]);
      await sleep(30);
    }

    w.holdModel = false;
    expect(await waitRun(first.runId)).toMatchObject({ status: "ok" });
    expect(await waitRun(second.runId)).toMatchObject({ status: "ok" });
    const [r1, r2] = [await runOf(first.runId), await runOf(second.runId)];
    expect([r1.reply, r2.reply]).toEqual(["re: first", "re: second"]);
    expect(r2.startedAt).toBeGreaterThanOrEqual(r1.endedAt!);
    const transcript = await history(key);
    expect(transcript.map(line)).toEqual([
      "user:first",
      "assistant:re: first",
      "user:second",
      "assistant:re: second",
    ]);
    expectNoDuplicates(transcript);
    // The second turn saw the first exchange once, then its own input.
    expect(w.requests[1]).toEqual([
      { role: "user", text: "first" },
      { role: "assistant", text: "re: first" },
      { role: "user", text: "second" },
    ]);
    await eventually(async () => w.delivered.length === 2);
    await sleep(200);
    expect(w.delivered.map((d) => d.body.text)).toEqual(["re: first", "re: second"]);
  });

  // Resumption of a prestarted run (cf. resume.test.ts): the test config's echo model; D1 fails
  // after the enqueue batch, the instance is aborted, and its backstop alarm resumes the run.
  for (const [name, text, breakReads, roles] of [
    [
      "before it produced anything (its start batch was skipped)",
      "after a crash",
      true,
      ["user", "assistant"],
    ],
    [
      "after its tool call was checkpointed, before it was stored",
      "call:current_time {}",
      false,
      ["user", "assistant", "toolResult", "assistant"],
    ],
    [
      "after its reply was posted, before the finalize batch",
      "posted then crashed",
      false,
      ["user", "assistant"],
    ],
  ] as const) {
    it(`resumes a prestarted run interrupted ${name}: one reply, delivered once, no duplicates`, async () => {
      const w = world();
      restore = w.restore;
      const id = `fp-resume-${text.replace(/\W+/g, "-")}`;
      const key = group(id);
      const warm = await send(id, "warm up");
      expect((await waitRun(warm.runId)).status).toBe("ok");
      await eventually(async () => w.delivered.length === 1);

      let stepHeld = true;
      await setupActor(key, w, {
        config: echoWriteThrough(),
        breakAfter: 1,
        breakReads,
        holdStep: () => stepHeld,
      });
      const ack = await send(id, text);
      expect(await queueSpecs(key)).toEqual([
        { runId: ack.runId, state: "queued", prestarted: expect.any(Object), inputs: 1 },
      ]);
      stepHeld = false;
      // The run starts, then fails at the broken D1 write; it stays running with its checkpoint.
      await eventually(async () => (await queueSpecs(key))[0]?.state === "running");
      await sleep(100);
      expect(await runOf(ack.runId)).toMatchObject({ status: "running" });
      await abortAllDurableObjects();
      await runDurableObjectAlarm(actor(key));
      expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });

      const transcript = await rpc<{ messages: TranscriptMessage[] }>("chat.history", {
        sessionKey: key,
        includeTools: true,
        limit: 1000,
      });
      const all = transcript.payload.messages;
      expectNoDuplicates(all);
      const thisRun = all.filter((m) => m.id.startsWith(ack.runId));
      expect(thisRun.map((m) => m.role)).toEqual(roles);
      expect(all.map((m) => m.role)).toEqual(["user", "assistant", ...roles]);
      expect(line(thisRun[0]!)).toBe(`user:${text}`);

      await eventually(async () => (await deliveryOf(ack.runId))?.status === "delivered");
      await sleep(200);
      expect(repliesTo(w, ack.runId)).toHaveLength(1);
      expect(repliesTo(w, ack.runId)[0]!.body.text).toBe((await runOf(ack.runId)).reply);
      expect(await deliveryOf(ack.runId)).toMatchObject({ status: "delivered", attempts: 1 });
      expect(await runOf(ack.runId)).toMatchObject({ status: "ok", delivered: true });
    });
  }
});

describe("inline first delivery: the reply is posted before the run's finalize batch", () => {
  it("posts the reply before the run is finalized and writes the delivery row once, delivered", async () => {
    const id = "fp-deliver-up";
    const { w } = await scene(id, { config: scripted() });
    w.holdConnector = true;

    const ack = await send(id, "deliver me");
    // The POST is in flight (held): the run is not finalized and no delivery row exists yet.
    await eventually(async () => w.connectorAttempts === 1);
    expect(await runOf(ack.runId)).toMatchObject({ status: "running" });
    expect((await runOf(ack.runId)).delivered).toBeUndefined();
    expect(await deliveryOf(ack.runId)).toBeUndefined();

    w.holdConnector = false;
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    const delivery = await deliveryOf(ack.runId);
    expect(delivery).toMatchObject({
      status: "delivered",
      attempts: 1,
      runId: ack.runId,
      text: "re: deliver me",
      deliveredAt: expect.any(Number),
    });
    expect(delivery?.lastError).toBeUndefined();
    expect(delivery?.nextAttemptAt).toBeUndefined();
    expect(await runOf(ack.runId)).toMatchObject({ status: "ok", delivered: true });

    // The row was inserted once, after the POST, and never updated.
    const post = w.events.indexOf(`post ${ack.runId}:reply`);
    const inserts = w.events.flatMap((e, i) => (/^sql insert into "deliveries"/i.test(e) ? [i] : []));
    expect(inserts).toHaveLength(1);
    expect(inserts[0]).toBeGreaterThan(post);
    expect(w.events.filter((e) => /^sql update "deliveries"/i.test(e))).toEqual([]);
    await sleep(200);
    expect(w.connectorAttempts).toBe(1);
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
  });

  it("records a failed first attempt as retrying, then delivers once on the retry", async () => {
    const id = "fp-deliver-retry";
    // A retry delay long enough to look at the row before the retry.
    const { w } = await scene(id, {
      config: scripted({ delivery: { maxAttempts: 3, baseDelayMs: 1000, maxDelayMs: 1000 } }),
    });
    w.connectorStatus = 503;

    const ack = await send(id, "try again");
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    const retrying = await deliveryOf(ack.runId);
    expect(retrying).toMatchObject({ status: "retrying", attempts: 1, nextAttemptAt: expect.any(Number) });
    expect(retrying?.lastError).toMatch(/connector answered 503/);
    const run = await runOf(ack.runId);
    expect(run.status).toBe("ok");
    expect(run.delivered ?? null).toBeNull();
    expect(w.connectorAttempts).toBe(1);
    expect(w.events.filter((e) => /^sql update "deliveries"/i.test(e))).toEqual([]);

    w.connectorStatus = 200;
    // The outbox retries on the actor's alarm once the backoff has passed.
    const delivered = await eventually(async () => {
      const d = await deliveryOf(ack.runId);
      return d?.status === "delivered" ? d : undefined;
    }, 10_000);
    expect(delivered).toMatchObject({ attempts: 2, deliveredAt: expect.any(Number) });
    expect(delivered.lastError).toBeUndefined();
    await sleep(200);
    expect(w.connectorAttempts).toBe(2);
    expect(w.delivered).toHaveLength(1);
    expect(w.delivered[0]!.body).toMatchObject({ deliveryId: `${ack.runId}:reply`, text: "re: try again" });
  });

  it("marks the delivery dead on its only attempt and the run undelivered", async () => {
    const id = "fp-deliver-dead";
    const { w } = await scene(id, {
      config: scripted({ delivery: { maxAttempts: 1, baseDelayMs: 50, maxDelayMs: 200 } }),
    });
    w.connectorStatus = 500;

    const ack = await send(id, "nobody home");
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    const dead = await deliveryOf(ack.runId);
    expect(dead).toMatchObject({ status: "dead", attempts: 1 });
    expect(dead?.lastError).toMatch(/connector answered 500/);
    expect(dead?.nextAttemptAt).toBeUndefined();
    expect(await runOf(ack.runId)).toMatchObject({ status: "ok", delivered: false });
    expect(await deliveryOf(ack.runId, "dead")).toMatchObject({ status: "dead" });
    await sleep(300);
    expect(w.connectorAttempts).toBe(1);
    expect(w.delivered).toHaveLength(0);
    expect(await deliveryOf(ack.runId)).toMatchObject({ status: "dead", attempts: 1 });
  });

  /**
   * The reply's first attempt fails (503), then the finalize batch fails (the process dies):
   * the checkpoint holds that attempt, the outbox row waits for its retry. The connector is
   * back by the time the actor restarts; the retry (in the background) and the resumed run
   * (after its attempt's backoff) each record what they know, in either order.
   */
  async function failedFirstAttemptThenCrash(id: string, beforeResume?: (key: string) => Promise<void>) {
    const w = world();
    restore = w.restore;
    const key = group(id);
    const warm = await send(id, "warm up");
    expect((await waitRun(warm.runId)).status).toBe("ok");
    await eventually(async () => w.delivered.length === 1);

    await setupActor(key, w, { config: echoWriteThrough(), breakAfter: 1 });
    w.connectorStatus = 503;
    const ack = await send(id, "down then crash");
    await eventually(async () => postsOf(w, ack.runId) === 1);
    await sleep(100);
    // Not finalized: no run outcome, no delivery row.
    expect(await runOf(ack.runId)).toMatchObject({ status: "running" });
    expect(await deliveryOf(ack.runId)).toBeUndefined();
    await abortAllDurableObjects();
    // Back only now: retries the dying instance made in the background failed too.
    w.connectorStatus = 200;
    await beforeResume?.(key);
    await runDurableObjectAlarm(actor(key));
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    await sleep(300);
    return { w, key, ack };
  }

  it("delivers the reply once when the run is resumed after a failed first attempt", async () => {
    const { w, key, ack } = await failedFirstAttemptThenCrash("fp-deliver-resume");
    expect(postsOf(w, ack.runId)).toBeGreaterThanOrEqual(2);
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
    expect(repliesTo(w, ack.runId)[0]!.body.text).toBe("echo: down then crash");
    const transcript = await history(key);
    expectNoDuplicates(transcript);
    expect(transcript.map(line)).toEqual([
      "user:warm up",
      "assistant:echo: warm up",
      "user:down then crash",
      "assistant:echo: down then crash",
    ]);
  });

  it("records the delivery it attempted even if send policy changed before the resume", async () => {
    const { w, ack } = await failedFirstAttemptThenCrash("fp-deliver-resume-deny", async (key) => {
      const patched = await rpc("sessions.patch", { key, sendPolicy: "deny" });
      expect(patched.status).toBe(200);
    });
    // The reply was already on its way: its row exists and its retry is recorded on it.
    expect(await deliveryOf(ack.runId)).toMatchObject({ status: "delivered", attempts: 2 });
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
  });

  // The retry records its outcome whether or not the resumed finalize has written the row yet.
  it("records the retried delivery as delivered when the run is resumed after a failed first attempt", async () => {
    const { ack } = await failedFirstAttemptThenCrash("fp-deliver-resume-row");
    expect(await deliveryOf(ack.runId)).toMatchObject({ status: "delivered", attempts: 2 });
  });
});

describe("direct start: a message to an idle session runs without waiting for an alarm", () => {
  it("runs the message and the one queued behind it with the alarm never firing; the alarm left is a backstop", async () => {
    const id = "fp-direct";
    const { w, key } = await scene(id, { config: scripted() });
    // Alarms that fire do nothing here: every run below must start without one.
    let alarms = 0;
    await runInDurableObject(actor(key), (instance: SessionActor) => {
      Object.defineProperty(instance, "alarm", {
        configurable: true,
        value: async () => {
          alarms++;
        },
      });
    });
    w.holdModel = true;
    const first = await send(id, "first");
    await eventually(async () => w.requests.length === 1);
    // While the run is under way, its alarm is only the backstop of a process that dies.
    const backstop = await runInDurableObject(actor(key), (_i, state) => state.storage.getAlarm());
    expect(backstop).toBeGreaterThan(Date.now() + 5_000);
    const second = await send(id, "second");
    w.holdModel = false;
    expect(await waitRun(first.runId)).toMatchObject({ status: "ok" });
    // The run queued behind the first starts when the first ends, not at an alarm.
    expect(await waitRun(second.runId)).toMatchObject({ status: "ok" });
    await eventually(async () => w.delivered.length === 2);
    expect(w.delivered.map((d) => d.body.text)).toEqual(["re: first", "re: second"]);
    expect(alarms).toBe(0);
  });
});

describe("an alarm with a delivery due", () => {
  it("runs the head at once while the delivery's POST hangs, and records both", async () => {
    const w = world();
    restore = w.restore;
    const id = "fp-hung-retry";
    const key = group(id);
    const warm = await send(id, "warm up");
    await waitRun(warm.runId);
    await setupActor(key, w, { config: scripted({}) });

    // A reply whose first attempt fails: its retry is due 50 ms later.
    w.connectorStatus = 503;
    const first = await send(id, "first");
    await waitRun(first.runId);
    expect(await deliveryOf(first.runId)).toMatchObject({ status: "retrying", attempts: 1 });

    // The retry's POST hangs; the next message's run does not wait for it.
    w.connectorStatus = 200;
    w.holdConnector = true;
    await eventually(async () => postsOf(w, first.runId) === 2);
    const a = await send(id, "part one");
    expect((await waitRun(a.runId)).status).toBe("ok");
    expect(postsOf(w, first.runId)).toBe(2);
    expect(await deliveryOf(first.runId)).toMatchObject({ status: "retrying", attempts: 1 });
    w.holdConnector = false;

    const transcript = await history(key);
    expectNoDuplicates(transcript);
    expect(transcript.map(line).slice(-2)).toEqual(["user:part one", "assistant:re: part one"]);
    await eventually(async () => repliesTo(w, a.runId).length === 1);
    await eventually(async () => (await deliveryOf(first.runId))?.status === "delivered");
    expect(await deliveryOf(first.runId)).toMatchObject({ status: "delivered", attempts: 2 });
  });
});

describe("write-behind: a connector's message is recorded with its run's next write", () => {
  const behind = () => scripted({ session: { writeBehind: true } });
  const journalRows = (key: string) =>
    runInDurableObject(
      actor(key),
      (_instance, state) =>
        state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM d1_pending`).one().n,
    );
  const inboundRows = async (runId: string) =>
    (
      await env.DB.prepare(`select count(*) as n from inbound where run_id = ?`)
        .bind(runId)
        .first<{ n: number }>()
    )?.n;

  it("writes a quick run's whole life in one D1 batch: entry, run, input, inbound row, reply, delivery", async () => {
    const id = "wb-one-batch";
    const { w, key } = await scene(id, { config: behind() });

    const ack = await send(id, "hello");
    // agent.wait finds the run although the ack came before its record.
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    expect(batches(w)).toEqual([expect.stringMatching(/^batch \d+$/)]);
    expect(await runOf(ack.runId)).toMatchObject({ status: "ok", reply: "re: hello", delivered: true });
    expect((await history(key)).map(line)).toEqual(["user:hello", "assistant:re: hello"]);
    expect(await inboundRows(ack.runId)).toBe(1);
    expect(await deliveryOf(ack.runId)).toMatchObject({ status: "delivered", attempts: 1 });
    expect(await runStatusOf(key)).toBe("idle");
    expect(await journalRows(key)).toBe(0);

    // The next message of the session: one batch again.
    const next = await send(id, "again");
    expect(await waitRun(next.runId)).toMatchObject({ status: "ok" });
    expect(batches(w)).toHaveLength(2);
    expect((await history(key)).map(line)).toEqual([
      "user:hello",
      "assistant:re: hello",
      "user:again",
      "assistant:re: again",
    ]);
  });

  it("writes the records of a run still going within RECORDS_DELAY_MS of the ack", async () => {
    const id = "wb-long-run";
    const { w, key } = await scene(id, { config: behind() });
    w.holdModel = true;

    const ack = await send(id, "think hard");
    await eventually(async () => w.requests.length === 1);
    // Held by the actor, durably, until a write carries it or its timer writes it alone.
    expect(await journalRows(key)).toBe(1);
    await eventually(async () => (await journalRows(key)) === 0);
    expect(batches(w)).toHaveLength(1);
    expect(await runOf(ack.runId)).toMatchObject({ status: "running", startedAt: expect.any(Number) });
    expect((await history(key)).map(line)).toEqual(["user:think hard"]);
    expect(await runStatusOf(key)).toBe("running");
    expect(await journalRows(key)).toBe(0);
    expect(batches(w)).toHaveLength(1);

    w.holdModel = false;
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    expect(batches(w)).toHaveLength(2);
    const transcript = await history(key);
    expect(transcript.map(line)).toEqual(["user:think hard", "assistant:re: think hard"]);
    expectNoDuplicates(transcript);
  });

  it("answers runs.get and agent.wait for a run id at once, before its records reach D1", async () => {
    const id = "wb-read-at-once";
    const { w, key } = await scene(id, { config: behind() });
    w.holdModel = true;

    const ack = await send(id, "are you there");
    await eventually(async () => w.requests.length === 1);
    expect(await journalRows(key)).toBe(1);
    // The run id names its session: its actor writes what it holds, and D1 answers.
    const wait = await rpc("agent.wait", { runId: ack.runId, timeoutMs: 0 });
    expect(wait).toMatchObject({ status: 200, payload: { status: "timeout", runStatus: "running" } });
    expect(await runOf(ack.runId)).toMatchObject({ status: "running", startedAt: expect.any(Number) });
    expect(await journalRows(key)).toBe(0);
    // An id nobody handed out is still unknown.
    const unknown = `${ack.runId.slice(0, 19)}${"0".repeat(17)}`;
    expect(await rpc("runs.get", { runId: unknown })).toMatchObject({ status: 404 });
    expect(await rpc("agent.wait", { runId: unknown, timeoutMs: 0 })).toMatchObject({ status: 404 });

    w.holdModel = false;
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    expect(await runOf(ack.runId)).toMatchObject({ status: "ok", reply: "re: are you there" });
  });

  it("never moves the entry back when a deferred write lands after a newer one", async () => {
    const key = group("wb-entry-order");
    const entry = newSessionRow(
      key,
      { agentId: "main", kind: "group", chatType: "group", channel: "telegram" },
      1_000,
      "s-1",
    );
    await env.DB.batch([upsertSessionStatement(env, { ...entry, updatedAt: 2_000, label: "newer" })]);
    await env.DB.batch([
      upsertSessionUnlessNewerStatement(env, { ...entry, updatedAt: 1_500, label: "older" }),
    ]);
    expect((await getSession(env, key))?.label).toBe("newer");
    await env.DB.batch([
      upsertSessionUnlessNewerStatement(env, { ...entry, updatedAt: 2_500, label: "newest" }),
    ]);
    expect((await getSession(env, key))?.label).toBe("newest");
  });
});
