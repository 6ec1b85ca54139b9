/**
 * A tool that ends the turn (`AgentTool.endsTurn`, sessions_yield): the loop makes no model
 * step after its result, replies with what it says, and a run resumed from a checkpoint that
 * holds that result (the process died before the run ended) ends the same way, asking nothing.
 */
import { describe, expect, it } from "vitest";
import { emptyCheckpoint, type RunCheckpoint } from "../../src/agent/checkpoint";
import { runAgentLoop } from "../../src/agent/loop";
import { sessionsYieldTool, yieldOf } from "../../src/tools/sessions-yield";
import type { AgentTool } from "../../src/tools/types";
import type { TranscriptMessage } from "../../src/transcript/message";
import { loopInput, scriptedModel } from "./scripted-model";

const yielding: AgentTool = {
  ...sessionsYieldTool,
  execute: async (args: { message?: string }) => ({
    status: "yielded",
    waitingOn: ["agent:main:subagent:x"],
    ...args,
  }),
};

describe("a turn ended by a tool", () => {
  it("makes no model step after the result, and replies with its message", async () => {
    const scripted = scriptedModel([
      [
        {
          type: "tool-call",
          toolCallId: "c1",
          toolName: "sessions_yield",
          input: '{"message":"Working on it"}',
        },
      ],
    ]);
    const result = await runAgentLoop(loopInput(scripted.model, [yielding]));
    expect(scripted.calls).toHaveLength(1);
    expect(result.reply).toBe("Working on it");
    expect(result.checkpoint.produced.map((m) => m.role)).toEqual(["assistant", "toolResult"]);
    expect(yieldOf(result.checkpoint.produced)).toEqual({
      status: "yielded",
      waitingOn: ["agent:main:subagent:x"],
      message: "Working on it",
    });
  });

  it("ends a resumed run whose checkpoint holds the result, without asking the model", async () => {
    const produced: TranscriptMessage[] = [
      {
        id: "r1:s0:a",
        role: "assistant",
        content: [{ type: "toolCall", id: "c1", name: "sessions_yield", arguments: {} }],
        timestamp: 1,
        runId: "r1",
      },
      {
        id: "r1:s0:t:c1",
        role: "toolResult",
        content: [{ type: "text", text: JSON.stringify({ status: "yielded", waitingOn: ["k"] }) }],
        toolCallId: "c1",
        toolName: "sessions_yield",
        isError: false,
        timestamp: 2,
        runId: "r1",
      },
    ];
    const scripted = scriptedModel([]);
    const resumed: RunCheckpoint = { ...emptyCheckpoint(), step: 1, produced };
    const result = await runAgentLoop(loopInput(scripted.model, [yielding], { checkpoint: resumed }));
    expect(scripted.calls).toHaveLength(0);
    expect(result.reply).toBe("");
  });

  it("goes on when the tool refused (nothing to wait for)", async () => {
    const refusing: AgentTool = {
      ...sessionsYieldTool,
      execute: async () => ({ status: "error", error: "nothing to wait for" }),
    };
    const scripted = scriptedModel([
      [{ type: "tool-call", toolCallId: "c1", toolName: "sessions_yield", input: "{}" }],
    ]);
    const result = await runAgentLoop(loopInput(scripted.model, [refusing]));
    expect(scripted.calls).toHaveLength(2);
    expect(result.reply).toBe("done");
    expect(yieldOf(result.checkpoint.produced)).toBeUndefined();
  });
});
