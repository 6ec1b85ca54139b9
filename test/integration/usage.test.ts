/**
 * Usage and cost per model call, per run and per session (SPEC §21), in workerd: the model's
 * reported usage, cached tokens included, priced by `models.pricing`; a run sums its calls
 * (`runs.get`: `usage`, `costUsd`), the entry sums its runs (`costUsd` on list rows and in
 * `/status`), a reset starts it again; a model without a price costs null, never 0. The rollup
 * behind `usage.summary`: each run added once to its day in the session's timezone, the
 * summary's total the sum of the runs.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { runRecordsStatement } from "../../src/db/run-records";
import { usageRollupStatements } from "../../src/db/usage";
import { localDay } from "../../src/time/zones";
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
import { eventually, rpc } from "./support";

const PRICE = { input: 3, output: 15, cacheRead: 0.3 };
const PRICED = {
  models: { ...SCRIPTED_MODEL_CONFIG.models, pricing: { "fake/m": PRICE } },
};
// 10,000 input tokens of which 6,000 read from the cache, 500 output.
const USAGE = {
  prompt_tokens: 10_000,
  completion_tokens: 500,
  total_tokens: 10_500,
  prompt_tokens_details: { cached_tokens: 6_000 },
};
const CALL_USD = (4_000 * 3 + 6_000 * 0.3 + 500 * 15) / 1_000_000;

/** Calls `current_time` on "tool", then answers; every call reports USAGE. */
function script(req: ModelRequest): ModelAnswer {
  if (req.lastRole === "tool") return { text: "done", usage: USAGE };
  if (req.lastUser === "tool") return { tool: "current_time", args: {}, usage: USAGE };
  return { text: `answer to ${req.lastUser}`, usage: USAGE };
}

interface RunView {
  usage: {
    inputTokens: number;
    outputTokens: number;
    cacheReadTokens: number;
    cacheWriteTokens: number;
    modelCalls: number;
    unpricedCalls: number;
    costUsd: number | null;
  };
  costUsd: number | null;
}

async function listed(key: string) {
  const page = await rpc<{ sessions: Array<{ key: string; costUsd: number; sessionId: string }> }>(
    "sessions.list",
    { limit: 200 },
  );
  return page.payload.sessions.find((s) => s.key === key);
}

describe("usage and cost", () => {
  it("prices each call's fresh, cached and output tokens; a run sums its calls, the entry its runs", async () => {
    const world = scriptedWorld(script);
    const id = "usage-priced";
    const key = group(id);
    await scriptedGroup(id, PRICED);

    const run = (await rpc<RunView>("runs.get", { runId: await sayInGroup(id, "tool") })).payload;
    expect(run.usage).toMatchObject({
      inputTokens: 20_000,
      outputTokens: 1_000,
      cacheReadTokens: 12_000,
      cacheWriteTokens: 0,
      modelCalls: 2,
      unpricedCalls: 0,
    });
    expect(run.costUsd).toBeCloseTo(2 * CALL_USD, 12);
    expect(run.usage.costUsd).toBeCloseTo(0.0426, 12);

    await sayInGroup(id, "again");
    expect((await listed(key))?.costUsd).toBeCloseTo(3 * CALL_USD, 12);
    // /status shows it (its notice is delivered to the group).
    await sayInGroup(id, "/status");
    // A command's notice is delivered after its ack.
    const status = await eventually(async () =>
      world.delivered.map((d) => d.body.text as string).find((t) => t.includes("Cost:")),
    );
    expect(status).toContain("Cost: $0.06 this session");

    // A reset starts the session's cost again: the new session's greeting turn is one call.
    await sayInGroup(id, "/new");
    expect((await listed(key))?.costUsd).toBeCloseTo(CALL_USD, 12);
    world.restore();
  });

  it("a model without a price costs null, never 0, and adds nothing to the session", async () => {
    const world = scriptedWorld(script);
    const id = "usage-unpriced";
    await scriptedGroup(id, { models: SCRIPTED_MODEL_CONFIG.models, connectors: CONNECTORS });
    const run = (await rpc<RunView>("runs.get", { runId: await sayInGroup(id, "hello?") })).payload;
    expect(run.costUsd).toBeNull();
    expect(run.usage).toMatchObject({
      modelCalls: 1,
      unpricedCalls: 1,
      cacheReadTokens: 6_000,
      costUsd: null,
    });
    expect((await listed(group(id)))?.costUsd).toBe(0);
    // In the summary its model costs null, not $0; the session's greeting (the echo model,
    // priced at nothing) keeps the session's total at $0 with one call unpriced.
    const summary = await rpc<{
      rows: Array<{ group: string; costUsd: number | null }>;
      total: { costUsd: number | null; unpricedCalls: number };
    }>("usage.summary", { groupBy: "model", sessionKey: group(id) });
    expect(summary.payload.rows.find((r) => r.group === "fake/m")?.costUsd).toBeNull();
    expect(summary.payload.total).toMatchObject({ costUsd: 0, unpricedCalls: 1 });
    world.restore();
  });
});

