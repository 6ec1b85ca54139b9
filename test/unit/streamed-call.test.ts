/**
 * A call streamed from the provider gives the result the plain call would (agent/streamed-call.ts):
 * text told as it grows, reasoning kept with the signature that arrives on a later part, tool
 * calls, usage and finish reason; a stream's error is thrown; through `generateText`, the loop's
 * one call, the result is what the plain call's is.
 */
import type { LanguageModelV4, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { generateText } from "ai";
import { describe, expect, it } from "vitest";
import { collect, streamingModel } from "../../src/agent/streamed-call";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};
const finish = { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_use" }, usage } as const;

function streamOf(parts: LanguageModelV4StreamPart[]) {
  return {
    stream: new ReadableStream<LanguageModelV4StreamPart>({
      start(c) {
        for (const p of parts) c.enqueue(p);
        c.close();
      },
    }),
  };
}

describe("a call streamed from the provider", () => {
  it("assembles text, signed reasoning and tool calls, and tells the text as it grows", async () => {
    const told: string[] = [];
    const result = await collect(
      streamOf([
        { type: "stream-start", warnings: [] },
        { type: "response-metadata", id: "resp-1", modelId: "m" },
        { type: "reasoning-start", id: "r" },
        { type: "reasoning-delta", id: "r", delta: "thinking" },
        {
          type: "reasoning-delta",
          id: "r",
          delta: "",
          providerMetadata: { anthropic: { signature: "sig" } },
        },
        { type: "reasoning-end", id: "r" },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Let me " },
        { type: "text-delta", id: "t", delta: "check." },
        { type: "text-end", id: "t" },
        { type: "tool-input-start", id: "c1", toolName: "sessions_list" },
        { type: "tool-input-delta", id: "c1", delta: "{}" },
        { type: "tool-input-end", id: "c1" },
        { type: "tool-call", toolCallId: "c1", toolName: "sessions_list", input: "{}" },
        finish,
      ]),
      (t) => told.push(t),
    );
    expect(told).toEqual(["Let me ", "Let me check."]);
    expect(result.content).toEqual([
      { type: "reasoning", text: "thinking", providerMetadata: { anthropic: { signature: "sig" } } },
      { type: "text", text: "Let me check." },
      { type: "tool-call", toolCallId: "c1", toolName: "sessions_list", input: "{}" },
    ]);
    expect(result.finishReason).toEqual(finish.finishReason);
    expect(result.usage).toEqual(usage);
    expect(result.response).toMatchObject({ id: "resp-1", modelId: "m" });
  });

  it("throws the stream's error, and a stream that never finishes", async () => {
    const boom = new Error("provider said 500");
    await expect(
      collect(
        streamOf([
          { type: "text-delta", id: "t", delta: "par" },
          { type: "error", error: boom },
        ]),
        () => {},
      ),
    ).rejects.toBe(boom);
    await expect(collect(streamOf([{ type: "text-delta", id: "t", delta: "x" }]), () => {})).rejects.toThrow(
      /without finishing/,
    );
  });

  it("through generateText, the result is the plain call's", async () => {
    const parts: LanguageModelV4StreamPart[] = [
      { type: "stream-start", warnings: [] },
      { type: "text-start", id: "t" },
      ...["Hel", "lo ", "there"].map((delta) => ({ type: "text-delta" as const, id: "t", delta })),
      { type: "text-end", id: "t" },
      { ...finish, finishReason: { unified: "stop", raw: "stop" } },
    ];
    let streamed = 0;
    const model: LanguageModelV4 = {
      specificationVersion: "v4",
      provider: "test",
      modelId: "m",
      supportedUrls: {},
      doGenerate: async () => {
        throw new Error("the plain call is not made");
      },
      doStream: async () => {
        streamed++;
        return streamOf(parts);
      },
    };
    const told: string[] = [];
    const result = await generateText({
      model: streamingModel(model, (t) => told.push(t)),
      prompt: "hi",
      maxRetries: 0,
    });
    expect(streamed).toBe(1);
    expect(result.text).toBe("Hello there");
    expect(told.at(-1)).toBe("Hello there");
    expect(result.usage.inputTokens).toBe(10);
    expect(result.finishReason).toBe("stop");
  });
});
