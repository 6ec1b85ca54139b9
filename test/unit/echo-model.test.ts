import type {
  LanguageModelV4CallOptions,
  LanguageModelV4FunctionTool,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
} from "@ai-sdk/provider";
import { generateText, tool } from "ai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createEchoModel, estimateTokens } from "../../src/agent/echo";

const lookup: LanguageModelV4FunctionTool = {
  type: "function",
  name: "lookup",
  inputSchema: { type: "object", properties: { q: { type: "string" } } },
};

function userMsg(text: string): LanguageModelV4Prompt[number] {
  return { role: "user", content: [{ type: "text", text }] };
}

async function generate(prompt: LanguageModelV4Prompt, tools?: LanguageModelV4FunctionTool[]) {
  const options: LanguageModelV4CallOptions = { prompt, ...(tools ? { tools } : {}) };
  return createEchoModel().doGenerate(options);
}

describe("echo model", () => {
  it("answers `echo: <last user text>` and stops", async () => {
    const result = await generate([userMsg("hello world")]);
    expect(result.content).toEqual([{ type: "text", text: "echo: hello world" }]);
    expect(result.finishReason).toEqual({ unified: "stop", raw: "stop" });
  });

  it("echoes the latest user message, trimmed", async () => {
    const result = await generate([
      userMsg("first"),
      { role: "assistant", content: [{ type: "text", text: "echo: first" }] },
      userMsg("  second  "),
    ]);
    expect(result.content).toEqual([{ type: "text", text: "echo: second" }]);
  });

  it("estimates usage at one token per four characters of prompt and output", async () => {
    const result = await generate([
      { role: "system", content: "be brief" }, // 8 chars
      userMsg("hello world"), // 11 chars
    ]);
    // 19 prompt chars → 5 tokens; "echo: hello world" is 17 chars → 5 tokens.
    expect(result.usage.inputTokens).toEqual({ total: 5, noCache: 5, cacheRead: 0, cacheWrite: 0 });
    expect(result.usage.outputTokens).toEqual({ total: 5, text: 5, reasoning: 0 });
  });

  it("counts at least one token each way for an empty prompt", async () => {
    const result = await generate([]);
    expect(result.content).toEqual([{ type: "text", text: "echo: " }]);
    expect(result.usage.inputTokens.total).toBe(1);
    expect(result.usage.outputTokens.total).toBe(2);
  });

  it("makes a tool call for `call:<tool> {json}` when the tool is offered", async () => {
    const result = await generate([userMsg('call:lookup {"q":"weather"}')], [lookup]);
    expect(result.content).toEqual([
      { type: "tool-call", toolCallId: "echo-call-0", toolName: "lookup", input: '{"q":"weather"}' },
    ]);
    expect(result.finishReason).toEqual({ unified: "tool-calls", raw: "tool-calls" });
    // The tool-call input is the output: 15 chars → 4 tokens.
    expect(result.usage.outputTokens.total).toBe(4);
  });

  it("calls with empty arguments when no JSON follows the tool name", async () => {
    const result = await generate([userMsg("call:lookup")], [lookup]);
    expect(result.content).toEqual([
      { type: "tool-call", toolCallId: "echo-call-0", toolName: "lookup", input: "{}" },
    ]);
  });

  it("numbers tool call ids by the assistant turns already in the prompt", async () => {
    const result = await generate(
      [
        userMsg("hi"),
        { role: "assistant", content: [{ type: "text", text: "echo: hi" }] },
        userMsg("call:lookup {}"),
      ],
      [lookup],
    );
    expect(result.content).toEqual([
      { type: "tool-call", toolCallId: "echo-call-1", toolName: "lookup", input: "{}" },
    ]);
  });

  it("echoes the text instead when the tool is not offered", async () => {
    const result = await generate([userMsg('call:lookup {"q":"x"}')]);
    expect(result.content).toEqual([{ type: "text", text: 'echo: call:lookup {"q":"x"}' }]);
    const other = await generate([userMsg("call:delete_all {}")], [lookup]);
    expect(other.content).toEqual([{ type: "text", text: "echo: call:delete_all {}" }]);
    expect(other.finishReason.unified).toBe("stop");
  });

  it("does not treat text around a call as a call", async () => {
    const result = await generate([userMsg("please call:lookup {}")], [lookup]);
    expect(result.content).toEqual([{ type: "text", text: "echo: please call:lookup {}" }]);
  });

  it("answers `echo: <tool> -> <result json>` after a tool result", async () => {
    const result = await generate(
      [
        userMsg('call:lookup {"q":"x"}'),
        {
          role: "assistant",
          content: [{ type: "tool-call", toolCallId: "echo-call-0", toolName: "lookup", input: { q: "x" } }],
        },
        {
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: "echo-call-0",
              toolName: "lookup",
              output: { type: "json", value: { answer: 42 } },
            },
          ],
        },
      ],
      [lookup],
    );
    expect(result.content).toEqual([
      { type: "text", text: 'echo: lookup -> {"type":"json","value":{"answer":42}}' },
    ]);
    expect(result.finishReason.unified).toBe("stop");
  });

  it("streams the same answer it generates", async () => {
    const prompt = [userMsg("stream me")];
    const { stream } = await createEchoModel().doStream({ prompt });
    const parts: LanguageModelV4StreamPart[] = [];
    const reader = stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
    }
    const text = parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("");
    expect(text).toBe("echo: stream me");
    expect(parts[0]?.type).toBe("stream-start");
    expect(parts.at(-1)).toMatchObject({ type: "finish", finishReason: { unified: "stop" } });
  });

  it("reports its provider and model id", () => {
    const model = createEchoModel("other");
    expect(model.provider).toBe("echo");
    expect(model.modelId).toBe("other");
  });

  it("drives the AI SDK tool loop: parsed tool input, then an answer", async () => {
    const first = await generateText({
      model: createEchoModel(),
      prompt: 'call:lookup {"q":"x"}',
      tools: { lookup: tool({ inputSchema: z.object({ q: z.string() }) }) },
    });
    expect(first.toolCalls.map((c) => ({ name: c.toolName, input: c.input }))).toEqual([
      { name: "lookup", input: { q: "x" } },
    ]);
    const plain = await generateText({ model: createEchoModel(), prompt: "plain" });
    expect(plain.text).toBe("echo: plain");
    expect(plain.usage.inputTokens).toBe(2);
    expect(plain.usage.outputTokens).toBe(3);
  });
});

describe("estimateTokens", () => {
  it("is ceil(chars / 4)", () => {
    expect(estimateTokens("")).toBe(0);
    expect(estimateTokens("abcd")).toBe(1);
    expect(estimateTokens("abcde")).toBe(2);
    expect(estimateTokens("x".repeat(4000))).toBe(1000);
  });
});
