/**
 * A language model for the agent loop's unit tests: answers each call from a script (one
 * content list per call, then "done") and records the call options it was given.
 */
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult } from "@ai-sdk/provider";

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
