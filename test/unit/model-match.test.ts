import { describe, expect, it } from "vitest";
import { matchModelWord } from "../../src/agent/model-match";
import { parseConfig } from "../../src/config/load";
import { matchResetTrigger } from "../../src/session/entry/reset-trigger";

const config = parseConfig(
  JSON.stringify({
    models: {
      aliases: { fast: "openai/gpt-4.1-mini" },
      providers: { local: { api: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1" } },
      catalog: { "local/llama3.1-8b": { contextTokens: 131072 } },
    },
  }),
);

describe("a model named in a word (/new <model>)", () => {
  it("takes an exact reference first: an alias or provider/model", () => {
    expect(matchModelWord("fast", config)).toBe("openai/gpt-4.1-mini");
    expect(matchModelWord("FAST", config)).toBe("openai/gpt-4.1-mini");
    expect(matchModelWord("anthropic/claude-sonnet-4-20250514", config)).toBe(
      "anthropic/claude-sonnet-4-20250514",
    );
  });

  it("takes a model id of the catalog without its provider", () => {
    expect(matchModelWord("gpt-4.1", config)).toBe("openai/gpt-4.1");
    expect(matchModelWord("GPT-5", config)).toBe("openai/gpt-5");
    expect(matchModelWord("o3", config)).toBe("openai/o3");
    expect(matchModelWord("llama3.1-8b", config)).toBe("local/llama3.1-8b");
    expect(matchModelWord("echo", config)).toBe("echo/echo");
  });

  it("takes a family name that names one current model", () => {
    expect(matchModelWord("sonnet", config)).toBe("anthropic/claude-sonnet-4");
    expect(matchModelWord("opus", config)).toBe("anthropic/claude-opus-4-5");
    expect(matchModelWord("haiku", config)).toBe("anthropic/claude-haiku-4-5");
    expect(matchModelWord("llama3.1", config)).toBe("local/llama3.1-8b");
  });

  it("names no model for an ambiguous word or an unknown one", () => {
    expect(matchModelWord("mini", config)).toBeUndefined();
    expect(matchModelWord("claude", config)).toBeUndefined();
    expect(matchModelWord("4", config)).toBeUndefined();
    expect(matchModelWord("hello", config)).toBeUndefined();
    expect(matchModelWord("", config)).toBeUndefined();
  });

  it("an id served by two providers of one api is ambiguous", () => {
    const two = parseConfig(
      JSON.stringify({
        models: { providers: { gateway: { api: "openai", baseUrl: "https://gw.example/v1" } } },
      }),
    );
    expect(matchModelWord("gpt-4.1", two)).toBeUndefined();
    expect(matchModelWord("gateway/gpt-4.1", two)).toBe("gateway/gpt-4.1");
  });

  it("/new sonnet picks the model; /new mini keeps the word as the first message", () => {
    expect(matchResetTrigger("/new sonnet", ["/new"], config)).toEqual({
      trigger: "/new",
      rest: "",
      model: "anthropic/claude-sonnet-4",
    });
    expect(matchResetTrigger("/new gpt-4.1 plan my week", ["/new"], config)).toEqual({
      trigger: "/new",
      rest: "plan my week",
      model: "openai/gpt-4.1",
    });
    expect(matchResetTrigger("/new mini golf tips", ["/new"], config)).toEqual({
      trigger: "/new",
      rest: "mini golf tips",
    });
  });
});
