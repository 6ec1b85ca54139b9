/**
 * The agent loop: model steps and tool calls until the model stops or `maxSteps` is reached.
 *
 * The loop is resumable. Everything a run has produced so far lives in a checkpoint, and the
 * caller persists the checkpoint before the produced message is appended to the transcript.
 * Given the same checkpoint (its shape, and what a run's end reads of it: agent/checkpoint.ts)
 * the loop continues where it stopped: pending tool calls are run, then the next model step. A
 * model step cut off mid-call is simply made again.
 *
 * Reasoning a model returned alongside tool calls (Anthropic's signed thinking blocks) is kept
 * in the checkpoint and sent back with those calls on the run's next steps, as providers that
 * think require; it never enters the transcript.
 */
import type { SharedV4ProviderOptions } from "@ai-sdk/provider";
import { generateText, type LanguageModel, type ModelMessage } from "ai";
import type { AgentTool, ToolContext } from "../tools/types";
import {
  boundedArguments,
  boundedText,
  type ContentPart,
  type TranscriptMessage,
  textOf,
} from "../transcript/message";
import {
  callTokens,
  type ModelCallReport,
  NO_TOKENS,
  type ReasoningPart,
  type RunCheckpoint,
  spanWithoutMessage,
} from "./checkpoint";
import { type MediaInputs, toModelMessages } from "./context";
import { type CallTokens, costOf, type Price } from "./pricing";
import { describeProviderError, type RetryPolicy, withRetries } from "./retry";
import { streamingModel } from "./streamed-call";
import { runTool, toolSet, turnEndedByTool } from "./tool-calls";

export interface AgentLoopInput {
  runId: string;
  model: LanguageModel;
  modelRef: string;
  /** The model's price (agent/pricing.ts); undefined: its calls cost null. */
  price?: Price | undefined;
  /** Asked before every model call with the checkpoint so far: a reason refuses the call. */
  beforeCall?: ((checkpoint: RunCheckpoint) => string | undefined) | undefined;
  /** Told of every model call made, as it ends (never throws into the loop). */
  onModelCall?: ((call: ModelCallReport) => void) | undefined;
  system: string;
  /** Prior transcript plus this run's input messages. */
  history: TranscriptMessage[];
  /** The files of this run's inputs as the model takes them (images it sees, text files inline). */
  media?: MediaInputs | undefined;
  tools: AgentTool[];
  maxSteps: number;
  /** The model's per-call output limit, when the catalog knows it. */
  maxOutputTokens?: number;
  /** Provider-specific call options (thinking levels, see `thinking.ts`). */
  providerOptions?: SharedV4ProviderOptions;
  keepToolResults: number;
  retry: RetryPolicy;
  signal: AbortSignal;
  checkpoint: RunCheckpoint;
  toolContext: Omit<ToolContext, "toolCallId">;
  /** Persist the checkpoint (durably) and append the new messages to the transcript. */
  persist(checkpoint: RunCheckpoint, appended: TranscriptMessage[]): Promise<void>;
  /**
   * Messages steering the run (SPEC §20): `waiting` says whether some arrived, `take` hands them
   * over as user messages and forgets them; the loop checkpoints them in the same synchronous
   * step (`persist`'s first part), so each is taken once.
   */
  steering?: { waiting(): boolean; take(): TranscriptMessage[] };
  /**
   * Told the text of the model call under way as it grows (SPEC §22 streaming): given, each call
   * is streamed from the provider. What is stored and how a call is retried are the same either way.
   */
  onText?: ((text: string) => void) | undefined;
  /** Told before each model call and each tool call starts (a `progress` preview shows it). */
  onActivity?: ((activity: { tool?: string }) => void) | undefined;
}

/** The result a tool call gets when a steering message arrived before it started (SPEC §20). */
export const SKIPPED_FOR_STEER = "Skipped to process an incoming message.";

export interface AgentLoopResult {
  reply: string;
  checkpoint: RunCheckpoint;
  /** True when the loop ended because maxSteps was reached with tool calls still wanted. */
  stepLimitReached: boolean;
}

export class ProviderError extends Error {}

/** A model call `beforeCall` refused (SPEC §21 budgets): the turn ends without making it. */
export class CallRefused extends Error {}

