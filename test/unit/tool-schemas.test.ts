import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Content,
  LanguageModelV4GenerateResult,
} from "@ai-sdk/provider";
import { generateText, type ToolSet, tool } from "ai";
import { describe, expect, it } from "vitest";
import { toolSet } from "../../src/agent/tool-calls";
import { allTools } from "../../src/tools/registry";

// The agent loop hands the AI SDK tools whose JSON schema is converted once (src/agent/loop.ts).
// The model must see exactly what it saw when the SDK converted each tool's zod schema itself,
// and tool calls must be validated the same way.

/** A model that answers with `content` and records the options of every call. */
function recordingModel(content: LanguageModelV4Content[] = [{ type: "text", text: "ok" }]) {
  const calls: LanguageModelV4CallOptions[] = [];
  const model: LanguageModelV4 = {
    specificationVersion: "v4",
    provider: "test",
    modelId: "recording",
    supportedUrls: {},
    async doGenerate(options): Promise<LanguageModelV4GenerateResult> {
      calls.push(options);
      const finish = content.some((c) => c.type === "tool-call") ? "tool-calls" : "stop";
      return {
        content,
        finishReason: { unified: finish, raw: finish },
        usage: {
          inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
          outputTokens: { total: 1, text: 1, reasoning: 0 },
        },
        warnings: [],
      };
    },
    async doStream() {
      throw new Error("not used");
    },
  };
  return { model, calls };
}

/** What the loop handed the SDK before: each tool with its bare zod schema. */
function bareZodTools(): ToolSet {
  const set: ToolSet = {};
  for (const t of allTools()) set[t.name] = tool({ description: t.description, inputSchema: t.schema });
  return set;
}

async function modelSees(tools: ToolSet) {
  const { model, calls } = recordingModel();
  await generateText({ model, prompt: "hi", tools });
  return JSON.stringify(calls[0]?.tools);
}

/** Tool calls as the SDK reports them, errors by message. */
async function parsedCalls(tools: ToolSet, content: LanguageModelV4Content[]) {
  const { model } = recordingModel(content);
  const result = await generateText({ model, prompt: "hi", tools });
  return result.toolCalls.map((c) => ({
    ...c,
    error: "error" in c && c.error !== undefined ? String(c.error) : undefined,
  }));
}

describe("tool schemas given to the model", () => {
  it("are byte-identical to the SDK's own conversion of the zod schemas", async () => {
    const before = await modelSees(bareZodTools());
    expect(before).toContain("sessions_list");
    expect(await modelSees(toolSet(allTools()))).toBe(before);
    // Again, now from the memoized conversion.
    expect(await modelSees(toolSet(allTools()))).toBe(before);
  });

  it("are made once per tool", () => {
    const [first] = allTools();
    if (!first) throw new Error("no tools");
    expect(toolSet([first])[first.name]).toBe(toolSet(allTools())[first.name]);
  });

  it("validate tool calls exactly as before (valid, invalid, empty, unparseable)", async () => {
    const inputs = ["", "{}", '{"limit":5}', '{"limit":"many","sessionKey":7,"extra":true}', "not json"];
    const content: LanguageModelV4Content[] = allTools().flatMap((t) =>
      inputs.map((input, i) => ({
        type: "tool-call" as const,
        toolCallId: `${t.name}-${i}`,
        toolName: t.name,
        input,
      })),
    );
    const before = await parsedCalls(bareZodTools(), content);
    expect(before.some((c) => "invalid" in c && c.invalid)).toBe(true);
    expect(before.some((c) => !("invalid" in c && c.invalid))).toBe(true);
    expect(await parsedCalls(toolSet(allTools()), content)).toEqual(before);
  });
});
