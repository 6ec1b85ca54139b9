/**
 * What a model call costs (SPEC §21): the built-in price table of the built-in providers'
 * current models, the lookup that combines it with `models.pricing`, and the cost of one call's
 * usage. Pure data and arithmetic; a model with no price has cost `null`, never 0.
 *
 * Prices are US dollars per million tokens, the providers' list prices as of PRICES_AS_OF
 * (the README shows the table): keys are `<api>/<model>` and match as the catalog's do
 * (catalog.ts), so `claude-sonnet-4` prices `claude-sonnet-4-20250514` and a provider of one's
 * own with `api: "anthropic"` gets Anthropic's prices. `models.pricing` (exact references)
 * comes first.
 */
import { lookupByModel } from "./catalog";

export interface Price {
  input: number;
  output: number;
  /** Cached input read; input's price when the provider names none. */
  cacheRead?: number;
  /** Cached input written; input's price when the provider names none. */
  cacheWrite?: number;
}

export const PRICES_AS_OF = "2025-11";

export const BUILT_IN_PRICES: Readonly<Record<string, Price>> = Object.freeze({
  // The echo model runs in the gateway: it costs nothing.
  "echo/*": { input: 0, output: 0 },

  "openai/gpt-4o": { input: 2.5, output: 10, cacheRead: 1.25 },
  "openai/gpt-4o-mini": { input: 0.15, output: 0.6, cacheRead: 0.075 },
  "openai/gpt-4.1": { input: 2, output: 8, cacheRead: 0.5 },
  "openai/gpt-4.1-mini": { input: 0.4, output: 1.6, cacheRead: 0.1 },
  "openai/gpt-4.1-nano": { input: 0.1, output: 0.4, cacheRead: 0.025 },
  "openai/o1": { input: 15, output: 60, cacheRead: 7.5 },
  "openai/o3": { input: 2, output: 8, cacheRead: 0.5 },
  "openai/o3-mini": { input: 1.1, output: 4.4, cacheRead: 0.55 },
  "openai/o4-mini": { input: 1.1, output: 4.4, cacheRead: 0.275 },
  "openai/gpt-5": { input: 1.25, output: 10, cacheRead: 0.125 },
  "openai/gpt-5-mini": { input: 0.25, output: 2, cacheRead: 0.025 },
  "openai/gpt-5-nano": { input: 0.05, output: 0.4, cacheRead: 0.005 },

  "anthropic/claude-opus-4": { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  "anthropic/claude-opus-4-5": { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 },
  "anthropic/claude-sonnet-4": { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  "anthropic/claude-haiku-4-5": { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 },
  "anthropic/claude-3-7-sonnet": { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  "anthropic/claude-3-5-haiku": { input: 0.8, output: 4, cacheRead: 0.08, cacheWrite: 1 },
});

/** One model call's tokens: `inputTokens` counts all input, the cached read and written included. */
export interface CallTokens {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

/** The price of `ref` (`provider/model`, served by `api`): `models.pricing`, else the built-in table. */
export function priceOf(
  ref: string,
  api: string,
  modelId: string,
  pricing: Readonly<Record<string, Price>>,
): Price | undefined {
  return Object.hasOwn(pricing, ref) ? pricing[ref] : lookupByModel(api, modelId, BUILT_IN_PRICES);
}

/** What a call with `tokens` costs at `price`, in US dollars; null when the model has no price. */
export function costOf(tokens: CallTokens, price: Price | undefined): number | null {
  if (!price) return null;
  const cached = tokens.cacheReadTokens + tokens.cacheWriteTokens;
  const fresh = Math.max(0, tokens.inputTokens - cached);
  const micro =
    fresh * price.input +
    tokens.cacheReadTokens * (price.cacheRead ?? price.input) +
    tokens.cacheWriteTokens * (price.cacheWrite ?? price.input) +
    tokens.outputTokens * price.output;
  return micro / 1_000_000;
}
