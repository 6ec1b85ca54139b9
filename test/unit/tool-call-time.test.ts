/**
 * A tool learns when the model asked for its call (`calledAt`: the time of the assistant message
 * holding it), and a resumed run that repeats an unanswered call passes the same time, so a
 * deadline counted from it survives the restart.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { emptyCheckpoint, type RunCheckpoint } from "../../src/agent/checkpoint";
import { runAgentLoop } from "../../src/agent/loop";
import type { AgentTool } from "../../src/tools/types";
import type { TranscriptMessage } from "../../src/transcript/message";
import { loopInput, scriptedModel } from "./scripted-model";

function clock(seen: Array<number | undefined>): AgentTool {
  return {
    name: "clock",
    description: "records when it was asked for",
    schema: z.object({}),
    execute: async (_args, ctx) => {
      seen.push(ctx.calledAt);
      return { ok: true };
    },
  };
}

function run(model: ReturnType<typeof scriptedModel>["model"], tool: AgentTool, checkpoint: RunCheckpoint) {
  return runAgentLoop(loopInput(model, [tool], { checkpoint }));
}

describe("a tool call's time", () => {
  it("is the time of the assistant message that asked for it", async () => {
    const seen: Array<number | undefined> = [];
    const scripted = scriptedModel([
      [{ type: "tool-call", toolCallId: "c1", toolName: "clock", input: "{}" }],
    ]);
    const { checkpoint } = await run(scripted.model, clock(seen), emptyCheckpoint());
    const asked = checkpoint.produced.find((m) => m.role === "assistant");
    expect(seen).toEqual([asked?.timestamp]);
  });

  it("is the first try's when a resumed run repeats a call that was not answered", async () => {
    const seen: Array<number | undefined> = [];
    const asked: TranscriptMessage = {
      id: "r1:s0:a",
      role: "assistant",
      content: [{ type: "toolCall", id: "c1", name: "clock", arguments: {} }],
      timestamp: 1_234,
      runId: "r1",
    };
    const scripted = scriptedModel([]);
    const resumed: RunCheckpoint = { ...emptyCheckpoint(), step: 1, produced: [asked] };
    const result = await run(scripted.model, clock(seen), resumed);
    expect(seen).toEqual([1_234]);
    expect(result.reply).toBe("done");
  });
});
