/**
 * Where a run's time went, and its usage as data points (SPEC §21), in workerd: `runs.get`'s
 * timeline (the queue, each model call and tool, the delivery) for a run that ended and for one
 * still running; the spans survive a crash of the run; a refused call is a span; with
 * `observability.analyticsEngine` every model call and run end is one data point (against a
 * recording binding), and without the binding nothing fails. A reached budget's run resumed
 * after a crash still makes no model call and its chat hears once.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { usageRollupStatements } from "../../src/db/usage";
import { localDay } from "../../src/time/zones";
import type { TimelineSpan } from "../../src/transcript/message";
import {
  crash,
  heldTurn,
  repliesTo,
  restoreWorlds,
  scene,
  scripted,
  send,
  setupActor,
} from "./lifecycle-world";
import {
  CONNECTORS,
  group,
  type ModelAnswer,
  type ModelRequest,
  SCRIPTED_MODEL_CONFIG,
  sayInGroup,
  scriptedGroup,
  scriptedWorld,
} from "./model-support";
import { actor, changeActorEnv, drain, eventually, rpc, waitRun } from "./support";

afterEach(restoreWorlds);

interface RunView {
  status: string;
  timeline: TimelineSpan[];
  usage?: { inputTokens: number; outputTokens: number; costUsd: number | null; modelCalls: number };
}

const runView = async (runId: string) => (await rpc<RunView>("runs.get", { runId })).payload;
const shape = (spans: TimelineSpan[]) =>
  spans.map((s) => [s.phase, s.name, s.outcome].filter(Boolean).join(" "));

function expectOrdered(spans: TimelineSpan[]) {
  for (const [i, s] of spans.entries()) {
    expect(s.ms).toBeGreaterThanOrEqual(0);
    if (i > 0) expect(s.startedAt).toBeGreaterThanOrEqual(spans[i - 1]!.startedAt);
  }
}

describe("runs.get timeline", () => {
  it("the queue, each model call and tool, and the delivery, in start order", async () => {
    const id = "timeline-tool";
    const { w, key } = await scene(id, { config: scripted() });
    w.callTool = (text) => (text === "what time is it" ? { name: "current_time" } : undefined);
    const ack = await send(id, "what time is it");
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    const run = await runView(ack.runId);
    expect(shape(run.timeline)).toEqual([
      "queued",
      "model fake/m ok",
      "tool current_time ok",
      "model fake/m ok",
      "delivery reply delivered",
    ]);
    expectOrdered(run.timeline);
    // A listing leaves the timeline to runs.get.
    const listed = await rpc<{ runs: Array<Record<string, unknown>> }>("runs.list", { sessionKey: key });
    expect(listed.payload.runs.find((r) => r.runId === ack.runId)).not.toHaveProperty("timeline");
  });

  it("shows a running run as far as it went, and keeps its spans across a crash", async () => {
    const id = "timeline-crash";
    const { w, key } = await scene(id, { config: scripted() });
    // The first model step asks for a tool; the second is held, then the process dies.
    w.callTool = (text) => (text === "tool then wait" ? { name: "current_time" } : undefined);
    w.holdCall = (n) => n === 1;
    const ack = await send(id, "tool then wait");
    await eventually(async () => w.requests.length === 2);
    const running = await runView(ack.runId);
    expect(running.status).toBe("running");
    expect(shape(running.timeline)).toEqual(["queued", "model fake/m ok", "tool current_time ok"]);

    await crash(w);
    await setupActor(key, w, { config: scripted() });
    await runDurableObjectAlarm(actor(key));
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    // The call cut off by the crash was made again: it has no span, its second making has one.
    expect(shape((await runView(ack.runId)).timeline)).toEqual([
      "queued",
      "model fake/m ok",
      "tool current_time ok",
      "model fake/m ok",
      "delivery reply delivered",
    ]);
  });

  it("a call cut off by /stop is an aborted span", async () => {
    const id = "timeline-abort";
    const { w } = await scene(id, { config: scripted() });
    const held = await heldTurn(w, id, "stop me");
    await send(id, "/stop");
    expect(await waitRun(held.runId)).toMatchObject({ status: "aborted" });
    expect(shape((await runView(held.runId)).timeline)).toEqual(["queued", "model fake/m aborted"]);
  });
});

// ─── Analytics Engine ────────────────────────────────────────────────────────────────────────

const USAGE = { prompt_tokens: 1_000, completion_tokens: 100, total_tokens: 1_100 };
const PRICE = { input: 3, output: 15 };

function script(req: ModelRequest): ModelAnswer {
  if (req.lastRole === "tool") return { text: "done", usage: USAGE };
  if (req.lastUser === "tool") return { tool: "current_time", args: {}, usage: USAGE };
  if (req.lastUser === "fail") return { status: 400, error: "bad request" };
  return { text: `answer to ${req.lastUser}`, usage: USAGE };
}

/** An Analytics Engine binding that keeps what is written. */
function recordingDataset() {
  const points: AnalyticsEngineDataPoint[] = [];
  return { points, dataset: { writeDataPoint: (p?: AnalyticsEngineDataPoint) => void points.push(p ?? {}) } };
}

