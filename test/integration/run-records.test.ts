/**
 * What a run records, and when (src/session/run/lifecycle.ts): the finalize batch written before
 * the reply's first attempt (SPEC §17: D1 shows what the chat has seen), the `deliveries` row
 * written once with that attempt's outcome by the session's next write (or at once for a failed
 * attempt); a run started at once, without an alarm; an alarm with a delivery due; and a
 * connector's message, which reaches D1 with its run's finalize.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { databaseOfKey } from "../../src/db/placement";
import { getSession, upsertSessionStatement } from "../../src/db/queries";
import { newSessionRow } from "../../src/session/entry/rules";
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
import {
  actor,
  advanceToAlarm,
  backlogOf,
  drain,
  eventually,
  holdClock,
  rpc,
  selectEach,
  waitRun,
} from "./support";

afterEach(() => {
  vi.useRealTimers();
  restoreWorlds();
});

describe("finalized, then replied: the run's records are in D1 before its reply is posted", () => {
  it("writes the run before posting its reply, and the delivery's row once, delivered, with the next write", async () => {
    const id = "fp-deliver-up";
    const { w, key } = await scene(id, { config: scripted() });
    w.holdConnector = true;

    const ack = await send(id, "deliver me");
    // The POST is in flight (held): the run is finalized in D1 already.
    await eventually(async () => w.connectorAttempts === 1);
    expect(await selectEach("SELECT status, reply FROM runs WHERE run_id = ?", ack.runId)).toEqual([
      { status: "ok", reply: "re: deliver me" },
    ]);
    const post = w.events.indexOf(`post ${ack.runId}:reply`);
    expect(w.events.findIndex((e) => e.startsWith("batch "))).toBeLessThan(post);

    w.holdConnector = false;
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    await eventually(async () => w.delivered.length === 1);
    // The outcome waits for the session's next write: no delivery row yet, and no write of its
    // own before its delay (the actor's alarm is that far off).
    await eventually(async () => (await backlogOf(key)).outcomes === 1);
    expect(await backlogOf(key)).toMatchObject({ runs: 0, deliveries: 0, outcomes: 1 });
    const recordAt = await runInDurableObject(
      actor(key),
      (_i, state) => state.storage.sql.exec<{ at: number }>(`SELECT record_at AS at FROM outbox`).one().at,
    );
    expect(recordAt).toBeGreaterThan(Date.now() + 30_000);
    expect(w.events.filter((e) => /^sql insert into "deliveries"/i.test(e))).toEqual([]);
    const next = await send(id, "and then");
    expect(await waitRun(next.runId)).toMatchObject({ status: "ok" });
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
    // The row was inserted once, after the POST, by the next run's finalize, and never updated.
    const inserts = w.events.flatMap((e, i) => (/^sql insert into "deliveries"/i.test(e) ? [i] : []));
    expect(inserts.length).toBeGreaterThanOrEqual(1);
    expect(inserts[0]).toBeGreaterThan(post);
    expect(w.events.filter((e) => /^sql update "deliveries"/i.test(e))).toEqual([]);
    await drain(group(id));
    expect(w.connectorAttempts).toBe(2);
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
  });

  it("records a failed first attempt as retrying at once, then delivers once on the retry", async () => {
    const id = "fp-deliver-retry";
    // A retry delay long enough to look at the row before the retry.
    const { w } = await scene(id, {
      config: scripted({ delivery: { maxAttempts: 3, baseDelayMs: 1000, maxDelayMs: 1000 } }),
    });
    w.connectorStatus = 503;

    const ack = await send(id, "try again");
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    // A delivery in trouble is due to be recorded now: the actor's alarm writes it.
    const retrying = await eventually(async () =>
      (await selectEach("SELECT status FROM deliveries WHERE delivery_id = ?", `${ack.runId}:reply`)).length
        ? deliveryOf(ack.runId)
        : undefined,
    );
    expect(retrying).toMatchObject({ status: "retrying", attempts: 1, nextAttemptAt: expect.any(Number) });
    expect(retrying?.lastError).toMatch(/connector answered 503/);
    const run = await runOf(ack.runId);
    expect(run.status).toBe("ok");
    expect(run.delivered ?? null).toBeNull();
    expect(w.connectorAttempts).toBe(1);

    w.connectorStatus = 200;
    // The outbox retries on the actor's alarm once the backoff has passed.
    const delivered = await eventually(async () => {
      const d = await deliveryOf(ack.runId);
      return d?.status === "delivered" ? d : undefined;
    }, 10_000);
    expect(delivered).toMatchObject({ attempts: 2, deliveredAt: expect.any(Number) });
    expect(delivered.lastError).toBeUndefined();
    expect(await runOf(ack.runId)).toMatchObject({ delivered: true });
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
   * D1 takes the accept and the start, then refuses the finalize batch (and the process dies):
   * the reply is not posted, since D1 does not show the run yet. The next instance resumes
   * the run from its checkpoint, writes it, and only then posts the reply.
   */
  async function finalizeRefusedThenCrash(id: string, beforeResume?: (key: string) => Promise<void>) {
    const w = track(world());
    const key = group(id);
    const warm = await send(id, "warm up");
    expect((await waitRun(warm.runId)).status).toBe("ok");
    await eventually(async () => w.delivered.length === 1);

    await setupActor(key, w, { config: echoWriteThrough(), breakAfter: 2 });
    const ack = await send(id, "refused then crash");
    // The finalize batch failed: the attempt is left for its backoff.
    await eventually(async () =>
      runInDurableObject(
        actor(key),
        (_i, state) =>
          state.storage.sql.exec(`SELECT 1 FROM queue WHERE last_error IS NOT NULL`).toArray().length > 0,
      ),
    );
    // Not finalized: the run as its start left it, and nothing posted.
    expect(await selectEach("SELECT status FROM runs WHERE run_id = ?", ack.runId)).toEqual([
      { status: "running" },
    ]);
    expect(postsOf(w, ack.runId)).toBe(0);
    await abortAllDurableObjects();
    await beforeResume?.(key);
    await runDurableObjectAlarm(actor(key));
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    return { w, key, ack };
  }

  it("posts the reply once, after its records, when the run is resumed after D1 refused its finalize", async () => {
    const { w, key, ack } = await finalizeRefusedThenCrash("fp-deliver-resume");
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
    expect(repliesTo(w, ack.runId)[0]!.body.text).toBe("echo: refused then crash");
    const transcript = await history(key);
    expectNoDuplicates(transcript);
    expect(transcript.map(line)).toEqual([
      "user:warm up",
      "assistant:echo: warm up",
      "user:refused then crash",
      "assistant:echo: refused then crash",
    ]);
    expect(await deliveryOf(ack.runId)).toMatchObject({ status: "delivered", attempts: 1 });
  });

  it("follows the send policy the resumed finalize finds: a reply never posted is not posted", async () => {
    const { w, ack } = await finalizeRefusedThenCrash("fp-deliver-resume-deny", async (key) => {
      const patched = await rpc("sessions.patch", { key, sendPolicy: "deny" });
      expect(patched.status).toBe(200);
    });
    expect(repliesTo(w, ack.runId)).toHaveLength(0);
    expect(await runOf(ack.runId)).toMatchObject({ status: "ok", delivered: false });
    expect(await deliveryOf(ack.runId)).toBeUndefined();
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
    // The clock is held an hour ahead: the retry below waits for the alarm this test runs, not
    // for 50 ms of a loaded machine to pass.
    holdClock();

    // A reply whose first attempt fails: its retry is due 50 ms later.
    w.connectorStatus = 503;
    const first = await send(id, "first");
    await waitRun(first.runId);
    expect(await deliveryOf(first.runId)).toMatchObject({ status: "retrying", attempts: 1 });

    // The retry's POST hangs; the next message's run does not wait for it.
    w.connectorStatus = 200;
    w.holdConnector = true;
    void advanceToAlarm(key);
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

describe("a connector's message reaches D1 with its run's finalize", () => {
  const behind = () => scripted({ session: { writeBehind: true } });
  const journalRows = (key: string) =>
    runInDurableObject(
      actor(key),
      (_instance, state) =>
        state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM d1_pending`).one().n,
    );

  it("writes a run's whole life in one D1 batch: entry, run, input and reply; the delivery with the next", async () => {
    const id = "wb-one-batch";
    const { w, key } = await scene(id, { config: behind() });

    const ack = await send(id, "hello");
    // agent.wait finds the run although the ack came before its record.
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    expect(batches(w)).toEqual([expect.stringMatching(/^batch \d+$/)]);
    expect((await history(key)).map(line)).toEqual(["user:hello", "assistant:re: hello"]);
    expect(await runStatusOf(key)).toBe("idle");
    expect(await journalRows(key)).toBe(0);

    // The next message of the session: one batch again, carrying the first reply's outcome.
    const next = await send(id, "again");
    expect(await waitRun(next.runId)).toMatchObject({ status: "ok" });
    expect(batches(w)).toHaveLength(2);
    expect((await history(key)).map(line)).toEqual([
      "user:hello",
      "assistant:re: hello",
      "user:again",
      "assistant:re: again",
    ]);
    // One statement per table: the entry, the usage rollup's two tables, the run, the input and
    // reply (one statement); the first also the transcript's row, the second the first reply's
    // delivery.
    expect(batches(w)).toEqual(["batch 6", "batch 6"]);
    expect(
      await selectEach("SELECT status FROM deliveries WHERE delivery_id = ?", `${ack.runId}:reply`),
    ).toEqual([{ status: "delivered" }]);
    expect(await runOf(ack.runId)).toMatchObject({ status: "ok", reply: "re: hello", delivered: true });
  });

  it("writes nothing of a run still going: its records wait in its actor, however long the model takes", async () => {
    const id = "wb-long-run";
    const { w, key } = await scene(id, { config: behind() });
    w.holdModel = true;

    const ack = await send(id, "think hard");
    await eventually(async () => w.requests.length === 1);
    // runs.get asks the actor, which holds the run; D1 has nothing of it, and no write is due.
    expect(await runOf(ack.runId)).toMatchObject({ status: "running", startedAt: expect.any(Number) });
    expect(batches(w)).toHaveLength(0);
    expect(await journalRows(key)).toBe(0);
    // A new session: D1 knows it from its first run's finalize on.
    expect(await rpc("chat.history", { sessionKey: key })).toMatchObject({ status: 404 });

    w.holdModel = false;
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    expect(batches(w)).toHaveLength(1);
    const transcript = await history(key);
    expect(transcript.map(line)).toEqual(["user:think hard", "assistant:re: think hard"]);
    expectNoDuplicates(transcript);
  });

  it("answers runs.get and agent.wait for a run id at once, before its records reach D1", async () => {
    const id = "wb-read-at-once";
    const { w } = await scene(id, { config: behind() });
    w.holdModel = true;

    const ack = await send(id, "are you there");
    await eventually(async () => w.requests.length === 1);
    // The run id names its session: its actor answers for the run it holds.
    const wait = await rpc("agent.wait", { runId: ack.runId, timeoutMs: 0 });
    expect(wait).toMatchObject({ status: 200, payload: { status: "timeout", runStatus: "running" } });
    expect(await runOf(ack.runId)).toMatchObject({
      status: "running",
      trigger: "inbound",
      startedAt: expect.any(Number),
    });
    expect(batches(w)).toHaveLength(0);
    // An id nobody handed out is still unknown.
    const unknown = `${ack.runId.slice(0, 19)}${"0".repeat(17)}`;
    expect(await rpc("runs.get", { runId: unknown })).toMatchObject({ status: 404 });
    expect(await rpc("agent.wait", { runId: unknown, timeoutMs: 0 })).toMatchObject({ status: 404 });

    w.holdModel = false;
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    expect(await runOf(ack.runId)).toMatchObject({ status: "ok", reply: "re: are you there" });
  });

  it("writes a busy session's runs one batch each, the earlier replies' outcomes carried by the later ones", async () => {
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
    for (const ack of acks) expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });

    // One round trip per run (the queued messages may be merged into fewer runs), and no
    // write of its own for a delivery's outcome: each rides with a later run's finalize.
    const written = batches(w).slice(before);
    const runs = new Set(
      (await selectEach<{ run_id: string }>("SELECT run_id FROM runs WHERE session_key = ?", key)).map(
        (r) => r.run_id,
      ),
    );
    expect(written.length).toBe(runs.size - 1);
    for (const b of written) expect(Number(b.slice("batch ".length))).toBeLessThanOrEqual(6);
    const transcript = await history(key);
    expectNoDuplicates(transcript);
    const users = transcript.map(line).filter((l) => l.startsWith("user:m"));
    expect(users).toEqual(acks.map((_, i) => `user:m${i}`));
    for (const ack of acks) {
      expect(await runOf(ack.runId)).toMatchObject({ status: "ok" });
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
    await db.batch([
      upsertSessionStatement(db, { ...entry, updatedAt: 1_500, label: "older" }, { unlessNewer: true }),
    ]);
    expect((await getSession(env, key))?.label).toBe("newer");
    await db.batch([
      upsertSessionStatement(db, { ...entry, updatedAt: 2_500, label: "newest" }, { unlessNewer: true }),
    ]);
    expect((await getSession(env, key))?.label).toBe("newest");
    // As new as the stored one (the same admission, landing late): left alone.
    await db.batch([
      upsertSessionStatement(db, { ...entry, updatedAt: 2_500, label: "same" }, { unlessNewer: true }),
    ]);
    expect((await getSession(env, key))?.label).toBe("newest");
  });
});
