/**
 * What a run records, and when (src/session/lifecycle.ts): the reply's first attempt made
 * before the finalize batch, which writes the `deliveries` row once with that attempt's
 * outcome; a run started at once, without an alarm; an alarm with a delivery due; and a
 * connector's message written behind, with its run's next write.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { databaseOfKey } from "../../src/db/placement";
import { getSession, upsertSessionStatement, upsertSessionUnlessNewerStatement } from "../../src/db/queries";
import { newSessionRow } from "../../src/session/entry";
import {
  batches,
  deliveryOf,
  echoWriteThrough,
  expectNoDuplicates,
  line,
  postsOf,
  repliesTo,
  restoreWorlds,
  runOf,
  runStatusOf,
  scene,
  scripted,
  send,
  setupActor,
  track,
  world,
} from "./lifecycle-world";
import { group, history } from "./model-support";
import { actor, drain, eventually, holdClock, rpc, selectEach, waitRun } from "./support";

afterEach(() => {
  vi.useRealTimers();
  restoreWorlds();
});

describe("replied: the reply is posted before the run's finalize batch", () => {
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
    await drain(group(id));
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
    await drain(group(id));
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
    await drain(group(id));
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
    const w = track(world());
    const key = group(id);
    const warm = await send(id, "warm up");
    expect((await waitRun(warm.runId)).status).toBe("ok");
    await eventually(async () => w.delivered.length === 1);

    // D1 takes the accept and the start, then fails from the finalize batch on.
    await setupActor(key, w, { config: echoWriteThrough(), breakAfter: 2 });
    w.connectorStatus = 503;
    const ack = await send(id, "down then crash");
    await eventually(async () => postsOf(w, ack.runId) === 1);
    // The finalize batch failed: the attempt is left for its backoff.
    await eventually(async () =>
      runInDurableObject(
        actor(key),
        (_i, state) =>
          state.storage.sql.exec(`SELECT 1 FROM queue WHERE last_error IS NOT NULL`).toArray().length > 0,
      ),
    );
    // Not finalized: no run outcome, no delivery row.
    expect(await runOf(ack.runId)).toMatchObject({ status: "running" });
    expect(await deliveryOf(ack.runId)).toBeUndefined();
    await abortAllDurableObjects();
    // Back only now: retries the dying instance made in the background failed too.
    w.connectorStatus = 200;
    await beforeResume?.(key);
    await runDurableObjectAlarm(actor(key));
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    await drain(key);
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
    // The clock is held an hour ahead: every alarm the actor sets is an hour away, so none goes
    // off during the test, and every run below must start without one.
    const now = holdClock();
    w.holdModel = true;
    const first = await send(id, "first");
    await eventually(async () => w.requests.length === 1);
    // While the run is under way, its alarm is only the backstop of a process that dies.
    const backstop = await runInDurableObject(actor(key), (_i, state) => state.storage.getAlarm());
    expect(backstop).toBeGreaterThan(now + 5_000);
    const second = await send(id, "second");
    w.holdModel = false;
    expect(await waitRun(first.runId)).toMatchObject({ status: "ok" });
    // The run queued behind the first starts when the first ends, not at an alarm.
    expect(await waitRun(second.runId)).toMatchObject({ status: "ok" });
    await eventually(async () => w.delivered.length === 2);
    expect(w.delivered.map((d) => d.body.text)).toEqual(["re: first", "re: second"]);
    // Nothing is left for an alarm: the one pending (an hour away) finds nothing due.
    await drain(key);
  });
});

describe("an alarm with a delivery due", () => {
  it("runs the head at once while the delivery's POST hangs, and records both", async () => {
    const w = track(world());
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
  // In every database: a connector's message is deduped by its session's actor alone, and no
  // D1 row is written for it.
  const inboundRows = async (runId: string) =>
    (await selectEach("select 1 from inbound where run_id = ?", runId)).length;

  it("writes a quick run's whole life in one D1 batch: entry, run, input, reply, delivery (no inbound row)", async () => {
    const id = "wb-one-batch";
    const { w, key } = await scene(id, { config: behind() });

    const ack = await send(id, "hello");
    // agent.wait finds the run although the ack came before its record.
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    expect(batches(w)).toEqual([expect.stringMatching(/^batch \d+$/)]);
    expect(await runOf(ack.runId)).toMatchObject({ status: "ok", reply: "re: hello", delivered: true });
    expect((await history(key)).map(line)).toEqual(["user:hello", "assistant:re: hello"]);
    expect(await inboundRows(ack.runId)).toBe(0);
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
    // One statement per table (record-statements.ts): the entry, the run, the input and reply
    // (one statement), the delivery; the first also the transcript's row.
    expect(batches(w)).toEqual(["batch 5", "batch 4"]);
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

  it("writes a busy session's runs together: several runs share a batch, one statement per table", async () => {
    const id = "wb-busy";
    const { w, key } = await scene(id, { config: behind() });
    const warm = await send(id, "warm up");
    expect(await waitRun(warm.runId)).toMatchObject({ status: "ok" });
    const before = batches(w).length;

    // The first run holds the model; five more messages queue behind it.
    w.holdModel = true;
    const first = await send(id, "m0");
    await eventually(async () => w.requests.length === 2);
    const acks = [first];
    for (let i = 1; i <= 5; i++) acks.push(await send(id, `m${i}`));
    w.holdModel = false;
    // Waiting for the last one writes what the session still holds (agent.wait answers once D1
    // shows the run).
    for (const ack of acks) expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });

    const written = batches(w).slice(before);
    const statements = written.reduce((n, b) => n + Number(b.slice("batch ".length)), 0);
    const messages = acks.length;
    // Runs of a busy session share batches: far fewer than a batch of 5 per message.
    expect(written.length).toBeLessThan(messages);
    expect(statements / messages).toBeLessThanOrEqual(2);
    const transcript = await history(key);
    expectNoDuplicates(transcript);
    // The queued messages may be merged into fewer runs; every one is answered once, in order.
    const users = transcript.map(line).filter((l) => l.startsWith("user:m"));
    expect(users).toEqual(acks.map((_, i) => `user:m${i}`));
    for (const ack of acks) {
      expect(await runOf(ack.runId)).toMatchObject({ status: "ok" });
      expect(await inboundRows(ack.runId)).toBe(0);
    }
    await drain(key);
    expect(await journalRows(key)).toBe(0);
  });

  it("never moves the entry back when a deferred write lands after a newer one", async () => {
    const key = group("wb-entry-order");
    const entry = newSessionRow(
      key,
      { agentId: "main", kind: "group", chatType: "group", channel: "telegram" },
      1_000,
      "s-1",
    );
    const db = databaseOfKey(env, key);
    await db.batch([upsertSessionStatement(db, { ...entry, updatedAt: 2_000, label: "newer" })]);
    await db.batch([upsertSessionUnlessNewerStatement(db, { ...entry, updatedAt: 1_500, label: "older" })]);
    expect((await getSession(env, key))?.label).toBe("newer");
    await db.batch([upsertSessionUnlessNewerStatement(db, { ...entry, updatedAt: 2_500, label: "newest" })]);
    expect((await getSession(env, key))?.label).toBe("newest");
    // As new as the stored one (the same admission, landing late): left alone.
    await db.batch([upsertSessionUnlessNewerStatement(db, { ...entry, updatedAt: 2_500, label: "same" })]);
    expect((await getSession(env, key))?.label).toBe("newest");
  });
});