describe("Analytics Engine data points", () => {
  it("one per model call and one per run end, with the agent, model, channel, tokens and cost", async () => {
    const world = scriptedWorld(script);
    const id = "ae-points";
    const key = group(id);
    await scriptedGroup(id);
    const { points, dataset } = recordingDataset();
    await changeActorEnv(key, {
      config: {
        ...SCRIPTED_MODEL_CONFIG,
        connectors: CONNECTORS,
        models: { ...SCRIPTED_MODEL_CONFIG.models, pricing: { "fake/m": PRICE } },
        observability: { analyticsEngine: "USAGE" },
      },
      vars: { USAGE: dataset },
    });

    const runId = await sayInGroup(id, "tool");
    const callUsd = (1_000 * 3 + 100 * 15) / 1_000_000;
    const call = {
      indexes: ["main"],
      blobs: ["main", "fake/m", "telegram", "model_call", "ok"],
      doubles: [1_000, 100, 0, 0, callUsd, expect.any(Number), 1, 0],
    };
    expect(points).toEqual([
      call,
      call,
      {
        indexes: ["main"],
        blobs: ["main", "fake/m", "telegram", "run", "ok"],
        doubles: [2_000, 200, 0, 0, 2 * callUsd, expect.any(Number), 2, 0],
      },
    ]);
    // The run's point says what runs.get says.
    const run = await runView(runId);
    expect(run.usage).toMatchObject({ inputTokens: 2_000, outputTokens: 200, modelCalls: 2 });
    expect(run.usage?.costUsd).toBeCloseTo(points[2]!.doubles![4]!, 12);

    // A failed call is a point with its outcome, and so is the run's end.
    points.length = 0;
    expect((await runView(await sayInGroup(id, "fail"))).status).toBe("error");
    expect(points.map((p) => p.blobs?.slice(3))).toEqual([
      ["model_call", "error"],
      ["run", "error"],
    ]);
    world.restore();
  });

  it("writes nothing and fails nothing when the binding is missing", async () => {
    const world = scriptedWorld(script);
    const id = "ae-missing";
    await scriptedGroup(id, { observability: { analyticsEngine: "NO_SUCH_DATASET" } });
    expect((await runView(await sayInGroup(id, "hello again"))).status).toBe("ok");
    await eventually(async () => world.delivered.some((d) => d.body.text === "answer to hello again"));
    world.restore();
  });
});

// ─── budgets across a crash ──────────────────────────────────────────────────────────────────

describe("a reached budget across a crash", () => {
  it("a run refused and then resumed after D1 refused its finalize: no model call, one notice", async () => {
    const id = "budget-crash";
    const config = scripted({
      agents: { defaults: { model: "fake/m", budget: { sessionDailyUsd: 0.01 } } },
    });
    const { w, key } = await scene(id, { config });
    const warm = await send(id, "warm up");
    expect(await waitRun(warm.runId)).toMatchObject({ status: "ok" });
    await drain(key);
    // Today's spend of this session reaches its budget (as runs' finalizes add it).
    await env.DB.batch(
      usageRollupStatements(env.DB, {
        runId: "budget-crash-spent",
        day: localDay(Date.now(), "UTC"),
        sessionKey: key,
        agentId: "main",
        channel: "telegram",
        model: "fake/m",
        usage: {
          inputTokens: 1,
          outputTokens: 1,
          totalTokens: 2,
          modelCalls: 1,
          unpricedCalls: 0,
          costUsd: 0.02,
        },
      }),
    );
    const calls = w.requests.length;

    // D1 takes the run's accept and start, then refuses its finalize: the process dies.
    await setupActor(key, w, { config, breakAfter: 2 });
    const ack = await send(id, "past the budget");
    await eventually(async () =>
      runInDurableObject(
        actor(key),
        (_i, state) =>
          state.storage.sql.exec(`SELECT 1 FROM queue WHERE last_error IS NOT NULL`).toArray().length > 0,
      ),
    );
    await abortAllDurableObjects();
    await setupActor(key, w, { config });
    await runDurableObjectAlarm(actor(key));
    expect(await waitRun(ack.runId)).toMatchObject({ status: "error", runStatus: "budget_exceeded" });
    await drain(key);

    expect(w.requests.length).toBe(calls);
    const run = await runView(ack.runId);
    expect(run.status).toBe("budget_exceeded");
    expect(shape(run.timeline)).toEqual(["queued", "model fake/m refused", "delivery notice delivered"]);
    const notices = w.delivered.filter((d) => d.body.kind === "notice");
    expect(notices.map((d) => d.body.text)).toEqual([
      "⚠️ This conversation's daily budget is used up; I cannot answer until it resets.",
    ]);
    expect(repliesTo(w, ack.runId)).toHaveLength(0);
  });
});