/** The unanswered calls of the latest assistant message, and when the model made them. */
function pendingToolCalls(produced: TranscriptMessage[]): {
  calls: Array<Extract<ContentPart, { type: "toolCall" }>>;
  calledAt: number;
} {
  const last = [...produced].reverse().find((m) => m.role === "assistant");
  if (!last) return { calls: [], calledAt: 0 };
  const done = new Set(produced.filter((m) => m.role === "toolResult").map((m) => m.toolCallId));
  const calls = last.content.filter(
    (p): p is Extract<ContentPart, { type: "toolCall" }> => p.type === "toolCall" && !done.has(p.id),
  );
  return { calls, calledAt: last.timestamp };
}

/** Puts each step's kept reasoning back in front of the assistant message holding its calls. */
function withReasoning(messages: ModelMessage[], reasoning: RunCheckpoint["reasoning"]): ModelMessage[] {
  if (!reasoning) return messages;
  return messages.map((m) => {
    if (m.role !== "assistant" || typeof m.content === "string") return m;
    const firstCall = m.content.find((p) => p.type === "tool-call");
    const kept =
      firstCall && Object.hasOwn(reasoning, firstCall.toolCallId)
        ? reasoning[firstCall.toolCallId]
        : undefined;
    return kept ? { ...m, content: [...kept, ...m.content] } : m;
  });
}

/** A model call ended: its span in the checkpoint, and the observer told. */
function modelCallEnded(
  input: AgentLoopInput,
  cp: RunCheckpoint,
  startedAt: number,
  outcome: ModelCallReport["outcome"],
  tokens: CallTokens,
  costUsd: number | null,
): void {
  const ms = Date.now() - startedAt;
  // A call that produced a message: its span goes on that message (below).
  if (outcome !== "ok")
    spanWithoutMessage(cp, { phase: "model", name: input.modelRef, startedAt, ms, outcome });
  try {
    input.onModelCall?.({ model: input.modelRef, startedAt, ms, outcome, tokens, costUsd });
  } catch (error) {
    console.error("model call observer threw:", error);
  }
}

/** What one model call gives the loop, from a plain or a streaming call alike. */
type ModelStep = Pick<Awaited<ReturnType<typeof generateText>>, "text" | "toolCalls" | "usage" | "response">;

/**
 * One model call: `generateText`; with `onText`, of the model streamed from the provider
 * (streamed-call.ts), its text handed on as it grows and its result the same.
 */
function callModel(input: AgentLoopInput, options: Parameters<typeof generateText>[0]): Promise<ModelStep> {
  const onText = input.onText;
  return generateText(onText ? { ...options, model: streamingModel(options.model, onText) } : options);
}

