/**
 * Thinking levels (a session entry's `thinkingLevel`: off, minimal, low, medium, high) mapped to
 * the AI SDK `providerOptions` of the session's model. Pure: the same level and model always
 * give the same options, and a level the model cannot honour gives none plus a note saying why.
 *
 * - `openai` (reasoning models: o1, o3, o4…, gpt-5 and later except the gpt-5-chat models):
 *   `reasoning_effort` = the level. `minimal` exists on gpt-5 only; elsewhere it becomes `low`.
 *   Other OpenAI models have no reasoning option.
 * - `anthropic`: extended thinking with a token budget per level (`ANTHROPIC_THINKING_BUDGETS`),
 *   except the claude-3-5 / claude-3 / claude-2 families, which cannot think.
 * - `openai-compatible`: `reasoning_effort` = the level, sent as is; the server decides.
 * - `workers-ai`, `echo`: no option.
 */
import type { SharedV4ProviderOptions } from "@ai-sdk/provider";
import type { ResolvedModel } from "./models";

export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high"] as const;
export type ThinkingLevel = (typeof THINKING_LEVELS)[number];
type OnLevel = Exclude<ThinkingLevel, "off">;

/** Anthropic's `budget_tokens` per level (1,024 is the smallest budget Anthropic accepts). */
export const ANTHROPIC_THINKING_BUDGETS: Readonly<Record<OnLevel, number>> = Object.freeze({
  minimal: 1_024,
  low: 2_048,
  medium: 8_192,
  high: 16_384,
});

export interface ThinkingOptions {
  /** Passed to the model call; absent when the level asks for nothing or the model has no option. */
  providerOptions?: SharedV4ProviderOptions;
  /** Why a level that is on has no effect (or a weaker one) on this model. */
  note?: string;
}

function isLevel(value: string): value is ThinkingLevel {
  return (THINKING_LEVELS as readonly string[]).includes(value);
}

/** OpenAI's reasoning models, as `@ai-sdk/openai` recognizes them. */
function openAIReasoning(modelId: string): { reasoning: boolean; minimal: boolean } {
  if (/^o\d+(?:-|$)/.test(modelId)) return { reasoning: true, minimal: false };
  const gpt = /^gpt-(\d+)(?:\.(\d+))?(?:-(.+))?$/.exec(modelId);
  if (!gpt) return { reasoning: false, minimal: false };
  const major = Number(gpt[1]);
  const minor = gpt[2] === undefined ? undefined : Number(gpt[2]);
  const chat = minor === undefined && (gpt[3]?.startsWith("chat") ?? false);
  const reasoning = major >= 5 && !chat;
  return { reasoning, minimal: reasoning && major === 5 && (minor ?? 0) === 0 };
}

/** Claude families without extended thinking (everything newer has it). */
function anthropicCannotThink(modelId: string): boolean {
  return /^claude-(?:3-5-|3-(?:opus|sonnet|haiku)|2|instant)/.test(modelId);
}

/** `local-llm` → `localLlm`: the providerOptions key `@ai-sdk/openai-compatible` prefers. */
function camelCase(name: string): string {
  return name.replace(/[_-]([a-z])/g, (_, c: string) => c.toUpperCase());
}

export function providerOptionsFor(
  resolved: Pick<ResolvedModel, "ref" | "provider" | "modelId" | "spec">,
  thinkingLevel: string | null | undefined,
): ThinkingOptions {
  if (!thinkingLevel) return {};
  if (!isLevel(thinkingLevel)) {
    return { note: `unknown thinking level "${thinkingLevel}" (use ${THINKING_LEVELS.join(", ")})` };
  }
  if (thinkingLevel === "off") return {};
  const level: OnLevel = thinkingLevel;
  const { ref, modelId } = resolved;
  switch (resolved.spec.api) {
    case "openai": {
      const model = openAIReasoning(modelId);
      if (!model.reasoning) return { note: `${ref} has no reasoning option; thinking level ignored` };
      if (level === "minimal" && !model.minimal) {
        return {
          providerOptions: { openai: { reasoningEffort: "low" } },
          note: `${ref} has no "minimal" reasoning effort; using "low"`,
        };
      }
      return { providerOptions: { openai: { reasoningEffort: level } } };
    }
    case "anthropic":
      if (anthropicCannotThink(modelId)) {
        return { note: `${ref} has no extended thinking; thinking level ignored` };
      }
      return {
        providerOptions: {
          anthropic: { thinking: { type: "enabled", budgetTokens: ANTHROPIC_THINKING_BUDGETS[level] } },
        },
      };
    case "openai-compatible":
      return { providerOptions: { [camelCase(resolved.provider)]: { reasoningEffort: level } } };
    case "workers-ai":
    case "echo":
      return { note: `${ref} has no thinking option; thinking level ignored` };
  }
}
