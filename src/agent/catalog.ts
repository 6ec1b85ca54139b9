/**
 * The built-in catalog of model limits: how many tokens of context a well-known model takes and,
 * when it matters, how many it may write per call. Pure data plus the lookup; the resolution
 * order that combines it with the config lives in `models.ts`.
 *
 * Keys are `<api>/<model>`: a provider of one's own with `api: "anthropic"` (an AI Gateway URL,
 * say) gets the same limits as the built-in `anthropic` provider. A key matches its model id
 * exactly or as the prefix of a dated or suffixed id (`claude-sonnet-4` matches
 * `claude-sonnet-4-20250514`); the longest matching key wins, so `gpt-4o-mini` is not read as
 * `gpt-4o`. `<api>/*` matches every model of that api.
 */

export interface ModelLimits {
  /** Tokens the model accepts as context (prompt plus output). */
  contextTokens: number;
  /** Most tokens one call may generate; passed to the model as `maxOutputTokens` when known. */
  maxOutputTokens?: number;
  /** The model takes images as input (SPEC §22). */
  vision?: boolean;
}

/**
 * Which built-in providers' models take images (SPEC §22), keyed as the catalog is: OpenAI's
 * current chat models and every Claude do; o3-mini and o1-mini do not. Anything else (an
 * `openai-compatible` server, Workers AI, echo) is told so by `models.providers.<p>.vision` or
 * a `models.catalog` entry.
 */
export const BUILT_IN_VISION: Readonly<Record<string, boolean>> = Object.freeze({
  "openai/*": true,
  "openai/o1-mini": false,
  "openai/o3-mini": false,
  "anthropic/*": true,
});

export const BUILT_IN_CATALOG: Readonly<Record<string, ModelLimits>> = Object.freeze({
  // The echo model is local; 32k keeps compaction thresholds reachable in tests and demos.
  "echo/*": { contextTokens: 32_000 },

  "openai/gpt-4o": { contextTokens: 128_000, maxOutputTokens: 16_384 },
  "openai/gpt-4o-mini": { contextTokens: 128_000, maxOutputTokens: 16_384 },
  "openai/gpt-4.1": { contextTokens: 1_047_576, maxOutputTokens: 32_768 },
  "openai/gpt-4.1-mini": { contextTokens: 1_047_576, maxOutputTokens: 32_768 },
  "openai/gpt-4.1-nano": { contextTokens: 1_047_576, maxOutputTokens: 32_768 },
  "openai/o1": { contextTokens: 200_000, maxOutputTokens: 100_000 },
  "openai/o3": { contextTokens: 200_000, maxOutputTokens: 100_000 },
  "openai/o3-mini": { contextTokens: 200_000, maxOutputTokens: 100_000 },
  "openai/o4-mini": { contextTokens: 200_000, maxOutputTokens: 100_000 },
  "openai/gpt-5": { contextTokens: 400_000, maxOutputTokens: 128_000 },
  "openai/gpt-5-mini": { contextTokens: 400_000, maxOutputTokens: 128_000 },
  "openai/gpt-5-nano": { contextTokens: 400_000, maxOutputTokens: 128_000 },

  "anthropic/claude-opus-4": { contextTokens: 200_000, maxOutputTokens: 32_000 },
  "anthropic/claude-opus-4-5": { contextTokens: 200_000, maxOutputTokens: 64_000 },
  "anthropic/claude-sonnet-4": { contextTokens: 200_000, maxOutputTokens: 64_000 },
  "anthropic/claude-haiku-4-5": { contextTokens: 200_000, maxOutputTokens: 64_000 },
  "anthropic/claude-3-7-sonnet": { contextTokens: 200_000, maxOutputTokens: 64_000 },
  "anthropic/claude-3-5-haiku": { contextTokens: 200_000, maxOutputTokens: 8_192 },
});

/**
 * Older generations that a bare family name does not pick when a person names a model in a word
 * (`/new sonnet` is `claude-sonnet-4`, not `claude-3-7-sonnet`; see model-match.ts). Their full
 * ids still resolve.
 */
export const SUPERSEDED: ReadonlySet<string> = new Set([
  "anthropic/claude-opus-4",
  "anthropic/claude-3-7-sonnet",
  "anthropic/claude-3-5-haiku",
]);

/**
 * The catalog entry for `api/modelId`: exact, else the longest key whose model part followed by
 * `-` starts the id, else `<api>/*`.
 */
export function catalogLimits(
  api: string,
  modelId: string,
  catalog: Readonly<Record<string, ModelLimits>> = BUILT_IN_CATALOG,
): ModelLimits | undefined {
  return lookupByModel(api, modelId, catalog);
}

/** A table keyed as the catalog is (`<api>/<model>`, prefixes, `<api>/*`), read for `api/modelId`. */
export function lookupByModel<T>(
  api: string,
  modelId: string,
  catalog: Readonly<Record<string, T>>,
): T | undefined {
  const ref = `${api}/${modelId}`;
  if (Object.hasOwn(catalog, ref)) return catalog[ref];
  let best: string | undefined;
  for (const key of Object.keys(catalog)) {
    if (!ref.startsWith(`${key}-`)) continue;
    if (best === undefined || key.length > best.length) best = key;
  }
  if (best !== undefined) return catalog[best];
  const wildcard = `${api}/*`;
  return Object.hasOwn(catalog, wildcard) ? catalog[wildcard] : undefined;
}
