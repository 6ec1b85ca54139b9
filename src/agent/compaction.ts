/**
 * Compaction (SPEC §5): the rules that decide when a session's context is compacted and which
 * messages a summary replaces (pure), the summarization prompt and the summary call itself (the
 * session's own model), and the memory-flush prompt of the silent turn before an automatic
 * compaction. Token sizes come from the one estimator in src/transcript/tokens.ts.
 */
import { generateText, type LanguageModel } from "ai";
import { type TranscriptMessage, textOf } from "../transcript/message";
import { estimateTokens } from "../transcript/tokens";
import { ProviderError } from "./loop";
import { describeProviderError, type RetryPolicy, withRetries } from "./retry";

/** The summarizer's instructions. `/compact <instructions>` appends the user's own. */
export const COMPACTION_PROMPT = [
  "You compact the history of a chat session so that the conversation can go on within the model's context window.",
  "Write a summary that replaces the older messages shown to you. The most recent messages stay in the context verbatim; do not repeat them.",
  "Keep: the user's goals, preferences and constraints; decisions and their reasons; names, numbers, identifiers and facts later messages rely on; open questions, promises and unfinished tasks; what tools were used for and what they found.",
  "Drop: greetings, small talk, repetition, and tool output that no longer matters.",
  "If an earlier summary is given, merge it into the new one: the result must stand alone.",
  "Write concise bullet points in the language of the conversation. Never invent anything. Output only the summary.",
].join("\n");

/** The user message of the silent turn that precedes an automatic compaction. */
export const MEMORY_FLUSH_PROMPT = [
  "[memory flush] The older part of this conversation is about to be summarized, and its details will leave your context.",
  "Save what is worth keeping beyond this conversation (the user's preferences, decisions, facts, commitments) with memory_write: one note per fact, with a key for facts that may change later.",
  "If nothing is worth saving, reply NO_NOTES. This turn is silent: nobody sees your reply.",
].join("\n");

/** Share of the window the verbatim tail may keep after a compaction. */
export const KEEP_SHARE = 0.25;
/** Share of the window a summary may take (and at most SUMMARY_MAX_TOKENS). */
export const SUMMARY_SHARE = 0.15;
export const SUMMARY_MAX_TOKENS = 4_096;
/** A tool call's arguments and a tool result are cut to this many characters for the summarizer. */
const TOOL_TEXT_CHARS = 1_000;

export interface Sized {
  id: string;
  role: TranscriptMessage["role"];
  tokens: number;
}

export interface WindowUse {
  /** Estimated tokens of the next model call: system prompt, tool schemas, summary, messages. */
  tokens: number;
  /** Messages after the latest summary (the stored tail, plus the run's inputs). */
  messages: number;
  /** Estimated tokens of the stored tail alone (what a compaction can replace). */
  tailTokens: number;
}

export interface CompactionLimits {
  contextTokens: number;
  threshold: number;
  /** `agents.defaults.contextMessages`: the tail never grows past this many messages. */
  maxMessages: number;
}

export function keepTokens(contextTokens: number): number {
  return Math.floor(contextTokens * KEEP_SHARE);
}

export function summaryTokens(contextTokens: number): number {
  return Math.max(64, Math.min(SUMMARY_MAX_TOKENS, Math.floor(contextTokens * SUMMARY_SHARE)));
}

/**
 * Whether the context must be compacted before the next model call: it reached `threshold` of
 * the window (or the tail reached `maxMessages`), and the stored tail holds more than a
 * compaction would keep (otherwise a summary could not make it smaller, and compacting again
 * on every turn would only burn calls).
 */
export function needsCompaction(use: WindowUse, limits: CompactionLimits): boolean {
  const full = use.tokens >= limits.threshold * limits.contextTokens || use.messages >= limits.maxMessages;
  return full && (use.tailTokens > keepTokens(limits.contextTokens) || use.messages >= limits.maxMessages);
}

/** The smallest output limit a call is sent with. */
export const MIN_OUTPUT_TOKENS = 256;

/**
 * The output limit sent with a turn's calls: the model's own, cut so that the estimated prompt
 * (plus 10% for the estimate's error) and the output fit the window, since providers refuse a
 * call whose prompt and `max_tokens` exceed it; never below MIN_OUTPUT_TOKENS.
 */
export function outputBudget(
  maxOutputTokens: number | undefined,
  contextTokens: number,
  promptTokens: number,
): number | undefined {
  if (maxOutputTokens === undefined) return undefined;
  const room = contextTokens - Math.ceil(promptTokens * 1.1);
  return Math.max(MIN_OUTPUT_TOKENS, Math.min(maxOutputTokens, room));
}

