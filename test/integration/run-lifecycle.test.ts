/**
 * The run lifecycle (src/session/run/lifecycle.ts), one crash per transition: the process dies
 * right after the transition is durable, while the I/O that follows it is under way (a model
 * call, a POST, a D1 batch is held, then every Durable Object is aborted and what it held
 * fails). The next instance, woken by its alarm, resumes from that state: the run ends once,
 * its messages are stored once, its reply reaches the chat once per delivery id.
 *
 * `finalized` is the D1 batch the reply waits for (SPEC §17: D1 shows what the chat has seen);
 * `replied` is the reply's first attempt after it; a flow run's hand-off before `done` is the
 * `continued` case; `delivered` follows `done` in the background (the `done` case), and the
 * outcome is `recorded` with the session's next write.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, describe, expect, it } from "vitest";
import {
  crash,
  deliveryOf,
  expectNoDuplicates,
  expectTurn,
  repliesTo,
  restoreWorlds,
  runOf,
  scene,
  scripted,
  send,
  setupActor,
  transcriptOf,
  type World,
} from "./lifecycle-world";
import { group } from "./model-support";
import { actor, backlogOf, drain, eventually, rpc, selectEach, waitRun } from "./support";

afterEach(restoreWorlds);

/** The production path: a connector's message, its records written behind. */
const behind = () => scripted({ session: { writeBehind: true } });

/** The process dies (see `crash`); the next instance gets the same world and config. */
async function restart(w: World, key: string): Promise<void> {
  await crash(w);
  await setupActor(key, w, { config: behind() });
}

/**
 * After the crash: the alarm wakes the next instance, the run ends `ok` once, its messages are
 * `roles` (stored once each), and its reply was delivered under one delivery id, with that
 * text (a POST cut short by the crash may be repeated: connectors dedupe by delivery id).
 */
async function resumesOnce(w: World, key: string, runId: string, roles: string[]): Promise<void> {
  await runDurableObjectAlarm(actor(key));
  expect(await waitRun(runId)).toMatchObject({ status: "ok" });
  await drain(key);
  const all = await transcriptOf(key);
  expectNoDuplicates(all);
  expect(all.filter((m) => m.runId === runId || m.id.startsWith(runId)).map((m) => m.role)).toEqual(roles);
  const run = await runOf(runId);
  const replies = repliesTo(w, runId);
  expect(replies.length).toBeGreaterThanOrEqual(1);
  expect(new Set(replies.map((d) => `${d.body.deliveryId} ${d.body.text}`))).toEqual(
    new Set([`${runId}:reply ${run.reply}`]),
  );
  expect(await deliveryOf(runId)).toMatchObject({ status: "delivered" });
  expect(run).toMatchObject({ status: "ok", delivered: true });
  // Nothing is left behind: no run, no owed delivery, no deferred record, no alarm.
  expect(await backlogOf(key)).toMatchObject({ runs: 0, deliveries: 0, records: 0, alarm: null });
}

