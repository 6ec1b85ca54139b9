/**
 * Usage, cost and budgets end to end (SPEC §21) against `wrangler dev`, one gateway: runs are
 * priced from what the fake models report, cached tokens included (`models.pricing` for the
 * OpenAI-compatible fake, the built-in table for the Anthropic one), to the exact price table
 * worked out here; an agent past its daily budget makes no model call, ends `budget_exceeded`
 * and its chat hears of it once that day; an operator's `overrideBudget` runs past it; and
 * `usage.summary` by day and by session adds up to the runs `runs.get` reads, on the day of
 * `session.timezone` (a zone whose date is not UTC's while the suite runs). With
 * SWITCHBOARD_TEST_D1=4 the sessions are spread over four databases, and the summary adds up
 * the rows of all of them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localDay } from "../../src/time/zones.ts";
import { FAKE_ANTHROPIC_KEY, type FakeAnthropic, startFakeAnthropic } from "./support/fake-anthropic.ts";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import { type FakeModel, startFakeModel, type Usage } from "./support/fake-model.ts";
import {
  CONNECTOR_SECRET,
  connectorConfig,
  directMessage,
  type Gateway,
  settled,
  startGateway,
  waitFor,
} from "./support/gateway.ts";

/** `models.pricing` of the priced fake model, US dollars per million tokens. */
const PRICE = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };
/** The built-in table's price of anthropic/claude-sonnet-4 (src/agent/pricing.ts). */
const SONNET = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };
const CAPPED_DAILY_USD = 0.02;

/** What the priced fake model reports when the script says nothing else. */
const FALLBACK_USAGE: Usage = { prompt: 10_000, completion: 500, cached: 6_000 };

/**
 * A call's cost worked out by hand: the input not read from or written to the cache at the input
 * price, the cached parts at theirs, the output at its own.
 */
function usd(
  price: typeof PRICE,
  t: { input: number; output: number; cacheRead?: number; cacheWrite?: number },
): number {
  const read = t.cacheRead ?? 0;
  const write = t.cacheWrite ?? 0;
  return (
    ((t.input - read - write) * price.input +
      read * price.cacheRead +
      write * price.cacheWrite +
      t.output * price.output) /
    1_000_000
  );
}

/**
 * A zone whose date differs from UTC's now and stays the same for at least half an hour: UTC+14
 * from 10:30 UTC on (its day is UTC's next), UTC-11 before (its day is UTC's last).
 */
function zoneOffUtc(now: number): string {
  const d = new Date(now);
  return d.getUTCHours() * 60 + d.getUTCMinutes() >= 10 * 60 + 30
    ? "Pacific/Kiritimati"
    : "Pacific/Pago_Pago";
}

interface RunUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  modelCalls: number;
  unpricedCalls: number;
  costUsd: number | null;
}
interface RunView {
  runId: string;
  sessionKey: string;
  status: string;
  error?: string;
  usage: RunUsage;
  costUsd: number | null;
}
interface SummaryRow {
  group: string;
  runs: number;
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Null when every model call it counts had no price. */
  costUsd: number | null;
  unpricedCalls: number;
}
interface Summary {
  from: string;
  to: string;
  timezone: string;
  rows: SummaryRow[];
  total: Omit<SummaryRow, "group">;
}

const TIMEZONE = zoneOffUtc(Date.now());
const PRICED_PEER = "310000001";
const CAPPED_PEER = "310000002";
const PRICED_KEY = `agent:main:telegram:dm:${PRICED_PEER}`;
const CAPPED_KEY = `agent:capped:telegram:dm:${CAPPED_PEER}`;
const CAPPED_MAIN = "agent:capped:main";

let gw: Gateway;
let connector: FakeConnector;
let model: FakeModel;
let anthropic: FakeAnthropic;
/** Every run the suite started, in order. */
const runIds: string[] = [];
let sent = 0;

