/**
 * Compaction in a SessionActor (SPEC §5): the summary that replaces older context, made either
 * by a compaction run of its own (`/compact`, `sessions.compact`) or inside a turn, before its
 * first model call, when the context reached its threshold. An automatic compaction is
 * preceded by the silent memory-flush turn (when the agent's workspace is writable and
 * `compaction.memoryFlush` is on) and is recorded as a run of its own (trigger `compact`, id
 * `<turn runId>:compact`), so `runs.get` shows it.
 *
 * Every step is kept in the run's checkpoint: the flush turn resumes from its own checkpoint,
 * a summary once made is not made again, and the entry is applied exactly once. D1 keeps every
 * message: the compaction entry (summary + first kept seq) is appended, then the actor's
 * context copy is trimmed and `compactionCount` incremented in one synchronous step. A failed
 * summary changes nothing and says why.
 */
import type { LanguageModel } from "ai";
import {
  type CompactionPlan,
  keepTokens,
  MEMORY_FLUSH_PROMPT,
  planCompaction,
  summarize,
  type WindowUse,
} from "../../agent/compaction";
import { ProviderError, runAgentLoop } from "../../agent/loop";
import type { RetryPolicy } from "../../agent/retry";
import { toolDefinitionTokens } from "../../agent/tool-calls";
import type { AgentTool, ToolContext } from "../../tools/types";
import type { TranscriptMessage } from "../../transcript/message";
import { estimateMessageTokens, estimateTokens } from "../../transcript/tokens";
import type { ActorRecords } from "../d1/records";
import type { CompactionProgress } from "../storage/documents";
import type { ActorStore } from "../storage/store";
import type { ContextStore, TurnContext } from "./copy";

/** What compaction and the memory-flush turn use of the actor. */
export interface CompactionHost {
  readonly store: Pick<ActorStore, "entry" | "saveEntry">;
  readonly context: Pick<ContextStore, "compacted" | "load">;
  readonly records: Pick<ActorRecords, "messagesAppended" | "runStarted" | "runsEnded">;
}

/** The memory tools a flush turn may use (whichever of them the session is allowed). */
const FLUSH_TOOLS = new Set(["memory_write", "memory_read"]);
const FLUSH_MAX_STEPS = 4;

export interface CompactionSetup {
  sessionId: string;
  model: LanguageModel;
  contextTokens: number;
  maxMessages: number;
  retry: RetryPolicy;
  signal: AbortSignal;
  /** `/compact <instructions>`. */
  instructions?: string | undefined;
  /** Replace everything when the keep rules leave nothing to summarize (`/compact`). */
  force: boolean;
  /** Inside a turn: the turn's run id (its inputs are never summarized) and its first input. */
  turn?: { runId: string; firstInputId: string | undefined };
  /** The silent memory-flush turn to run first, if any. */
  flush?: {
    system: string;
    tools: AgentTool[];
    modelRef: string;
    keepToolResults: number;
    toolContext: Omit<ToolContext, "toolCallId">;
  };
  save(): void;
}

export interface CompactionResult {
  summarized: number;
  kept: number;
  tokensBefore: number;
  tokensAfter: number;
}

/** The tools of a flush turn: the memory tools among the session's own. */
export function flushTools(tools: readonly AgentTool[]): AgentTool[] {
  return tools.filter((t) => FLUSH_TOOLS.has(t.name));
}

async function flushTurn(a: CompactionHost, p: CompactionProgress, s: CompactionSetup): Promise<void> {
  const flush = s.flush;
  if (!flush || p.flushed) return;
  const ctx = a.context.load(s.sessionId, s.turn?.runId);
  // Every message of the flush turn carries FLUSH_ID_MARK (`:flush:`) in its id.
  const loopRunId = `${p.runId}:flush`;
  const reminder: TranscriptMessage = {
    id: `${loopRunId}:u0`,
    role: "user",
    content: [{ type: "text", text: MEMORY_FLUSH_PROMPT }],
    timestamp: p.startedAt,
    runId: p.runId,
    provenance: { kind: "internal_system" },
  };
  if (!p.flush) {
    await a.records.messagesAppended(s.sessionId, [reminder]);
    p.flush = { step: 0, produced: [], inputTokens: 0, outputTokens: 0, lastCallTokens: 0 };
    s.save();
  }
  try {
    await runAgentLoop({
      runId: loopRunId,
      model: s.model,
      modelRef: flush.modelRef,
      system: flush.system,
      history: [...ctx.messages, reminder],
      tools: flush.tools,
      maxSteps: FLUSH_MAX_STEPS,
      keepToolResults: flush.keepToolResults,
      retry: s.retry,
      signal: s.signal,
      checkpoint: p.flush,
      toolContext: flush.toolContext,
      persist: async (cp, appended) => {
        p.flush = cp;
        s.save();
        // Recorded under the compaction's own run (the loop's id only marks the messages' ids).
        await a.records.messagesAppended(
          s.sessionId,
          appended.map((m) => ({ ...m, runId: p.runId })),
        );
      },
    });
  } catch (error) {
    // The flush is best effort: a model that fails it still gets its context compacted.
    if (s.signal.aborted) throw s.signal.reason;
    console.warn(`memory flush before compaction failed: ${error instanceof Error ? error.message : error}`);
  }
  p.flushed = true;
  s.save();
}