describe("a crash right after each transition of the run lifecycle", () => {
  it("queued: a run waiting behind another runs once, after it", async () => {
    const id = "lc-queued";
    const { w, key } = await scene(id, { config: behind() });
    w.holdModel = true;
    const first = await send(id, "first");
    await eventually(async () => w.requests.length === 1);
    const second = await send(id, "second");
    await restart(w, key);

    await resumesOnce(w, key, first.runId, ["user", "assistant"]);
    await expectTurn(w, key, second.runId, [
      "user:first",
      "assistant:re: first",
      "user:second",
      "assistant:re: second",
    ]);
  });

  it("started: a run whose model call was under way runs its turn again, once", async () => {
    const id = "lc-started";
    const { w, key } = await scene(id, { config: behind() });
    w.holdModel = true;
    const ack = await send(id, "think");
    await eventually(async () => w.requests.length === 1);
    // Running, checkpointed; D1 gets the run with its finalize (runs.get asks the actor).
    expect(await backlogOf(key)).toMatchObject({ runs: 1, records: 0 });
    expect(await selectEach("SELECT run_id FROM runs WHERE run_id = ?", ack.runId)).toEqual([]);
    expect((await rpc("runs.get", { runId: ack.runId })).payload).toMatchObject({ status: "running" });
    await restart(w, key);

    await resumesOnce(w, key, ack.runId, ["user", "assistant"]);
    // The turn was asked again, with the input once.
    expect(w.requests.at(-1)).toEqual([{ role: "user", text: "think" }]);
  });

  it("stepped: a run whose tool step was checkpointed, its next model call under way, goes on from that step", async () => {
    const id = "lc-stepped";
    const { w, key } = await scene(id, { config: behind() });
    // The first call asks for a tool; the second (answering its result) is held.
    w.callTool = () => {
      w.holdModel = true;
      return { name: "current_time" };
    };
    const ack = await send(id, "what time is it");
    await eventually(async () => w.requests.length === 2);
    // The step is in the checkpoint only: its messages ride on the run's finalize.
    expect(
      await selectEach("SELECT id FROM messages WHERE role = 'toolResult' AND id LIKE ?", `${ack.runId}%`),
    ).toEqual([]);
    await restart(w, key);

    await resumesOnce(w, key, ack.runId, ["user", "assistant", "toolResult", "assistant"]);
    // The tool step was not asked for again: the next model call answered its result.
    expect(w.requests).toHaveLength(3);
    expect(w.requests[2]?.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
  });

  it("ended: a run whose finalize batch was under way writes it once, and only then replies", async () => {
    const id = "lc-ended";
    let held = true;
    const { w, key } = await scene(id, { config: behind(), holdBatch: (n) => n === 0 && held });
    const ack = await send(id, "almost done");
    await eventually(async () => w.events.some((e) => e.startsWith("batch ")));
    // The reply waits for its run's records: nothing was posted while the batch is on its way.
    expect(w.connectorAttempts).toBe(0);
    held = false;
    await restart(w, key);

    await resumesOnce(w, key, ack.runId, ["user", "assistant"]);
    // The model was not asked again: the outcome was durable.
    expect(w.requests).toHaveLength(1);
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
  });

  it("replied: a run whose reply's first attempt was under way delivers it, its records written once", async () => {
    const id = "lc-replied";
    const { w, key } = await scene(id, { config: behind() });
    w.holdConnector = true;
    const ack = await send(id, "reply please");
    await eventually(async () => w.connectorAttempts === 1);
    // The chat is being answered: D1 shows the run's reply already (SPEC §17).
    expect(await selectEach("SELECT status, reply FROM runs WHERE run_id = ?", ack.runId)).toEqual([
      { status: "ok", reply: "re: reply please" },
    ]);
    await restart(w, key);

    await resumesOnce(w, key, ack.runId, ["user", "assistant"]);
    expect(w.requests).toHaveLength(1);
  });

  it("continued: a flow run whose next step was being handed on hands it on once", async () => {
    // A asks B (sessions_send, fire-and-forget); B's run ends with no reply rounds, so its flow
    // goes on with the announce step, enqueued in B itself: its accept is B's third D1 batch
    // (after the message's accept and B's finalize batch), held while the process dies.
    const flows = () =>
      scripted({
        session: { writeBehind: true, agentToAgent: { maxPingPongTurns: 0 } },
        tools: { sessions: { visibility: "all" } },
      });
    const a = "lc-continued-a";
    const b = "lc-continued-b";
    const { w, key: keyA } = await scene(a, { config: flows() });
    const keyB = group(b);
    expect(await waitRun((await send(b, "hello b")).runId)).toMatchObject({ status: "ok" });
    let held = true;
    let reached = false;
    await setupActor(keyB, w, {
      config: flows(),
      holdBatch: (n) => {
        if (n === 2) reached = true;
        return n === 2 && held;
      },
    });
    w.callTool = (text) =>
      text === "ask b"
        ? { name: "sessions_send", args: { sessionKey: keyB, message: "ping", timeoutSeconds: 0 } }
        : undefined;
    expect(await waitRun((await send(a, "ask b")).runId)).toMatchObject({ status: "ok" });
    await eventually(async () => reached);
    // B's run is finalized and not done: it and the announce step it is handing on are queued.
    expect(await backlogOf(keyB)).toMatchObject({ runs: 2 });
    held = false;
    await crash(w);
    await setupActor(keyA, w, { config: flows() });
    await setupActor(keyB, w, { config: flows() });

    await runDurableObjectAlarm(actor(keyB));
    await drain(keyA, keyB);
    const runs = await rpc<{ runs: Array<{ runId: string; trigger: string; status: string }> }>("runs.list", {
      sessionKey: keyB,
      limit: 50,
    });
    // The message from A, and its announce step once.
    expect(runs.payload.runs.map((r) => `${r.trigger}:${r.status}`).sort()).toEqual([
      "announce:ok",
      "inbound:ok",
      "send:ok",
    ]);
    expectNoDuplicates(await transcriptOf(keyB));
    expect(await backlogOf(keyB)).toMatchObject({ runs: 0, deliveries: 0, records: 0, alarm: null });
  });

  it("recorded: a delivered reply's outcome the instance kept is recorded by the next one, posted once", async () => {
    const id = "lc-recorded";
    const { w, key } = await scene(id, { config: behind() });
    const ack = await send(id, "keep it");
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    // Delivered; its outcome waits for the session's next write.
    expect(await backlogOf(key)).toMatchObject({ runs: 0, deliveries: 0, outcomes: 1 });
    expect(
      await selectEach("SELECT status FROM deliveries WHERE delivery_id = ?", `${ack.runId}:reply`),
    ).toEqual([]);
    await restart(w, key);

    const next = await send(id, "and again");
    expect(await waitRun(next.runId)).toMatchObject({ status: "ok" });
    // The next run's finalize carried it.
    expect(
      await selectEach("SELECT status FROM deliveries WHERE delivery_id = ?", `${ack.runId}:reply`),
    ).toEqual([{ status: "delivered" }]);
    await drain(key);
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
    expect(repliesTo(w, next.runId)).toHaveLength(1);
  });

  it("done: a reply whose first attempt failed is delivered once by the next instance", async () => {
    const id = "lc-done";
    // Retries far enough apart that the connector is still owed when the process dies.
    const config = scripted({
      session: { writeBehind: true },
      delivery: { maxAttempts: 8, baseDelayMs: 500, maxDelayMs: 1000 },
    });
    const { w, key } = await scene(id, { config });
    w.connectorStatus = 503;
    const ack = await send(id, "deliver later");
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    // A failed attempt is recorded at once (a delivery in trouble is the operator's to see).
    expect(await deliveryOf(ack.runId)).toMatchObject({ status: "retrying" });
    await crash(w);
    await setupActor(key, w, { config });
    w.connectorStatus = 200;

    await eventually(async () => {
      await runDurableObjectAlarm(actor(key));
      return (await deliveryOf(ack.runId))?.status === "delivered";
    });
    await drain(key);
    expect(repliesTo(w, ack.runId)).toHaveLength(1);
    expect(await backlogOf(key)).toMatchObject({ runs: 0, deliveries: 0, records: 0 });
  });
});
