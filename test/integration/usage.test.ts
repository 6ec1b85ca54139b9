/**
 * Usage and cost per model call, per run and per session (SPEC §21), in workerd: the model's
 * reported usage, cached tokens included, priced by `models.pricing`; a run sums its calls
 * (`runs.get`: `usage`, `costUsd`), the entry sums its runs (`costUsd` on list rows and in
 * `/status`), a reset starts it again; a model without a price costs null, never 0.
 */
import { describe, expect, it } from "vitest";
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
import { rpc } from "./support";

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
    const status = world.delivered.at(-1)?.body.text as string;
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
    world.restore();
  });
});