/**
 * Compacts the session's context (see the module header). Returns undefined when there was
 * nothing to summarize. Throws ProviderError when the summary cannot be made; the context is
 * then as it was.
 */
export async function compactContext(
  a: CompactionHost,
  p: CompactionProgress,
  s: CompactionSetup,
): Promise<CompactionResult | undefined> {
  const before = a.context.load(s.sessionId, s.turn?.runId);
  if (!p.summary && !p.nothing) {
    await flushTurn(a, p, s);
    const plan: CompactionPlan<(typeof before.messages)[number]> = planCompaction(
      before.messages,
      keepTokens(s.contextTokens),
      s.maxMessages,
      s.force,
    );
    if (plan.summarize.length === 0) {
      p.nothing = true;
      s.save();
      return undefined;
    }
    const made = await summarize({
      model: s.model,
      previousSummary: before.summary?.text,
      messages: plan.summarize,
      instructions: s.instructions,
      contextTokens: s.contextTokens,
      retry: s.retry,
      signal: s.signal,
    });
    const firstKeptId = plan.firstKeptId ?? s.turn?.firstInputId;
    p.summary = {
      text: made.text,
      ...(firstKeptId ? { firstKeptId } : {}),
      summarized: plan.summarize.length,
      kept: plan.keep.length,
      tokensBefore: before.tokens,
      inputTokens: made.inputTokens,
      outputTokens: made.outputTokens,
    };
    s.save();
  }
  const summary = p.summary;
  if (!summary) return undefined;
  if (!p.applied) {
    const entryMessage: TranscriptMessage = {
      id: `${p.runId}:compaction`,
      role: "system",
      content: [{ type: "text", text: summary.text }],
      timestamp: Date.now(),
      runId: p.runId,
      provenance: { kind: "internal_system" },
      compaction: summary.firstKeptId ? { firstKeptId: summary.firstKeptId } : {},
    };
    await a.records.messagesAppended(s.sessionId, [entryMessage]);
    // One synchronous step: the copy trimmed, the count incremented, the step recorded.
    a.context.compacted(s.sessionId, summary.text, summary.firstKeptId);
    const entry = a.store.entry();
    if (entry && entry.sessionId === s.sessionId) {
      a.store.saveEntry({ ...entry, compactionCount: entry.compactionCount + 1 });
    }
    p.applied = true;
    s.save();
  }
  return {
    summarized: summary.summarized,
    kept: summary.kept,
    tokensBefore: summary.tokensBefore,
    tokensAfter: a.context.load(s.sessionId, s.turn?.runId).tokens,
  };
}

/** The estimated size of a turn's next model call, and of what a compaction could replace. */
export function windowUse(
  system: string,
  tools: readonly AgentTool[],
  context: TurnContext,
  inputs: readonly TranscriptMessage[],
): WindowUse {
  let tokens = estimateTokens(system) + context.tokens;
  for (const t of tools) tokens += toolDefinitionTokens(t);
  for (const m of inputs) tokens += estimateMessageTokens(m);
  const tailTokens = context.messages.reduce((n, m) => n + m.tokens, 0);
  return { tokens, messages: context.messages.length + inputs.length, tailTokens };
}

/**
 * An automatic compaction inside a turn, recorded as a run of its own (trigger `compact`). A
 * summary the model cannot make is recorded as that run's error and the turn goes on with the
 * context as it was; other failures propagate (the alarm retries the turn, which resumes here).
 */
export async function compactBeforeTurn(
  a: CompactionHost,
  p: CompactionProgress,
  sessionKey: string,
  s: CompactionSetup,
): Promise<void> {
  if (p.ended) return;
  if (!p.recorded) {
    await a.records.runStarted({
      run: {
        runId: p.runId,
        sessionKey,
        sessionId: s.sessionId,
        trigger: "compact",
        status: "running",
        createdAt: p.startedAt,
        startedAt: p.startedAt,
        deliver: false,
        idempotencyKey: null,
      },
      messages: [],
    });
    p.recorded = true;
    s.save();
  }
  let end: { status: "ok" | "error"; error: string | null; reply: string | null };
  try {
    const done = await compactContext(a, p, s);
    end = { status: "ok", error: null, reply: compactionNotice(done) };
  } catch (error) {
    if (s.signal.aborted || !(error instanceof ProviderError)) throw error;
    end = { status: "error", error: error.message, reply: null };
  }
  const usage = p.summary
    ? {
        inputTokens: p.summary.inputTokens,
        outputTokens: p.summary.outputTokens,
        totalTokens: p.summary.inputTokens + p.summary.outputTokens,
      }
    : null;
  await a.records.runsEnded([
    {
      runId: p.runId,
      sessionKey,
      sessionId: s.sessionId,
      trigger: "compact",
      createdAt: p.startedAt,
      deliver: false,
      idempotencyKey: null,
      ...end,
      startedAt: p.startedAt,
      endedAt: Date.now(),
      usage,
    },
  ]);
  p.ended = true;
  s.save();
}

/** The notice a compaction run posts when it is done. */
export function compactionNotice(result: CompactionResult | undefined): string {
  if (!result) return "Nothing to compact yet.";
  const { summarized, kept, tokensBefore, tokensAfter } = result;
  return `Compacted: ${summarized} message${summarized === 1 ? "" : "s"} summarized, ${kept} kept (context ~${tokensBefore} → ~${tokensAfter} tokens).`;
}
