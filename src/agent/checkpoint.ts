/**
 * What an agent run has produced so far, as its checkpoint holds it (agent/loop.ts writes it,
 * the session's run lifecycle keeps it durable): the messages, the tokens and cost of its model
 * calls, the reasoning kept for its tool calls, and the spans of its timeline (SPEC §21); and
 * what a run's end reads of it: its usage and its timeline. Pure.
 */
import type { AssistantModelMessage, LanguageModelUsage } from "ai";
import type { TimelineSpan, TranscriptMessage, Usage } from "../transcript/message";
import type { CallTokens } from "./pricing";

export type ReasoningPart = Extract<
  Exclude<AssistantModelMessage["content"], string>[number],
  { type: "reasoning" }
>;

export interface RunCheckpoint {
  /** Model steps completed. */
  step: number;
  /** Messages this run produced (assistant and tool results), in order. */
  produced: TranscriptMessage[];
  inputTokens: number;
  outputTokens: number;
  /** Prompt + completion tokens of the latest model call. */
  lastCallTokens: number;
  /** Of the input, read from and written to the prompt cache (absent in earlier checkpoints: 0). */
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  /** Model calls made, those of a model without a price, and the priced ones' cost in US dollars. */
  modelCalls?: number;
  unpricedCalls?: number;
  costUsd?: number;
  /** Reasoning returned with tool calls, by the id of the first call of its step. */
  reasoning?: Record<string, ReasoningPart[]>;
  /**
   * The spans of model calls that produced no message (failed, aborted, refused: SPEC §21 run
   * timeline). The others ride on the message they produced (`TranscriptMessage.span`), stored
   * with its step, so the checkpoint stays small however many steps a run takes.
   */
  timeline?: TimelineSpan[];
}

/** A run's timeline keeps this many spans: a bounded row, and more than `maxSteps` allows in practice. */
export const MAX_TIMELINE_SPANS = 200;

/** The span of a model call that produced no message, kept in the checkpoint. */
export function spanWithoutMessage(cp: RunCheckpoint, span: TimelineSpan): void {
  cp.timeline = [...(cp.timeline ?? []), span];
}

/** The run's spans so far, in start order: those on its messages and those of calls that made none. */
export function runTimelineOf(cp: RunCheckpoint): TimelineSpan[] {
  const spans = [...cp.produced.flatMap((m) => (m.span ? [m.span] : [])), ...(cp.timeline ?? [])];
  return spans.sort((a, b) => a.startedAt - b.startedAt).slice(0, MAX_TIMELINE_SPANS);
}

/** A model call as it ended, for an observer (the Analytics Engine's data points, SPEC §21). */
export interface ModelCallReport {
  model: string;
  startedAt: number;
  ms: number;
  outcome: "ok" | "error" | "aborted";
  tokens: CallTokens;
  /** US dollars; null when the model has no price. */
  costUsd: number | null;
}

/** A call's tokens as the AI SDK reports them; a provider that reports none counts 0. */
export function callTokens(usage: LanguageModelUsage): CallTokens {
  return {
    inputTokens: usage.inputTokens ?? 0,
    outputTokens: usage.outputTokens ?? 0,
    cacheReadTokens: usage.inputTokenDetails?.cacheReadTokens ?? 0,
    cacheWriteTokens: usage.inputTokenDetails?.cacheWriteTokens ?? 0,
  };
}

/**
 * A run's usage from its checkpoint (SPEC §21): tokens, model calls, and the cost of the priced
 * calls; null when it made calls and none had a price.
 */
export function runUsage(cp: RunCheckpoint): Usage {
  const calls = cp.modelCalls ?? 0;
  const unpriced = cp.unpricedCalls ?? 0;
  return {
    inputTokens: cp.inputTokens,
    outputTokens: cp.outputTokens,
    // SPEC §17: totalTokens is the last model call's prompt + completion (the context size).
    totalTokens: cp.lastCallTokens,
    cacheReadTokens: cp.cacheReadTokens ?? 0,
    cacheWriteTokens: cp.cacheWriteTokens ?? 0,
    modelCalls: calls,
    unpricedCalls: unpriced,
    costUsd: calls > 0 && unpriced === calls ? null : (cp.costUsd ?? 0),
  };
}

export function emptyCheckpoint(): RunCheckpoint {
  return { step: 0, produced: [], inputTokens: 0, outputTokens: 0, lastCallTokens: 0 };
}

/** No tokens: a model call that failed. */
export const NO_TOKENS: CallTokens = {
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
};
