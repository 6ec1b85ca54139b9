/**
 * The cost of a model call (SPEC §21): the built-in table matched as the catalog is, the
 * config's prices first, cached tokens at their own prices, and no price → null, never 0.
 */
import { describe, expect, it } from "vitest";
import { agentsOverBudget, budgetNotice, budgetReached } from "../../src/agent/budget";
import { BUILT_IN_PRICES, costOf, priceOf } from "../../src/agent/pricing";
import { parseConfig } from "../../src/config/load";
import { buildAnnouncement } from "../../src/session/flows/plans";

const tokens = (inputTokens: number, outputTokens: number, cacheReadTokens = 0, cacheWriteTokens = 0) => ({
  inputTokens,
  outputTokens,
  cacheReadTokens,
  cacheWriteTokens,
});

describe("priceOf", () => {
  it("finds a dated model id by its family, and a provider of one's own by its api", () => {
    expect(
      priceOf("anthropic/claude-sonnet-4-20250514", "anthropic", "claude-sonnet-4-20250514", {}),
    ).toEqual(BUILT_IN_PRICES["anthropic/claude-sonnet-4"]);
    expect(priceOf("gateway/claude-haiku-4-5", "anthropic", "claude-haiku-4-5", {})).toEqual(
      BUILT_IN_PRICES["anthropic/claude-haiku-4-5"],
    );
    // The longest key wins: gpt-4o-mini is not priced as gpt-4o.
    expect(priceOf("openai/gpt-4o-mini", "openai", "gpt-4o-mini", {})?.input).toBe(0.15);
  });

  it("takes models.pricing first, and knows nothing of an unlisted model", () => {
    const own = { input: 1, output: 2 };
    expect(priceOf("openai/gpt-4o", "openai", "gpt-4o", { "openai/gpt-4o": own })).toBe(own);
    expect(priceOf("local/llama", "openai-compatible", "llama", {})).toBeUndefined();
    expect(
      priceOf(
        "workers-ai/@cf/meta/llama-3.1-8b-instruct",
        "workers-ai",
        "@cf/meta/llama-3.1-8b-instruct",
        {},
      ),
    ).toBeUndefined();
  });
});

describe("costOf", () => {
  it("prices fresh input, cache reads, cache writes and output each at its own price", () => {
    const price = { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 };
    // 10,000 input of which 6,000 read from cache and 1,000 written to it: 3,000 fresh.
    const cost = costOf(tokens(10_000, 500, 6_000, 1_000), price);
    expect(cost).toBeCloseTo((3_000 * 3 + 6_000 * 0.3 + 1_000 * 3.75 + 500 * 15) / 1e6, 12);
    expect(cost).toBeCloseTo(0.02205, 12);
  });

  it("prices cached tokens as input when the price names no cache price", () => {
    expect(costOf(tokens(1_000, 0, 400, 0), { input: 2, output: 8 })).toBeCloseTo(0.002, 12);
  });

  it("is null for a model without a price, and 0 only for a free one", () => {
    expect(costOf(tokens(1_000, 1_000), undefined)).toBeNull();
    expect(costOf(tokens(1_000, 1_000), BUILT_IN_PRICES["echo/*"])).toBe(0);
  });
});

describe("models.pricing", () => {
  it("takes prices per exact reference and refuses a negative price, naming the field", () => {
    const config = parseConfig(
      JSON.stringify({ models: { pricing: { "openai/gpt-4o": { input: 2, output: 9 } } } }),
    );
    expect(config.models.pricing["openai/gpt-4o"]).toEqual({ input: 2, output: 9 });
    expect(() =>
      parseConfig(JSON.stringify({ models: { pricing: { "openai/gpt-4o": { input: -1, output: 9 } } } })),
    ).toThrow(/models\.pricing.*input/);
  });
});

describe("the sub-agent announcement's Stats line", () => {
  const base = {
    announce: { runId: "a", status: "ok" as const, reply: "the result" },
    childKey: "agent:main:subagent:x",
    childSessionId: "s",
    transcriptPath: "/v1/transcripts/s.jsonl",
  };
  const task = {
    runId: "t",
    status: "ok" as const,
    startedAt: 0,
    endedAt: 2_000,
    inputTokens: 900,
    outputTokens: 100,
  };

  it("shows est $… when the task's cost is known, and nothing when it is not", () => {
    expect(buildAnnouncement({ ...base, task: { ...task, costUsd: 0.0213 } })).toContain(
      "(in 900 / out 100) • est $0.02 • sessionKey",
    );
    expect(buildAnnouncement({ ...base, task: { ...task, costUsd: 0.0042 } })).toContain("est $0.0042");
    expect(buildAnnouncement({ ...base, task: { ...task, costUsd: null } })).not.toContain("est $");
    expect(buildAnnouncement({ ...base, task })).not.toContain("est $");
  });
});

describe("budgetReached", () => {
  const spend = (agentDay: number, agentMonth: number, sessionDay: number) => ({
    agentDay,
    agentMonth,
    sessionDay,
  });

  it("names the first budget reached (at or over), the session's first", () => {
    const budget = { dailyUsd: 1, monthlyUsd: 10, sessionDailyUsd: 0.5 };
    expect(budgetReached(budget, spend(0.9, 9.9, 0.4))).toBeUndefined();
    expect(budgetReached(budget, spend(1, 9.9, 0.4))).toEqual({ name: "daily", limitUsd: 1 });
    expect(budgetReached(budget, spend(0.2, 10.5, 0.1))).toEqual({ name: "monthly", limitUsd: 10 });
    expect(budgetReached(budget, spend(2, 20, 0.5))).toEqual({ name: "session daily", limitUsd: 0.5 });
    expect(budgetReached(undefined, spend(99, 99, 99))).toBeUndefined();
    expect(budgetReached({}, spend(99, 99, 99))).toBeUndefined();
  });

  it("tells the chat which budget, never the amounts", () => {
    expect(budgetNotice("main", { name: "daily", limitUsd: 3 })).toBe(
      "⚠️ The daily budget of agent main is used up; I cannot answer until it resets.",
    );
    expect(budgetNotice("main", { name: "monthly", limitUsd: 3 })).not.toContain("3");
  });
});

describe("agentsOverBudget", () => {
  it("lists the agents at or over a daily or monthly budget, not a session's", () => {
    const spent = new Map([
      ["main", { day: 5, month: 40 }],
      ["ops", { day: 0.5, month: 120 }],
      ["quiet", { day: 0.1, month: 0.1 }],
    ]);
    expect(
      agentsOverBudget(
        [
          { agentId: "main", budget: { dailyUsd: 5 } },
          { agentId: "ops", budget: { dailyUsd: 1, monthlyUsd: 100 } },
          { agentId: "quiet", budget: { dailyUsd: 1, sessionDailyUsd: 0.01 } },
          { agentId: "none", budget: undefined },
        ],
        spent,
      ),
    ).toEqual([
      { agentId: "main", budget: "daily", limitUsd: 5, spentUsd: 5 },
      { agentId: "ops", budget: "monthly", limitUsd: 100, spentUsd: 120 },
    ]);
  });
});
