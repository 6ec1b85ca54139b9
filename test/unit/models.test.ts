import { describe, expect, it } from "vitest";
import { BUILT_IN_CATALOG, catalogLimits } from "../../src/agent/catalog";
import { languageModelFor, ModelRefError, resolveModelRef } from "../../src/agent/models";
import { ConfigError, parseConfig } from "../../src/config/load";
import { type ConfigInput, ConfigSchema } from "../../src/config/schema";

const config = (input: ConfigInput = {}) => ConfigSchema.parse(input);

describe("the built-in catalog", () => {
  it("matches exact ids, dated ids by the longest prefix, and api wildcards", () => {
    expect(catalogLimits("openai", "gpt-4o")).toEqual({ contextTokens: 128_000, maxOutputTokens: 16_384 });
    expect(catalogLimits("openai", "gpt-4o-2024-08-06")).toBe(BUILT_IN_CATALOG["openai/gpt-4o"]);
    expect(catalogLimits("openai", "gpt-4o-mini-2024-07-18")).toBe(BUILT_IN_CATALOG["openai/gpt-4o-mini"]);
    expect(catalogLimits("anthropic", "claude-sonnet-4-20250514")).toBe(
      BUILT_IN_CATALOG["anthropic/claude-sonnet-4"],
    );
    expect(catalogLimits("anthropic", "claude-opus-4-5-20251101")).toBe(
      BUILT_IN_CATALOG["anthropic/claude-opus-4-5"],
    );
    expect(catalogLimits("anthropic", "claude-opus-4-1-20250805")).toBe(
      BUILT_IN_CATALOG["anthropic/claude-opus-4"],
    );
    expect(catalogLimits("echo", "anything")).toEqual({ contextTokens: 32_000 });
  });

  it("does not read a longer model name as a prefix without a dash", () => {
    expect(catalogLimits("openai", "o30")).toBeUndefined();
    expect(catalogLimits("openai", "gpt-4oo")).toBeUndefined();
    expect(catalogLimits("openai-compatible", "gpt-4o")).toBeUndefined();
    expect(catalogLimits("openai", "constructor")).toBeUndefined();
  });
});