export interface CompactionPlan<M extends Sized> {
  summarize: M[];
  keep: M[];
  /** The first message kept verbatim; undefined when the summary replaces everything. */
  firstKeptId: string | undefined;
}

/**
 * Splits the tail (oldest first) into what the summary replaces and what stays verbatim: the
 * newest messages within `keep` tokens and at most half of `maxMessages`, starting at a user
 * message so that no tool result loses its call. With nothing to replace under those rules, a
 * forced compaction (`/compact`) replaces everything.
 */
export function planCompaction<M extends Sized>(
  tail: readonly M[],
  keep: number,
  maxMessages: number,
  force: boolean,
): CompactionPlan<M> {
  let start = tail.length;
  let used = 0;
  const maxKept = Math.floor(maxMessages / 2);
  while (start > 0) {
    const m = tail[start - 1] as M;
    if (used + m.tokens > keep || tail.length - start + 1 > maxKept) break;
    used += m.tokens;
    start--;
  }
  while (start < tail.length && tail[start]?.role !== "user") start++;
  if (start === 0 && force) start = tail.length;
  return {
    summarize: tail.slice(0, start),
    keep: tail.slice(start),
    firstKeptId: tail[start]?.id,
  };
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}… [${text.length - max} more characters]` : text;
}

/**
 * The messages to summarize as one plain-text transcript, the earlier summary first. Oldest
 * lines are left out (and said to be) when it would pass `budgetTokens`.
 */
export function renderForSummary(
  messages: readonly TranscriptMessage[],
  previousSummary: string | undefined,
  budgetTokens: number,
): string {
  const lines: string[] = [];
  for (const m of messages) {
    if (m.role === "toolResult") {
      lines.push(
        `[tool result ${m.toolName ?? ""}${m.isError ? " (error)" : ""}] ${clip(textOf(m), TOOL_TEXT_CHARS)}`,
      );
      continue;
    }
    const text = textOf(m).trim();
    if (text) lines.push(`[${m.role}] ${text}`);
    for (const p of m.content) {
      if (p.type === "toolCall")
        lines.push(
          `[${m.role} calls ${p.name}] ${clip(JSON.stringify(p.arguments ?? null), TOOL_TEXT_CHARS)}`,
        );
    }
  }
  const head = previousSummary ? `Earlier summary:\n${previousSummary}\n\nMessages since:\n` : "Messages:\n";
  let budget = budgetTokens - estimateTokens(head);
  let from = lines.length;
  while (from > 0) {
    const cost = estimateTokens(lines[from - 1] as string) + 1;
    if (cost > budget) break;
    budget -= cost;
    from--;
  }
  const omitted = from > 0 ? [`[… ${from} earlier lines left out to fit the summarizer's window …]`] : [];
  return head + [...omitted, ...lines.slice(from)].join("\n");
}

export interface SummarizeInput {
  model: LanguageModel;
  previousSummary: string | undefined;
  messages: readonly TranscriptMessage[];
  /** `/compact <instructions>`. */
  instructions?: string | undefined;
  contextTokens: number;
  retry: RetryPolicy;
  signal: AbortSignal;
}

/** The summary of `messages` (and the earlier summary) by the session's model. */
export async function summarize(
  input: SummarizeInput,
): Promise<{ text: string; inputTokens: number; outputTokens: number }> {
  const maxOutputTokens = summaryTokens(input.contextTokens);
  const system = input.instructions
    ? `${COMPACTION_PROMPT}\n\nAdditional instructions from the user for this summary: ${input.instructions}`
    : COMPACTION_PROMPT;
  const budget = input.contextTokens - maxOutputTokens - estimateTokens(system) - 64;
  const prompt = renderForSummary(input.messages, input.previousSummary, Math.max(256, budget));
  let result: Awaited<ReturnType<typeof generateText>>;
  try {
    result = await withRetries(input.retry, input.signal, () =>
      generateText({
        model: input.model,
        system,
        messages: [{ role: "user", content: prompt }],
        maxOutputTokens,
        maxRetries: 0,
        abortSignal: input.signal,
      }),
    );
  } catch (error) {
    if (input.signal.aborted) throw input.signal.reason;
    throw new ProviderError(`summarization failed: ${describeProviderError(error)}`);
  }
  const text = clip(result.text.trim(), maxOutputTokens * 4);
  if (!text) throw new ProviderError("summarization failed: the model returned an empty summary");
  return {
    text,
    inputTokens: result.usage.inputTokens ?? 0,
    outputTokens: result.usage.outputTokens ?? 0,
  };
}
