/**
 * `models` in SWITCHBOARD_CONFIG (SPEC §15): the model providers, aliases, per-model limits
 * (the catalog), provider call retries and the default context window.
 */
import { z } from "zod";
import {
  EnvName,
  formatValue,
  HttpUrl,
  Id,
  intBetween,
  NonEmpty,
  NonNegativeInt,
  PositiveInt,
} from "./fields";

const ProviderSchema = z
  .strictObject({
    api: z.enum(["openai", "anthropic", "openai-compatible", "workers-ai", "echo"]),
    baseUrl: HttpUrl.optional(),
    apiKeyEnv: EnvName.optional(),
    contextWindow: PositiveInt.optional(),
    /** Its models take images as input (SPEC §22) unless the catalog says otherwise. */
    vision: z.boolean().optional(),
    headers: z.record(NonEmpty, z.string()).optional(),
  })
  .superRefine((provider, ctx) => {
    if (provider.api === "openai-compatible" && provider.baseUrl === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["baseUrl"],
        message: 'is required when api is "openai-compatible"',
      });
    }
  });
export type ProviderConfig = z.output<typeof ProviderSchema>;

const ModelRef = z.string().regex(/^[^/\s]+\/\S/, {
  error: (iss) => `must be a "provider/model" reference (got ${formatValue(iss.input)})`,
});

/** A `models.catalog` key: the exact `provider/model` a reference resolves to (provider lowercase). */
const CatalogRef = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}\/\S+$/, {
  error: (iss) =>
    `must be an exact "provider/model" reference with a lowercase provider id (got ${formatValue(iss.input)})`,
});

const ModelLimitsSchema = z.strictObject({
  contextTokens: PositiveInt,
  maxOutputTokens: PositiveInt.optional(),
  /** The model takes images as input (SPEC §22). */
  vision: z.boolean().optional(),
});

const UsdPerMillion = z.number().min(0).max(10_000);
const PriceSchema = z.strictObject({
  input: UsdPerMillion,
  output: UsdPerMillion,
  cacheRead: UsdPerMillion.optional(),
  cacheWrite: UsdPerMillion.optional(),
});

export const ModelsSchema = z.strictObject({
  providers: z.record(Id, ProviderSchema).default(() => ({})),
  aliases: z.record(NonEmpty, ModelRef).default(() => ({})),
  /**
   * Limits per exact model reference; an entry replaces the built-in catalog's whole. Context
   * window resolution: `agents.list[].contextTokens` > this > the built-in catalog
   * (`src/agent/catalog.ts`) > the provider's `contextWindow` > `contextWindow` below.
   */
  catalog: z.record(CatalogRef, ModelLimitsSchema).default(() => ({})),
  /**
   * Prices per exact model reference, US dollars per million tokens (SPEC §21); an entry
   * replaces the built-in table's (src/agent/pricing.ts). A model priced nowhere costs null.
   */
  pricing: z.record(CatalogRef, PriceSchema).default(() => ({})),
  retry: z
    .strictObject({
      /** Total provider calls per model step, the first included (SPEC §17). */
      attempts: intBetween(1, 10).default(3),
      baseDelayMs: NonNegativeInt.default(500),
    })
    .prefault({}),
  /** Context window for models that nothing above names (default 128,000 tokens). */
  contextWindow: PositiveInt.default(128_000),
});
export type ModelsConfig = z.output<typeof ModelsSchema>;