beforeAll(async () => {
  [connector, model, anthropic] = await Promise.all([
    startFakeConnector(CONNECTOR_SECRET),
    startFakeModel(),
    startFakeAnthropic(),
  ]);
  model.setFallback({ text: "priced answer", usage: FALLBACK_USAGE });
  gw = await startGateway({
    config: {
      connectors: connectorConfig(connector.url),
      session: { dmScope: "per-channel-peer", timezone: TIMEZONE },
      models: {
        providers: {
          fake: { api: "openai-compatible", baseUrl: model.baseUrl },
          anthropic: { api: "anthropic", baseUrl: anthropic.baseUrl, apiKeyEnv: "ANTHROPIC_API_KEY" },
        },
        pricing: { "fake/priced-model": PRICE },
        retry: { attempts: 2, baseDelayMs: 50 },
      },
      agents: {
        defaults: { model: "fake/priced-model" },
        list: [
          { id: "main", default: true },
          { id: "claude", model: "anthropic/claude-sonnet-4-20250514" },
          { id: "free", model: "fake/unpriced-model" },
          { id: "capped", budget: { dailyUsd: CAPPED_DAILY_USD } },
        ],
      },
      bindings: [
        { agentId: "capped", match: { channel: "telegram", peer: { kind: "direct", id: CAPPED_PEER } } },
      ],
      delivery: { maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 200 },
    },
    vars: { ANTHROPIC_API_KEY: FAKE_ANTHROPIC_KEY },
  });
});

afterAll(async () => {
  await gw?.dispose();
  await Promise.all([connector?.close(), model?.close(), anthropic?.close()]);
});

/** A direct message from `peer`; its run's id once the run has ended. */
async function say(peer: string, text: string): Promise<string> {
  const ack = await gw.inbound("telegram", directMessage({ messageId: `usage-${++sent}`, from: peer, text }));
  expect(ack.status).toBe(202);
  const runId = ack.body.runId;
  if (!runId) throw new Error(`inbound answered no run: ${JSON.stringify(ack.body)}`);
  return ended(runId);
}

/** An operator's message (`agent` or `chat.send`); its run's id once the run has ended. */
async function operator(method: "agent" | "chat.send", params: Record<string, unknown>): Promise<string> {
  const { runId } = await gw.call<{ runId: string }>(method, params);
  return ended(runId);
}

async function ended(runId: string): Promise<string> {
  runIds.push(runId);
  const wait = await gw.call<{ status: string }>("agent.wait", { runId, timeoutMs: 20_000 });
  expect(wait.status).not.toBe("timeout");
  return runId;
}

const getRun = (runId: string) => gw.call<RunView>("runs.get", { runId });

/** The requests the OpenAI-compatible fake got for turns of session `key`. */
const callsFor = (key: string) => model.requests.filter((r) => r.system.includes(`- session key: ${key}\n`));

const notices = (key: string) => connector.deliveriesFor({ sessionKey: key, kind: "notice" });

describe("cost of a run", () => {
  it("prices each call's fresh, cache-read and output tokens at models.pricing; a run sums its calls", async () => {
    const first = { prompt: 12_000, completion: 300, cached: 8_000 };
    const second = { prompt: 12_500, completion: 450, cached: 12_000 };
    model.push(
      { toolCalls: [{ name: "current_time", arguments: {} }], usage: first },
      { text: "It is noon.", usage: second },
    );
    const run = await getRun(await say(PRICED_PEER, "what time is it?"));
    expect(callsFor(PRICED_KEY)).toHaveLength(2);
    expect(run.status).toBe("ok");
    // The OpenAI-compatible wire format reports cache reads only (`cached_tokens`): writes are 0.
    expect(run.usage).toMatchObject({
      inputTokens: 24_500,
      outputTokens: 750,
      cacheReadTokens: 20_000,
      cacheWriteTokens: 0,
      modelCalls: 2,
      unpricedCalls: 0,
    });
    const expected =
      usd(PRICE, { input: 12_000, output: 300, cacheRead: 8_000 }) +
      usd(PRICE, { input: 12_500, output: 450, cacheRead: 12_000 });
    // (4,000 × 3 + 8,000 × 0.3 + 300 × 15 + 500 × 3 + 12,000 × 0.3 + 450 × 15) / 1e6
    expect(expected).toBeCloseTo(0.03075, 12);
    expect(run.costUsd).toBeCloseTo(expected, 12);
    expect(run.usage.costUsd).toBeCloseTo(expected, 12);

    const again = await getRun(await say(PRICED_PEER, "and now?"));
    expect(again.costUsd).toBeCloseTo(usd(PRICE, { input: 10_000, output: 500, cacheRead: 6_000 }), 12);
  });

  it("prices cache writes too: an Anthropic model from the built-in table", async () => {
    anthropic.push({
      text: "cached",
      usage: { input: 2_000, output: 400, cacheRead: 5_000, cacheWrite: 3_000 },
    });
    const run = await getRun(await operator("agent", { agentId: "claude", message: "hello claude" }));
    expect(anthropic.requests).toHaveLength(1);
    expect(run.usage).toMatchObject({
      inputTokens: 10_000,
      outputTokens: 400,
      cacheReadTokens: 5_000,
      cacheWriteTokens: 3_000,
      modelCalls: 1,
      unpricedCalls: 0,
    });
    // (2,000 × 3 + 5,000 × 0.3 + 3,000 × 3.75 + 400 × 15) / 1e6
    expect(run.costUsd).toBeCloseTo(0.02475, 12);
    expect(run.costUsd).toBeCloseTo(
      usd(SONNET, { input: 10_000, output: 400, cacheRead: 5_000, cacheWrite: 3_000 }),
      12,
    );
  });

  it("a model without a price costs null, never 0", async () => {
    const run = await getRun(await operator("agent", { agentId: "free", message: "hello free" }));
    expect(run.status).toBe("ok");
    expect(run.costUsd).toBeNull();
    expect(run.usage).toMatchObject({
      modelCalls: 1,
      unpricedCalls: 1,
      cacheReadTokens: 6_000,
      costUsd: null,
    });
  });
});

