/**
 * The agent loop's unit tests: a language model that answers each call from a script (one
 * content list per call, then "done") and records the call options it was given, and the
 * loop's input around it.
 */
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult } from "@ai-sdk/provider";
import { emptyCheckpoint } from "../../src/agent/checkpoint";
import type { AgentLoopInput } from "../../src/agent/loop";
import type { AgentTool, ToolContext } from "../../src/tools/types";

/** A model that records its call options and answers from a script. */
export function scriptedModel(steps: LanguageModelV4GenerateResult["content"][]) {
  const calls: LanguageModelV4CallOptions[] = [];
  const usage = {
    inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 2, text: 2, reasoning: 0 },
  };
  return {
    calls,
    model: {
      specificationVersion: "v4" as const,
      provider: "scripted",
      modelId: "m",
      supportedUrls: {},
      async doGenerate(options: LanguageModelV4CallOptions): Promise<LanguageModelV4GenerateResult> {
        calls.push(options);
        const content = steps[calls.length - 1] ?? [{ type: "text", text: "done" }];
        const called = content.some((p) => p.type === "tool-call");
        return {
          content,
          finishReason: { unified: called ? "tool-calls" : "stop", raw: undefined },
          usage,
          warnings: [],
        };
      },
      async doStream(): Promise<never> {
        throw new Error("not streamed");
      },
    },
  };
}

/** The loop's input for one user message "hi", with `tools`, persisting nothing. */
export function loopInput(
  model: ReturnType<typeof scriptedModel>["model"],
  tools: AgentTool[],
  overrides: Partial<AgentLoopInput> = {},
): AgentLoopInput {
  return {
    runId: "r1",
    model,
    modelRef: "scripted/m",
    system: "sys",
    history: [{ id: "u1", role: "user", content: [{ type: "text", text: "hi" }], timestamp: 1 }],
    tools,
    maxSteps: 4,
    keepToolResults: 3,
    retry: { attempts: 1, baseDelayMs: 1 },
    signal: new AbortController().signal,
    checkpoint: emptyCheckpoint(),
    toolContext: {} as Omit<ToolContext, "toolCallId">,
    persist: async () => {},
    ...overrides,
  };
}