describe("resolveModelRef: context window and output limit", () => {
  it("takes the built-in catalog, looked up by the provider's api", () => {
    const gateway = config({
      models: { providers: { gw: { api: "anthropic", baseUrl: "https://gateway.example/anthropic" } } },
    });
    expect(resolveModelRef("gw/claude-3-5-haiku-20241022", gateway)).toMatchObject({
      ref: "gw/claude-3-5-haiku-20241022",
      contextWindow: 200_000,
      maxOutputTokens: 8_192,
    });
    expect(resolveModelRef("openai/gpt-4.1", config())).toMatchObject({
      contextWindow: 1_047_576,
      maxOutputTokens: 32_768,
    });
    expect(resolveModelRef("echo/echo", config()).contextWindow).toBe(32_000);
  });

  it("orders agent override > models.catalog > built-in > provider contextWindow > models.contextWindow", () => {
    const cfg = config({
      models: {
        providers: {
          openai: { api: "openai", apiKeyEnv: "OPENAI_API_KEY", contextWindow: 50_000 },
          local: { api: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1", contextWindow: 8_000 },
        },
        catalog: { "openai/gpt-4o": { contextTokens: 64_000 } },
        contextWindow: 4_000,
      },
    });
    // models.catalog replaces the built-in entry whole (no maxOutputTokens any more).
    const catalogued = resolveModelRef("openai/gpt-4o", cfg);
    expect(catalogued.contextWindow).toBe(64_000);
    expect(catalogued).not.toHaveProperty("maxOutputTokens");
    expect(resolveModelRef("openai/gpt-4o", cfg, { contextTokens: 10_000 }).contextWindow).toBe(10_000);
    expect(resolveModelRef("openai/o3", cfg).contextWindow).toBe(200_000);
    expect(resolveModelRef("openai/some-new-model", cfg).contextWindow).toBe(50_000);
    expect(resolveModelRef("local/llama3", cfg).contextWindow).toBe(8_000);
    expect(resolveModelRef("workers-ai/@cf/meta/llama-3.1-8b-instruct", cfg).contextWindow).toBe(4_000);
    expect(resolveModelRef("workers-ai/@cf/meta/llama-3.1-8b-instruct", config()).contextWindow).toBe(
      128_000,
    );
  });

  it("looks models.catalog up by the reference an alias resolves to", () => {
    const cfg = config({
      models: {
        aliases: { fast: "local/tiny" },
        providers: { local: { api: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1" } },
        catalog: { "local/tiny": { contextTokens: 2_048, maxOutputTokens: 512 } },
      },
    });
    expect(resolveModelRef("fast", cfg)).toMatchObject({
      ref: "local/tiny",
      contextWindow: 2_048,
      maxOutputTokens: 512,
    });
  });
});

describe("resolveModelRef: names from user input", () => {
  const choices = /use one of echo\/<model>, openai\/<model>, anthropic\/<model>, workers-ai\/<model>/;

  it.each(["constructor/x", "toString/x", "hasOwnProperty/x", "__proto__/x", "valueOf"])(
    "answers %s with the unknown-model error",
    (ref) => {
      expect(() => resolveModelRef(ref, config())).toThrow(ModelRefError);
      expect(() => resolveModelRef(ref, config())).toThrow(choices);
    },
  );

  it("does not read a catalog entry off the object prototype", () => {
    const resolved = resolveModelRef("echo/constructor", config({ models: { contextWindow: 1_000 } }));
    expect(resolved.contextWindow).toBe(32_000);
  });

  it("still resolves providers and aliases named like prototype members when configured", () => {
    const cfg = config({
      models: {
        providers: { constructor: { api: "echo" as const } },
        aliases: { toString: "constructor/m" },
      },
    });
    expect(resolveModelRef("toString", cfg).ref).toBe("constructor/m");
  });
});

describe("models.catalog and agents.list[].contextTokens in the config", () => {
  it("accepts exact references with positive limits", () => {
    const parsed = parseConfig(
      "{ models: { catalog: { 'local/llama3': { contextTokens: 8192, maxOutputTokens: 1024 } } }, agents: { list: [{ id: 'main', contextTokens: 32000 }] } }",
    );
    expect(parsed.models.catalog).toEqual({ "local/llama3": { contextTokens: 8192, maxOutputTokens: 1024 } });
    expect(parsed.agents.list[0]?.contextTokens).toBe(32_000);
  });

  it("rejects bad keys and limits, naming the path", () => {
    let problems: readonly string[] = [];
    try {
      parseConfig(
        "{ models: { catalog: { 'Local/x': { contextTokens: 1 }, 'nomodel': { contextTokens: 1 }, 'a/b': { contextTokens: 0, maxOutputTokens: 1.5 }, 'c/d': {} } }, agents: { list: [{ id: 'main', contextTokens: -1 }] } }",
      );
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      problems = (error as ConfigError).problems;
    }
    expect(problems).toEqual([
      "config.agents.list[0].contextTokens: must be >= 1 (got -1)",
      'config.models.catalog["Local/x"]: invalid name: must be an exact "provider/model" reference with a lowercase provider id (got "Local/x")',
      'config.models.catalog.nomodel: invalid name: must be an exact "provider/model" reference with a lowercase provider id (got "nomodel")',
      'config.models.catalog["a/b"].contextTokens: must be >= 1 (got 0)',
      'config.models.catalog["a/b"].maxOutputTokens: must be an integer (got 1.5)',
      'config.models.catalog["c/d"].contextTokens: is required',
    ]);
  });
});

describe("languageModelFor", () => {
  it("needs the AI binding for workers-ai and names it", () => {
    const resolved = resolveModelRef("workers-ai/@cf/meta/llama-3.1-8b-instruct", config());
    expect(() => languageModelFor(resolved, {})).toThrow(ModelRefError);
    expect(() => languageModelFor(resolved, {})).toThrow(/binding AI/);
    expect(() => languageModelFor(resolved, { AI: "not a binding" })).toThrow(/binding AI/);
    const model = languageModelFor(resolved, { AI: { run: async () => ({ response: "hi" }) } });
    expect(typeof model === "object" && model.modelId).toBe("@cf/meta/llama-3.1-8b-instruct");
  });

  it("needs the provider's API key secret and names it", () => {
    expect(() => languageModelFor(resolveModelRef("openai/gpt-4o", config()), {})).toThrow(
      /needs the secret OPENAI_API_KEY/,
    );
    expect(() => languageModelFor(resolveModelRef("anthropic/claude-sonnet-4", config()), {})).toThrow(
      /needs the secret ANTHROPIC_API_KEY/,
    );
  });

  it("keeps an HTTP provider's client for the next turns, and makes another when what it is made from changes", () => {
    const resolved = resolveModelRef("openai/gpt-4o", config());
    const first = languageModelFor(resolved, { OPENAI_API_KEY: "sk-1" });
    expect(languageModelFor(resolveModelRef("openai/gpt-4o", config()), { OPENAI_API_KEY: "sk-1" })).toBe(
      first,
    );
    expect(languageModelFor(resolved, { OPENAI_API_KEY: "sk-2" })).not.toBe(first);
    expect(
      languageModelFor(resolveModelRef("openai/gpt-4o-mini", config()), { OPENAI_API_KEY: "sk-1" }),
    ).not.toBe(first);
    const moved = { ...resolved, spec: { ...resolved.spec, baseUrl: "https://proxy.example/v1" } };
    expect(languageModelFor(moved, { OPENAI_API_KEY: "sk-1" })).not.toBe(first);
  });
});