describe("a daily budget", () => {
  let refused: RunView;

  it("the run past it makes no model call and ends budget_exceeded; the chat hears it once", async () => {
    // The first run starts under the budget; its one call costs more than all of it.
    const first = await getRun(await say(CAPPED_PEER, "first"));
    expect(first.status).toBe("ok");
    expect(first.costUsd).toBeGreaterThan(CAPPED_DAILY_USD);
    expect(callsFor(CAPPED_KEY)).toHaveLength(1);

    const runId = await say(CAPPED_PEER, "second");
    expect(callsFor(CAPPED_KEY)).toHaveLength(1);
    refused = await getRun(runId);
    expect(refused.status).toBe("budget_exceeded");
    expect(refused.error).toBe(
      "⚠️ The daily budget of agent capped is used up; I cannot answer until it resets.",
    );
    expect(refused.usage).toMatchObject({ modelCalls: 0, inputTokens: 0 });
    const waited = await gw.call("agent.wait", { runId });
    expect(waited).toMatchObject({ status: "error", runStatus: "budget_exceeded" });
    const notice = await waitFor(() => notices(CAPPED_KEY)[0], 20_000, { what: "the budget notice" });
    expect(notice.body?.text).toBe(refused.error);

    // Refused again; once nothing is queued and no delivery is owed, still one notice.
    const third = await getRun(await say(CAPPED_PEER, "third"));
    expect(third.status).toBe("budget_exceeded");
    await settled(gw, CAPPED_KEY);
    expect(callsFor(CAPPED_KEY)).toHaveLength(1);
    expect(notices(CAPPED_KEY)).toHaveLength(1);
    expect(connector.deliveriesFor({ sessionKey: CAPPED_KEY, kind: "reply" })).toHaveLength(1);
  });

  it("holds for every session of the agent, and status lists the agent as over budget", async () => {
    const run = await getRun(
      await operator("agent", { agentId: "capped", message: "operator, no override" }),
    );
    expect(run.sessionKey).toBe(CAPPED_MAIN);
    expect(run.status).toBe("budget_exceeded");
    expect(callsFor(CAPPED_MAIN)).toHaveLength(0);
    const status = await gw.call<{ overBudget: Array<Record<string, unknown>> }>("status");
    expect(status.overBudget).toEqual([
      { agentId: "capped", budget: "daily", limitUsd: CAPPED_DAILY_USD, spentUsd: expect.any(Number) },
    ]);
  });

  it("an operator's overrideBudget runs past it, through agent and chat.send", async () => {
    const viaAgent = await getRun(
      await operator("agent", { agentId: "capped", message: "override", overrideBudget: true }),
    );
    expect(viaAgent).toMatchObject({ sessionKey: CAPPED_MAIN, status: "ok" });
    expect(callsFor(CAPPED_MAIN)).toHaveLength(1);

    const refusedSend = await getRun(
      await operator("chat.send", { sessionKey: CAPPED_KEY, message: "no override" }),
    );
    expect(refusedSend.status).toBe("budget_exceeded");
    expect(callsFor(CAPPED_KEY)).toHaveLength(1);
    const viaSend = await getRun(
      await operator("chat.send", { sessionKey: CAPPED_KEY, message: "override", overrideBudget: true }),
    );
    expect(viaSend.status).toBe("ok");
    expect(viaSend.usage.modelCalls).toBe(1);
    expect(callsFor(CAPPED_KEY)).toHaveLength(2);
    await settled(gw, CAPPED_KEY);
    expect(notices(CAPPED_KEY)).toHaveLength(1);
  });
});