export async function runAgentLoop(input: AgentLoopInput): Promise<AgentLoopResult> {
  const cp = input.checkpoint;
  const tools = toolSet(input.tools);
  for (;;) {
    input.signal.throwIfAborted();
    const pending = pendingToolCalls(cp.produced);
    if (pending.calls.length > 0) {
      for (const call of pending.calls) {
        input.signal.throwIfAborted();
        // A steering message arrived: the calls not started yet give way to it.
        const skipped = input.steering?.waiting() ?? false;
        if (!skipped) input.onActivity?.({ tool: call.name });
        const startedAt = Date.now();
        const result = skipped
          ? { text: SKIPPED_FOR_STEER, isError: false }
          : await runTool(call, pending.calledAt, input.tools, input.toolContext);
        const message: TranscriptMessage = {
          span: {
            phase: "tool",
            name: call.name,
            startedAt,
            ms: Date.now() - startedAt,
            outcome: skipped ? "skipped" : result.isError ? "error" : "ok",
          },
          id: `${input.runId}:s${cp.step}:t:${call.id}`,
          role: "toolResult",
          content: [{ type: "text", text: boundedText(result.text) }],
          toolCallId: call.id,
          toolName: call.name,
          isError: result.isError,
          timestamp: Date.now(),
          runId: input.runId,
        };
        cp.produced.push(message);
        await input.persist(cp, [message]);
      }
      continue;
    }
    const ended = turnEndedByTool(cp.produced, input.tools);
    if (ended) return { reply: ended.reply, checkpoint: cp, stepLimitReached: false };
    const lastProduced = cp.produced[cp.produced.length - 1];
    const finished = lastProduced?.role === "assistant";
    // Before the next model step, the messages steering the run join it, in arrival order.
    const steered = finished || cp.step >= input.maxSteps ? [] : (input.steering?.take() ?? []);
    if (steered.length > 0) {
      cp.produced.push(...steered);
      await input.persist(cp, steered);
      continue;
    }
    if (finished || cp.step >= input.maxSteps) {
      const lastAssistant = [...cp.produced].reverse().find((m) => m.role === "assistant");
      return {
        reply: lastAssistant ? textOf(lastAssistant).trim() : "",
        checkpoint: cp,
        stepLimitReached: !finished,
      };
    }

    // A call that may not be made (a budget reached) ends the turn before it is made.
    const callStartedAt = Date.now();
    const refused = input.beforeCall?.(cp);
    if (refused) {
      spanWithoutMessage(cp, {
        phase: "model",
        name: input.modelRef,
        startedAt: callStartedAt,
        ms: 0,
        outcome: "refused",
      });
      throw new CallRefused(refused);
    }
    input.onActivity?.({});
    const messages = withReasoning(
      toModelMessages([...input.history, ...cp.produced], input.keepToolResults, input.media),
      cp.reasoning,
    );
    let result: ModelStep;
    try {
      result = await withRetries(input.retry, input.signal, () =>
        callModel(input, {
          model: input.model,
          system: input.system,
          messages,
          tools: input.tools.length ? tools : undefined,
          maxOutputTokens: input.maxOutputTokens,
          providerOptions: input.providerOptions,
          maxRetries: 0,
          abortSignal: input.signal,
        }),
      );
    } catch (error) {
      const outcome = input.signal.aborted ? "aborted" : "error";
      modelCallEnded(input, cp, callStartedAt, outcome, NO_TOKENS, null);
      if (input.signal.aborted) throw input.signal.reason;
      throw new ProviderError(describeProviderError(error));
    }
    const content: ContentPart[] = [];
    if (result.text) content.push({ type: "text", text: boundedText(result.text) });
    for (const call of result.toolCalls) {
      content.push({
        type: "toolCall",
        id: call.toolCallId,
        name: call.toolName,
        arguments: boundedArguments(call.input),
      });
    }
    const firstCall = result.toolCalls[0];
    if (firstCall) {
      const reasoning = result.response.messages
        .flatMap((m) => (m.role === "assistant" && typeof m.content !== "string" ? m.content : []))
        .filter((p): p is ReasoningPart => p.type === "reasoning");
      if (reasoning.length > 0) cp.reasoning = { ...cp.reasoning, [firstCall.toolCallId]: reasoning };
    }
    const tokens = callTokens(result.usage);
    const inTokens = tokens.inputTokens;
    const outTokens = tokens.outputTokens;
    const cost = costOf(tokens, input.price);
    modelCallEnded(input, cp, callStartedAt, "ok", tokens, cost);
    const message: TranscriptMessage = {
      span: {
        phase: "model",
        name: input.modelRef,
        startedAt: callStartedAt,
        ms: Date.now() - callStartedAt,
        outcome: "ok",
      },
      id: `${input.runId}:s${cp.step}:a`,
      role: "assistant",
      content,
      timestamp: Date.now(),
      runId: input.runId,
      model: input.modelRef,
      usage: { inputTokens: inTokens, outputTokens: outTokens, totalTokens: inTokens + outTokens },
    };
    cp.step++;
    cp.inputTokens += inTokens;
    cp.outputTokens += outTokens;
    cp.lastCallTokens = inTokens + outTokens;
    cp.cacheReadTokens = (cp.cacheReadTokens ?? 0) + tokens.cacheReadTokens;
    cp.cacheWriteTokens = (cp.cacheWriteTokens ?? 0) + tokens.cacheWriteTokens;
    cp.modelCalls = (cp.modelCalls ?? 0) + 1;
    if (cost === null) cp.unpricedCalls = (cp.unpricedCalls ?? 0) + 1;
    else cp.costUsd = (cp.costUsd ?? 0) + cost;
    cp.produced.push(message);
    await input.persist(cp, [message]);
  }
}
