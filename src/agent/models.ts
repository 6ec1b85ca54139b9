/**
 * Model references (`provider/model` or an alias from `models.aliases`) resolved to AI SDK
 * language models, with their context window and output limit. Built-in providers: `echo`
 * (default, no network), `openai`, `anthropic`, `workers-ai` (the `AI` binding); any
 * `models.providers` entry adds or overrides one (e.g. `openai-compatible` with a base URL).
 *
 * Context window, first that applies: the agent's `contextTokens`, the `models.catalog` entry
 * of the exact reference, the built-in catalog (`catalog.ts`), the provider's `contextWindow`,
 * `models.contextWindow` (default 128,000).
 */
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModel } from "ai";
import { createWorkersAI } from "workers-ai-provider";
import type { AgentConfig } from "../config/agents";
import type { Config } from "../config/schema";
import { BUILT_IN_VISION, catalogLimits, lookupByModel, type ModelLimits } from "./catalog";
import { createEchoModel } from "./echo";

type ProviderSpec = NonNullable<Config["models"]["providers"][string]>;

const BUILT_IN: Record<string, ProviderSpec> = {
  echo: { api: "echo", contextWindow: 32_000 },
  openai: { api: "openai", apiKeyEnv: "OPENAI_API_KEY" },
  anthropic: { api: "anthropic", apiKeyEnv: "ANTHROPIC_API_KEY", contextWindow: 200_000 },
  "workers-ai": { api: "workers-ai" },
};

export interface ResolvedModel {
  /** Canonical `provider/model`. */
  ref: string;
  provider: string;
  modelId: string;
  contextWindow: number;
  /** Most tokens one call may generate, when the catalog knows it. */
  maxOutputTokens?: number;
  /** It takes images as input: the config's catalog entry, else its provider's `vision`, else the built-in table. */
  vision: boolean;
  spec: ProviderSpec;
}

export class ModelRefError extends Error {}

/** The providers a config can name: the built-in ones, replaced or joined by `models.providers`. */
export function providerSpecs(config: Config): Record<string, ProviderSpec> {
  return { ...BUILT_IN, ...config.models.providers };
}

export function modelChoices(config: Config): string {
  const names = Object.keys(providerSpecs(config)).map((p) => `${p}/<model>`);
  const aliases = Object.keys(config.models.aliases);
  return `${names.join(", ")}${aliases.length ? `; aliases: ${aliases.join(", ")}` : ""}`;
}

/** The own entry of a config record named by user input (never `constructor`, `toString`…). */
function own<T>(record: Readonly<Record<string, T>>, name: string): T | undefined {
  return Object.hasOwn(record, name) ? record[name] : undefined;
}

/**
 * Resolves a reference without touching the network; throws ModelRefError naming the valid
 * choices. `agent` (the agent the run belongs to) may override the context window.
 */
export function resolveModelRef(
  raw: string,
  config: Config,
  agent?: Pick<AgentConfig, "contextTokens">,
): ResolvedModel {
  const trimmed = raw.trim();
  const aliases = config.models.aliases;
  const aliased = own(aliases, trimmed) ?? own(aliases, trimmed.toLowerCase()) ?? trimmed;
  const slash = aliased.indexOf("/");
  const provider = (slash > 0 ? aliased.slice(0, slash) : "").toLowerCase();
  const modelId = slash > 0 ? aliased.slice(slash + 1) : "";
  const spec = own(providerSpecs(config), provider);
  if (!spec || !modelId) {
    throw new ModelRefError(`unknown model "${raw}": use one of ${modelChoices(config)}`);
  }
  const ref = `${provider}/${modelId}`;
  const limits: ModelLimits | undefined = own(config.models.catalog, ref) ?? catalogLimits(spec.api, modelId);
  return {
    ref,
    provider,
    modelId,
    contextWindow:
      agent?.contextTokens ?? limits?.contextTokens ?? spec.contextWindow ?? config.models.contextWindow,
    ...(limits?.maxOutputTokens ? { maxOutputTokens: limits.maxOutputTokens } : {}),
    vision:
      own(config.models.catalog, ref)?.vision ??
      spec.vision ??
      lookupByModel(spec.api, modelId, BUILT_IN_VISION) ??
      false,
    spec,
  };
}

/** The Worker binding the `workers-ai` api runs models through. */
export const WORKERS_AI_BINDING = "AI";

function isAiBinding(value: unknown): value is Ai {
  return (
    typeof value === "object" && value !== null && typeof (value as { run?: unknown }).run === "function"
  );
}

/** The Workers AI binding, or a ModelRefError saying how to add it. */
export function aiBinding(provider: string, env: Record<string, unknown>): Ai {
  const binding = env[WORKERS_AI_BINDING];
  if (!isAiBinding(binding)) {
    throw new ModelRefError(
      `provider "${provider}" needs the Workers AI binding ${WORKERS_AI_BINDING}: add [ai] binding = "${WORKERS_AI_BINDING}" to wrangler.toml`,
    );
  }
  return binding;
}

export function apiKey(
  spec: ProviderSpec,
  provider: string,
  env: Record<string, unknown>,
): string | undefined {
  if (!spec.apiKeyEnv) return undefined;
  const value = env[spec.apiKeyEnv];
  if (typeof value === "string" && value) return value;
  if (spec.api === "openai-compatible") return undefined;
  throw new ModelRefError(
    `provider "${provider}" needs the secret ${spec.apiKeyEnv} (wrangler secret put ${spec.apiKeyEnv}, or .dev.vars locally)`,
  );
}

/** Provider clients kept per isolate (see `languageModelFor`), by what they were made from. */
const clients = new Map<string, LanguageModel>();
const CLIENTS_MAX = 64;

/**
 * The AI SDK model of a resolved reference. An HTTP provider's client is kept for the isolate's
 * next turns (it holds its settings only, no I/O; building one builds its response schemas,
 * about a tenth of a turn's CPU), keyed by everything it is made from, the API key included.
 */
export function languageModelFor(resolved: ResolvedModel, env: Record<string, unknown>): LanguageModel {
  const { spec, provider, modelId } = resolved;
  if (spec.api === "echo" || spec.api === "workers-ai") return newLanguageModel(resolved, env);
  const id = JSON.stringify([provider, modelId, spec, apiKey(spec, provider, env) ?? null]);
  let model = clients.get(id);
  if (!model) {
    model = newLanguageModel(resolved, env);
    if (clients.size >= CLIENTS_MAX) clients.delete(clients.keys().next().value as string);
    clients.set(id, model);
  }
  return model;
}

function newLanguageModel(resolved: ResolvedModel, env: Record<string, unknown>): LanguageModel {
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
      return createWorkersAI({ binding: aiBinding(provider, env) })(modelId);
  }
}