describe("usage.summary", () => {
  /** Every run the suite made, as runs.get reads it. */
  let runs: RunView[];
  const sum = (rs: RunView[]) => ({
    runs: rs.length,
    modelCalls: rs.reduce((n, r) => n + r.usage.modelCalls, 0),
    inputTokens: rs.reduce((n, r) => n + r.usage.inputTokens, 0),
    outputTokens: rs.reduce((n, r) => n + r.usage.outputTokens, 0),
    cacheReadTokens: rs.reduce((n, r) => n + r.usage.cacheReadTokens, 0),
    cacheWriteTokens: rs.reduce((n, r) => n + r.usage.cacheWriteTokens, 0),
    unpricedCalls: rs.reduce((n, r) => n + r.usage.unpricedCalls, 0),
  });
  const costOf = (rs: RunView[]) => rs.reduce((n, r) => n + (r.costUsd ?? 0), 0);
  /** What a summary row of `rs` costs: null when every run's calls were unpriced, as runs.get says. */
  const expectCost = (cost: number | null, rs: RunView[], what: string) => {
    if (rs.every((r) => r.costUsd === null)) expect(cost, what).toBeNull();
    else {
      expect(cost, what).not.toBeNull();
      expect(cost, what).toBeCloseTo(costOf(rs), 12);
    }
  };
  const today = () => localDay(Date.now(), TIMEZONE);

  beforeAll(async () => {
    runs = await Promise.all(runIds.map(getRun));
    const listed = await gw.call<{ runs: Array<{ runId: string }> }>("runs.list", { limit: 200 });
    // No run the suite did not start (a greeting, a job) is in the rollup unseen.
    expect(listed.runs.map((r) => r.runId).sort()).toEqual([...runIds].sort());
  });

  it("by day: one row, the day in session.timezone (not UTC's), adding up to the runs", async () => {
    const day = today();
    expect(day).not.toBe(localDay(Date.now(), "UTC"));
    const summary = await gw.call<Summary>("usage.summary", { groupBy: "day" });
    expect(summary).toMatchObject({ to: day, timezone: TIMEZONE });
    expect(summary.rows.map((r) => r.group)).toEqual([day]);
    const [row] = summary.rows as [SummaryRow];
    expect(row).toMatchObject(sum(runs));
    expectCost(row.costUsd, runs, day);
    expect(summary.total).toMatchObject(sum(runs));
    expectCost(summary.total.costUsd, runs, "total");
    expect(summary.total.unpricedCalls).toBe(1);
    expect(summary.total.cacheWriteTokens).toBe(3_000);
  });

  it("by session: each session's row adds up to its runs, the total to all of them", async () => {
    const summary = await gw.call<Summary>("usage.summary", {
      groupBy: "session",
      from: today(),
      to: today(),
    });
    const keys = [...new Set(runs.map((r) => r.sessionKey))].sort();
    expect(keys).toEqual(
      [PRICED_KEY, CAPPED_KEY, CAPPED_MAIN, "agent:claude:main", "agent:free:main"].sort(),
    );
    expect(summary.rows.map((r) => r.group).sort()).toEqual(keys);
    for (const row of summary.rows) {
      const own = runs.filter((r) => r.sessionKey === row.group);
      expect(row, row.group).toMatchObject(sum(own));
      expectCost(row.costUsd, own, row.group);
    }
    // The unpriced model's session costs null, never 0.
    expect(summary.rows.find((r) => r.group === "agent:free:main")?.costUsd).toBeNull();
    expect(summary.total).toMatchObject(sum(runs));
    expectCost(summary.total.costUsd, runs, "total");
    // Largest cost first (an unknown cost counts as none).
    const costs = summary.rows.map((r) => r.costUsd ?? 0);
    expect(costs).toEqual([...costs].sort((a, b) => b - a));
  });
});
