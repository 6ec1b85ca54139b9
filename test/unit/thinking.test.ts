import { describe, expect, it } from "vitest";
import { z } from "zod";
import { runAgentLoop } from "../../src/agent/loop";
import { resolveModelRef } from "../../src/agent/models";
import { ANTHROPIC_THINKING_BUDGETS, providerOptionsFor } from "../../src/agent/thinking";
import { ConfigSchema } from "../../src/config/schema";
import type { AgentTool } from "../../src/tools/types";
import { loopInput, scriptedModel } from "./scripted-model";

const config = ConfigSchema.parse({
  models: {
    providers: {
      "local-llm": { api: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1" },
      gw: { api: "anthropic", baseUrl: "https://gateway.example/anthropic" },
    },
  },
});
const model = (ref: string) => resolveModelRef(ref, config);
const levels = ["minimal", "low", "medium", "high"] as const;

describe("providerOptionsFor", () => {
  it.each([null, undefined, "off"])("asks for nothing at %s", (level) => {
    for (const ref of ["openai/o3", "anthropic/claude-sonnet-4-20250514", "local-llm/qwen3", "echo/echo"]) {
      expect(providerOptionsFor(model(ref), level)).toEqual({});
    }
  });

  it("maps OpenAI reasoning models to reasoningEffort", () => {
    for (const level of levels) {
      expect(providerOptionsFor(model("openai/gpt-5"), level)).toEqual({
        providerOptions: { openai: { reasoningEffort: level } },
      });
    }
    for (const ref of ["openai/o3", "openai/o4-mini", "openai/o1-2024-12-17", "openai/gpt-5.1"]) {
      expect(providerOptionsFor(model(ref), "high")).toEqual({
        providerOptions: { openai: { reasoningEffort: "high" } },
      });
    }
  });

  it('uses "low" for minimal where the model has no minimal effort, and says so', () => {
    expect(providerOptionsFor(model("openai/o3"), "minimal")).toEqual({
      providerOptions: { openai: { reasoningEffort: "low" } },
      note: 'openai/o3 has no "minimal" reasoning effort; using "low"',
    });
  });

  it("gives other OpenAI models no options and a note", () => {
    for (const ref of ["openai/gpt-4o", "openai/gpt-4.1-mini", "openai/gpt-5-chat-latest"]) {
      expect(providerOptionsFor(model(ref), "high")).toEqual({
        note: `${ref} has no reasoning option; thinking level ignored`,
      });
    }
  });

  it("maps Anthropic models to extended thinking with the documented budgets", () => {
    expect(ANTHROPIC_THINKING_BUDGETS).toEqual({ minimal: 1024, low: 2048, medium: 8192, high: 16384 });
    for (const level of levels) {
      for (const ref of [
        "anthropic/claude-sonnet-4-20250514",
        "gw/claude-opus-4-1",
        "anthropic/claude-3-7-sonnet",
      ]) {
        expect(providerOptionsFor(model(ref), level)).toEqual({
          providerOptions: {
            anthropic: { thinking: { type: "enabled", budgetTokens: ANTHROPIC_THINKING_BUDGETS[level] } },
          },
        });
      }
    }
    expect(providerOptionsFor(model("anthropic/claude-3-5-haiku-20241022"), "low")).toEqual({
      note: "anthropic/claude-3-5-haiku-20241022 has no extended thinking; thinking level ignored",
    });
  });

  it("sends reasoningEffort to openai-compatible servers under the provider's camel-cased name", () => {
    for (const level of levels) {
      expect(providerOptionsFor(model("local-llm/qwen3"), level)).toEqual({
        providerOptions: { localLlm: { reasoningEffort: level } },
      });
    }
  });

  it("gives workers-ai and echo no options and a note", () => {
    expect(providerOptionsFor(model("echo/echo"), "high")).toEqual({
      note: "echo/echo has no thinking option; thinking level ignored",
    });
    expect(
      providerOptionsFor(model("workers-ai/@cf/meta/llama-3.1-8b-instruct"), "low").providerOptions,
    ).toBe(undefined);
  });

  it("ignores an unknown level with a note", () => {
    expect(providerOptionsFor(model("openai/o3"), "extreme")).toEqual({
      note: 'unknown thinking level "extreme" (use off, minimal, low, medium, high)',
    });
  });
});

const ping: AgentTool = {
  name: "ping",
  description: "answers pong",
  schema: z.object({}),
  execute: async () => ({ pong: true }),
};

async function run(
  m: ReturnType<typeof scriptedModel>["model"],
  extra: { providerOptions?: Record<string, Record<string, never>>; maxOutputTokens?: number },
) {
  return runAgentLoop(loopInput(m, [ping], extra));
}

describe("the agent loop's call options", () => {
  it("passes providerOptions and maxOutputTokens to every model call", async () => {
    const scripted = scriptedModel([
      [{ type: "tool-call", toolCallId: "c1", toolName: "ping", input: "{}" }],
    ]);
    const providerOptions = { anthropic: { thinking: { type: "enabled", budgetTokens: 2048 } } };
    await run(scripted.model, { providerOptions: providerOptions as never, maxOutputTokens: 777 });
    expect(scripted.calls).toHaveLength(2);
    for (const call of scripted.calls) {
      expect(call.providerOptions).toEqual(providerOptions);
      expect(call.maxOutputTokens).toBe(777);
    }
  });

  it("sends reasoning returned with tool calls back with those calls, and keeps it out of the transcript", async () => {
    const signed = { anthropic: { signature: "sig-1" } };
    const scripted = scriptedModel([
      [
        { type: "reasoning", text: "I should ping.", providerMetadata: signed },
        { type: "tool-call", toolCallId: "c1", toolName: "ping", input: "{}" },
      ],
    ]);
    const result = await run(scripted.model, {});
    const second = scripted.calls[1];
    const assistant = second?.prompt.find((m) => m.role === "assistant");
    expect(assistant?.content).toEqual([
      { type: "reasoning", text: "I should ping.", providerOptions: signed },
      expect.objectContaining({ type: "tool-call", toolCallId: "c1", toolName: "ping" }),
    ]);
    const stored = result.checkpoint.produced.flatMap((m) => m.content.map((p) => p.type));
    expect(stored).toEqual(["toolCall", "text", "text"]);
    expect(result.reply).toBe("done");
  });
});