interface Summary {
  from: string;
  to: string;
  rows: Array<{ group: string; runs: number; modelCalls: number; costUsd: number; cacheReadTokens: number }>;
  total: { runs: number; modelCalls: number; costUsd: number; inputTokens: number; unpricedCalls: number };
}

describe("usage.summary", () => {
  it("adds each run to its day in the session's timezone; the total is the sum of the runs", async () => {
    const world = scriptedWorld(script);
    // UTC+14 and UTC-11: at any instant their dates differ.
    const east = "usage-east";
    const west = "usage-west";
    await scriptedGroup(east, { ...PRICED, session: { timezone: "Pacific/Kiritimati" } });
    await scriptedGroup(west, { ...PRICED, session: { timezone: "Pacific/Pago_Pago" } });
    const runIds = [
      await sayInGroup(east, "tool"),
      await sayInGroup(east, "one"),
      await sayInGroup(west, "two"),
    ];
    const now = Date.now();
    const eastDay = localDay(now, "Pacific/Kiritimati");
    const westDay = localDay(now, "Pacific/Pago_Pago");
    expect(eastDay).not.toBe(westDay);

    // Each session's first run (the echo model's, before the scripted one) counts too: on the
    // gateway's own day (UTC), which lies between the two.
    const utcDay = localDay(now, "UTC");
    const range = { from: westDay, to: eastDay };
    const bySession = (
      await rpc<Summary>("usage.summary", { ...range, groupBy: "session", agentId: "main" })
    ).payload.rows.filter((r) => r.group === group(east) || r.group === group(west));
    expect(bySession.map((r) => [r.group, r.runs, r.modelCalls])).toEqual([
      [group(east), 3, 4],
      [group(west), 2, 2],
    ]);
    const eastDays = (await rpc<Summary>("usage.summary", { ...range, sessionKey: group(east) })).payload;
    expect(eastDays.rows.find((r) => r.group === eastDay)?.runs).toBe(utcDay === eastDay ? 3 : 2);
    const westDays = (await rpc<Summary>("usage.summary", { ...range, sessionKey: group(west) })).payload;
    expect(westDays.rows.find((r) => r.group === westDay)?.runs).toBe(utcDay === westDay ? 2 : 1);

    // The total of east's days is the sum of its runs.
    const listed = (await rpc<{ runs: RunView[] }>("runs.list", { sessionKey: group(east), limit: 50 }))
      .payload.runs;
    expect(listed).toHaveLength(3);
    expect(eastDays.total.runs).toBe(3);
    expect(eastDays.total.modelCalls).toBe(listed.reduce((n, r) => n + r.usage.modelCalls, 0));
    expect(eastDays.total.inputTokens).toBe(listed.reduce((n, r) => n + r.usage.inputTokens, 0));
    expect(eastDays.total.costUsd).toBeCloseTo(
      listed.reduce((n, r) => n + (r.usage.costUsd ?? 0), 0),
      12,
    );
    expect(eastDays.total.costUsd).toBeCloseTo(3 * CALL_USD, 12);
    expect(runIds).toHaveLength(3);
    world.restore();
  });

  it("adds a run once however often its finalize is written", async () => {
    const db = env.DB;
    const run = {
      runId: "usage-once",
      sessionKey: "agent:main:usage-once",
      sessionId: "s-usage-once",
      trigger: "rpc",
      status: "ok",
      createdAt: 1,
      endedAt: 2,
      deliver: false,
    };
    const addition = {
      runId: run.runId,
      day: "2026-01-02",
      sessionKey: run.sessionKey,
      agentId: "main",
      channel: null,
      model: "fake/m",
      usage: {
        inputTokens: 10,
        outputTokens: 2,
        totalTokens: 12,
        modelCalls: 1,
        unpricedCalls: 0,
        costUsd: 0.5,
      },
    };
    for (let i = 0; i < 3; i++)
      await db.batch([...usageRollupStatements(db, addition), runRecordsStatement(db, [run])]);
    const row = await db
      .prepare("SELECT runs, model_calls, cost_usd FROM usage_daily WHERE session_key = ?")
      .bind(run.sessionKey)
      .first();
    expect(row).toEqual({ runs: 1, model_calls: 1, cost_usd: 0.5 });
    const agents = await db
      .prepare("SELECT runs, model_calls, cost_usd, channel FROM usage_agents WHERE day = ? AND agent_id = ?")
      .bind(addition.day, addition.agentId)
      .first();
    expect(agents).toEqual({ runs: 1, model_calls: 1, cost_usd: 0.5, channel: "" });
  });

  it("refuses a bad range or grouping, naming the field", async () => {
    const bad = await rpc("usage.summary", { from: "2026-02-01", to: "2026-01-01" });
    expect(bad.status).toBe(400);
    expect(bad.error?.message).toContain("`from` (2026-02-01) is after `to` (2026-01-01)");
    const group = await rpc("usage.summary", { groupBy: "week" });
    expect(group.status).toBe(400);
    expect(group.error?.message).toContain("groupBy");
    const day = await rpc("usage.summary", { from: "yesterday" });
    expect(day.error?.message).toContain("YYYY-MM-DD");
  });
});

