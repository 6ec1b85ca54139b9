/**
 * Model references (`provider/model` or an alias from `models.aliases`) resolved to AI SDK
 * language models. Built-in providers: `echo` (default, no network), `openai`, `anthropic`;
 * any `models.providers` entry adds or overrides one (e.g. `openai-compatible` with a base URL).
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";
import type { Config } from "../config/schema";
import { createEchoModel } from "./echo";

type ProviderSpec = NonNullable<Config["models"]["providers"][string]>;

const BUILT_IN: Record<string, ProviderSpec> = {
  echo: { api: "echo", contextWindow: 32_000 },
  openai: { api: "openai", apiKeyEnv: "OPENAI_API_KEY" },
  anthropic: { api: "anthropic", apiKeyEnv: "ANTHROPIC_API_KEY", contextWindow: 200_000 },
};

export interface ResolvedModel {
  /** Canonical `provider/model`. */
  ref: string;
  provider: string;
  modelId: string;
  contextWindow: number;
  spec: ProviderSpec;
}

export class ModelRefError extends Error {}

function providers(config: Config): Record<string, ProviderSpec> {
  return { ...BUILT_IN, ...config.models.providers };
}

export function modelChoices(config: Config): string {
  const names = Object.keys(providers(config)).map((p) => `${p}/<model>`);
  const aliases = Object.keys(config.models.aliases);
  return `${names.join(", ")}${aliases.length ? `; aliases: ${aliases.join(", ")}` : ""}`;
}

/** Resolves a reference without touching the network; throws ModelRefError naming the valid choices. */
export function resolveModelRef(raw: string, config: Config): ResolvedModel {
  const trimmed = raw.trim();
  const aliased = config.models.aliases[trimmed] ?? config.models.aliases[trimmed.toLowerCase()] ?? trimmed;
  const slash = aliased.indexOf("/");
  const provider = (slash > 0 ? aliased.slice(0, slash) : "").toLowerCase();
  const modelId = slash > 0 ? aliased.slice(slash + 1) : "";
  const spec = providers(config)[provider];
  if (!spec || !modelId) {
    throw new ModelRefError(`unknown model "${raw}": use one of ${modelChoices(config)}`);
  }
  return {
    ref: `${provider}/${modelId}`,
    provider,
    modelId,
    contextWindow: spec.contextWindow ?? config.models.contextWindow,
    spec,
  };
}

function apiKey(spec: ProviderSpec, provider: string, env: Record<string, unknown>): string | undefined {
  if (!spec.apiKeyEnv) return undefined;
  const value = env[spec.apiKeyEnv];
  if (typeof value === "string" && value) return value;
  if (spec.api === "openai-compatible") return undefined;
  throw new ModelRefError(
    `provider "${provider}" needs the secret ${spec.apiKeyEnv} (wrangler secret put ${spec.apiKeyEnv}, or .dev.vars locally)`,
  );
}

export function languageModelFor(resolved: ResolvedModel, env: Record<string, unknown>): LanguageModel {
  const { spec, provider, modelId } = resolved;
  switch (spec.api) {
    case "echo":
      return createEchoModel(modelId);
    case "openai":
      return createOpenAI({
        apiKey: apiKey(spec, provider, env),
        baseURL: spec.baseUrl,
        headers: spec.headers,
      }).chat(modelId);
    case "anthropic":
      return createAnthropic({
        apiKey: apiKey(spec, provider, env),
        baseURL: spec.baseUrl,
        headers: spec.headers,
      })(modelId);
    case "openai-compatible":
      if (!spec.baseUrl)
        throw new ModelRefError(`provider "${provider}" needs models.providers.${provider}.baseUrl`);
      return createOpenAICompatible({
        name: provider,
        baseURL: spec.baseUrl,
        apiKey: apiKey(spec, provider, env),
        headers: spec.headers,
        includeUsage: true,
      }).chatModel(modelId);
    case "workers-ai":
      throw new ModelRefError(
        `provider "${provider}" uses api "workers-ai", which needs the AI binding; it is not bound in this deployment`,
      );
  }
}