describe("/usage", () => {
  it("puts a footer on delivered replies (tokens, full), never in the transcript, and answers cost once", async () => {
    const world = scriptedWorld(script);
    const id = "usage-footer";
    const key = group(id);
    await scriptedGroup(id, PRICED);
    const last = () => String(world.delivered.at(-1)?.body.text);
    // A command's notice is delivered after its ack: wait for it.
    const says = (text: string) => eventually(async () => last() === text);

    await sayInGroup(id, "/usage");
    await says("Usage footer: off.");
    await sayInGroup(id, "/usage tokens");
    await says("Usage footer: tokens for this session.");
    await sayInGroup(id, "first");
    await says("answer to first\n\n— 10k in / 500 out");
    await sayInGroup(id, "/usage full");
    await sayInGroup(id, "second");
    await says("answer to second\n\n— 10k in / 500 out · fake/m · $0.02");
    await sayInGroup(id, "/usage off");
    await sayInGroup(id, "third");
    await says("answer to third");
    // The transcript keeps the model's replies as they were.
    const replies = (
      await rpc<{ messages: Array<{ role: string; content: Array<{ text?: string }> }> }>("chat.history", {
        sessionKey: key,
        limit: 50,
      })
    ).payload.messages
      .filter((m) => m.role === "assistant")
      .map((m) => m.content.map((p) => p.text ?? "").join(""));
    expect(replies.slice(-3)).toEqual(["answer to first", "answer to second", "answer to third"]);

    await sayInGroup(id, "/usage cost");
    await eventually(async () => last().startsWith("Cost of this session"));
    expect(last()).toMatch(
      /^Cost of this session: \$0\.06\nAgent main: today \$[\d.]+ · last 30 days \$[\d.]+ \(UTC\)/,
    );
    await sayInGroup(id, "/usage weekly");
    await says("Usage: /usage off|tokens|full|cost");
    world.restore();
  });
});

describe("budgets", () => {
  it("a run past a budget makes no model call and ends budget_exceeded; one notice a day; an operator may override", async () => {
    const world = scriptedWorld(script);
    const id = "usage-budget";
    const key = group(id);
    // Each call costs CALL_USD (0.0213): two turns of three calls reach 0.05.
    await scriptedGroup(id, {
      ...PRICED,
      agents: { defaults: { model: "fake/m", budget: { sessionDailyUsd: 0.05 } } },
    });
    const notices = () => world.delivered.filter((d) => d.body.kind === "notice").map((d) => d.body.text);

    expect(
      (await rpc<RunView & { status: string }>("runs.get", { runId: await sayInGroup(id, "tool") })).payload
        .status,
    ).toBe("ok");
    await sayInGroup(id, "one");
    const calls = world.requests.length;
    const refused = await sayInGroup(id, "two");
    expect(world.requests.length).toBe(calls);
    const run = (await rpc<{ status: string; error: string }>("runs.get", { runId: refused })).payload;
    expect(run.status).toBe("budget_exceeded");
    expect(run.error).toBe("⚠️ This conversation's daily budget is used up; I cannot answer until it resets.");
    const waited = (await rpc<{ status: string; runStatus: string }>("agent.wait", { runId: refused }))
      .payload;
    expect(waited).toMatchObject({ status: "error", runStatus: "budget_exceeded" });
    await eventually(async () => notices().length === 1);
    expect(notices()).toEqual([run.error]);

    // Refused again, and the chat hears nothing more today.
    await sayInGroup(id, "three");
    expect(world.requests.length).toBe(calls);
    expect(notices()).toHaveLength(1);

    // The operator's override runs past it.
    const sent = await rpc<{ runId: string }>("chat.send", {
      sessionKey: key,
      message: "urgent",
      overrideBudget: true,
    });
    const ok = (await rpc<{ status: string }>("agent.wait", { runId: sent.payload.runId, timeoutMs: 10_000 }))
      .payload;
    expect(ok.status).toBe("ok");
    expect(world.requests.length).toBe(calls + 1);
    world.restore();
  });
});
