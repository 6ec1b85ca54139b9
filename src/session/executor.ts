/**
 * Executes the head of a SessionActor's queue: starts (or resumes) the run, runs the agent loop
 * with the session's model, tools, history and system prompt, checkpoints every step, accounts
 * its tokens on the entry, and hands the outcome to `finalizeRun`. A run's abort controller
 * lives in the actor's live state so `/stop`, `abort` and the run timeout reach it.
 */
import { needsCompaction, outputBudget } from "../agent/compaction";
import { type AgentLoopResult, emptyCheckpoint, ProviderError, runAgentLoop } from "../agent/loop";
import { languageModelFor, ModelRefError, resolveModelRef } from "../agent/models";
import { providerOptionsFor } from "../agent/thinking";
import type { DeliveryContext, SessionRow } from "../db/queries";
import { showActivity } from "../delivery/deliver";
import type { RunOutcome, RunStatus } from "../runs/types";
import { toolsForSession } from "../tools/registry";
import type { ToolContext } from "../tools/types";
import type { ContentPart, TranscriptMessage } from "../transcript/message";
import type { ActorContext } from "./actor-context";
import { inputMessages } from "./admission";
import { actorSessions } from "./client";
import { compactBeforeTurn, compactContext, compactionNotice, flushTools, windowUse } from "./compactor";
import { finalizeRun } from "./finalize";
import { postNow, toolNotice } from "./outbound";
import {
  MAX_RUN_ATTEMPTS,
  MAX_RUN_STARTS,
  type QueuedRun,
  type QueueRow,
  RUN_RETRY_DELAYS_MS,
  type RunProgress,
  specOf,
} from "./run-queue";
import { buildSystemPrompt } from "./system-prompt";

class AbortRun extends Error {
  constructor(readonly kind: "aborted" | "timeout") {
    super(kind === "timeout" ? "run timed out" : "run aborted");
  }
}

/** Aborts the run executing now, if any; true when there was one. */
export function abortCurrent(a: ActorContext): boolean {
  if (!a.live.current) return false;
  a.live.current.controller.abort(new AbortRun("aborted"));
  return true;
}

function hasToolCall(m: TranscriptMessage): boolean {
  return m.content.some((p) => p.type === "toolCall");
}

/**
 * The run's usage on the entry, in the same synchronous step that records the outcome, so a
 * finalization repeated after a restart never counts tokens twice.
 */
function accountRun(
  entry: SessionRow,
  progress: RunProgress,
  outcome: RunOutcome,
  morePending: boolean,
): SessionRow {
  return {
    ...entry,
    inputTokens: entry.inputTokens + progress.loop.inputTokens,
    outputTokens: entry.outputTokens + progress.loop.outputTokens,
    // SPEC §17: totalTokens is the last model call's prompt + completion (the context size).
    totalTokens: progress.loop.lastCallTokens || entry.totalTokens,
    abortedLastRun: outcome.status === "aborted" || outcome.status === "timeout",
    systemSent: true,
    runStatus: morePending ? "queued" : "idle",
  };
}

/**
 * Executes the queue head once, counted: a failed attempt is retried after a backoff, and a
 * run whose attempts are spent (or whose stored state can no longer be read) ends `error`
 * with its cause, so the queue moves on (SPEC §5: no run can wedge a session).
 */
export async function attemptHead(a: ActorContext, row: QueueRow): Promise<void> {
  const starts = a.queue.beginAttempt(row);
  if (starts > MAX_RUN_STARTS) {
    const last = row.last_error ? `; last error: ${row.last_error}` : "";
    return giveUp(
      a,
      row,
      `run stopped ${MAX_RUN_STARTS} times in a row before its next step (its process ended each time)${last}`,
    );
  }
  try {
    await executeHead(a, row);
  } catch (error) {
    const cause = causeOf(error);
    const failures = (row.attempts ?? 0) + 1;
    console.error(`run ${row.run_id}: attempt ${failures} of ${MAX_RUN_ATTEMPTS} failed: ${cause}`);
    if (failures >= MAX_RUN_ATTEMPTS) {
      return giveUp(a, row, `run failed after ${MAX_RUN_ATTEMPTS} attempts: ${cause}`);
    }
    const delay = RUN_RETRY_DELAYS_MS[failures - 1] ?? RUN_RETRY_DELAYS_MS.at(-1) ?? 0;
    a.queue.attemptFailed(row, cause, Date.now() + delay);
  }
}

function causeOf(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.split("\n")[0]?.slice(0, 500) ?? "unknown error";
}

/**
 * Ends a run that cannot be executed: `error` with its cause, through the ordinary finalize
 * (the run's record, the chat's short notice, its waiters) when D1 takes it; when even that
 * fails, the run leaves the queue anyway with its outcome kept for waiters and the cause in
 * the logs, and its D1 row is ended if it can be.
 */
async function giveUp(a: ActorContext, row: QueueRow, error: string): Promise<void> {
  const now = Date.now();
  let spec: QueuedRun | undefined;
  let progress: RunProgress | undefined;
  try {
    spec = specOf(row);
    progress = a.queue.progress(row);
  } catch {
    // Unreadable: the run ends with what is known.
  }
  const startedAt = progress?.startedAt ?? spec?.prestarted?.startedAt;
  const outcome: RunOutcome = { runId: row.run_id, status: "error", endedAt: now, error };
  if (startedAt !== undefined) outcome.startedAt = startedAt;
  const entry = a.store.entry();
  if (entry && spec && entry.sessionId === spec.sessionId) {
    const waiting = a.queue.rows().some((r) => r.state === "queued" && r.pos !== row.pos);
    a.store.saveEntry({ ...entry, runStatus: waiting ? "queued" : "idle" });
  }
  if (spec) {
    const ending: RunProgress = progress ?? { startedAt: startedAt ?? now, loop: emptyCheckpoint() };
    ending.outcome ??= outcome;
    // Twice: with the messages the run produced, then without those not stored yet (one of
    // them may be what D1 refuses).
    for (const skipUnstored of [false, true]) {
      try {
        if (skipUnstored) ending.stored = ending.loop.produced.length;
        a.queue.saveProgress(row, ending);
        await finalizeRun(a, row, spec, ending, ending.outcome);
        return;
      } catch (finalizeError) {
        console.error(`run ${row.run_id}: could not be finalized: ${causeOf(finalizeError)}`);
      }
    }
  }
  a.queue.remove(row);
  a.store.recordFinished(outcome, now);
  a.waiters.notify(outcome);
  try {
    await a.records.runsEnded([row.run_id], { status: "error", endedAt: now, error });
  } catch (recordError) {
    console.error(
      `run ${row.run_id} ended (${error}); its D1 row could not be updated: ${causeOf(recordError)}`,
    );
  }
}

/** Runs (or resumes) the queue head through to its finalize. */
export async function executeHead(a: ActorContext, row: QueueRow): Promise<void> {
  const spec = specOf(row);
  const runId = row.run_id;
  const progress: RunProgress = a.queue.progress(row) ?? {
    startedAt: spec.prestarted?.startedAt ?? Date.now(),
    loop: emptyCheckpoint(),
  };
  if (!row.checkpoint) a.queue.start(row, progress);
  const save = () => a.queue.saveProgress(row, progress);

  if (!progress.outcome) {
    progress.outcome = await runTurn(a, spec, runId, progress, save);
    const entry = a.store.entry();
    if (entry && entry.sessionId === spec.sessionId) {
      // The run is the head: whatever else the queue holds waits behind it.
      a.store.saveEntry(accountRun(entry, progress, progress.outcome, a.queue.othersWaiting()));
    }
    save();
  }
  await finalizeRun(a, row, spec, progress, progress.outcome);
}

/** Tool results as notices to the chat, when the session's `verboseLevel` asks for them. */
async function noticeToolActivity(
  a: ActorContext,
  spec: QueuedRun,
  runId: string,
  produced: readonly TranscriptMessage[],
  appended: readonly TranscriptMessage[],
): Promise<void> {
  const { req } = spec;
  const entry = a.store.entry();
  if (!req.deliver || req.flow || req.spawn || !entry?.verboseLevel || entry.verboseLevel === "off") return;
  const route = req.route ?? (entry.deliveryContext as DeliveryContext | null) ?? undefined;
  if (!route) return;
  for (const m of appended) {
    if (m.role !== "toolResult" || !m.toolCallId) continue;
    const call = produced
      .flatMap((p) => p.content)
      .find(
        (c): c is Extract<ContentPart, { type: "toolCall" }> =>
          c.type === "toolCall" && c.id === m.toolCallId,
      );
    const text = toolNotice(entry.verboseLevel, call, m);
    if (text)
      await postNow(
        a,
        `${runId}:tool:${m.toolCallId}`,
        { kind: "notice", text },
        route,
        entry,
        req.sessionKey,
      );
  }
}

/** What the tools of a run act as and with. */
function toolContextOf(a: ActorContext, spec: QueuedRun, runId: string): Omit<ToolContext, "toolCallId"> {
  const { req } = spec;
  return {
    caller: {
      sessionKey: req.sessionKey,
      agentId: req.init.agentId,
      entry: a.store.entry(),
      runId,
      trigger: req.trigger,
      ...(req.flow ? { flow: { flowId: req.flow.flowId, hop: req.flow.hop } } : {}),
    },
    sessions: actorSessions(a.env),
    config: a.config,
    env: a.env,
    onWait: (targetKey) => {
      const waitingOn = a.live.waitingOn;
      waitingOn.set(targetKey, (waitingOn.get(targetKey) ?? 0) + 1);
      return () => {
        const n = (waitingOn.get(targetKey) ?? 1) - 1;
        if (n > 0) waitingOn.set(targetKey, n);
        else waitingOn.delete(targetKey);
      };
    },
  };
}

async function runTurn(
  a: ActorContext,
  spec: QueuedRun,
  runId: string,
  progress: RunProgress,
  save: () => void,
): Promise<RunOutcome> {
  const { req } = spec;
  const config = a.config;
  const startedAt = progress.startedAt;
  const controller = new AbortController();
  a.live.current = { runId, controller };
  // The chat sees the agent at work while the run lasts, where its platform can show it.
  const stopActivity = req.deliver && req.route ? showActivity(req.route, config, a.env) : undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (req.timeoutSeconds && req.timeoutSeconds > 0) {
    const remaining = startedAt + req.timeoutSeconds * 1000 - Date.now();
    timer = setTimeout(() => controller.abort(new AbortRun("timeout")), Math.max(0, remaining));
  }
  try {
    const entry = a.store.entry();
    const agent = config.agents.list.find((ag) => ag.id === req.init.agentId);
    const inputs = inputMessages(runId, req.inputs);
    // One round trip: the run is marked running (created if the enqueue write was lost), the
    // entry shows it, and the inputs are appended. On a resumed run this also re-appends what
    // the checkpoint holds; appends are idempotent by id, so stored messages are skipped.
    // A run whose enqueue batch already did this (and that produced nothing yet) skips it.
    if (!spec.prestarted || progress.loop.produced.length > 0) {
      await a.records.runStarted({
        run: {
          runId,
          sessionKey: req.sessionKey,
          sessionId: spec.sessionId,
          trigger: req.trigger,
          status: "running",
          createdAt: startedAt,
          startedAt,
          deliver: req.deliver,
          idempotencyKey: req.idempotencyKey ?? null,
        },
        ...(entry ? { entry } : {}),
        messages: [...inputs, ...progress.loop.produced],
      });
      a.store.markHistory(spec.sessionId);
    }

    const modelRef = req.model ?? entry?.modelOverride ?? agent?.model ?? config.agents.defaults.model;
    const resolved = resolveModelRef(modelRef, config, agent);
    const model = languageModelFor(resolved, a.env as unknown as Record<string, unknown>);
    if (entry && (entry.model !== resolved.ref || entry.contextTokens !== resolved.contextWindow)) {
      a.store.saveEntry({ ...entry, model: resolved.ref, contextTokens: resolved.contextWindow });
    }
    const defaults = config.agents.defaults;
    // The turn is built from the actor's own copy of the context (the latest summary and the
    // messages after it); a transcript written before this actor held it is loaded once.
    if (!a.context.ready(spec.sessionId)) {
      a.context.hydrate(
        spec.sessionId,
        await a.records.turnContext(spec.sessionId, defaults.contextMessages),
      );
    }
    const tools = toolsForSession(req.sessionKey, agent, config);
    const toolContext = toolContextOf(a, spec, runId);
    const systemWith = (summary: string | undefined) =>
      buildSystemPrompt({
        base: agent?.systemPrompt ?? defaults.systemPrompt,
        req,
        timezone: config.session.timezone,
        ...(summary !== undefined ? { summary } : {}),
      });
    const compaction = {
      sessionId: spec.sessionId,
      model,
      contextTokens: resolved.contextWindow,
      maxMessages: defaults.contextMessages,
      retry: config.models.retry,
      signal: controller.signal,
      save,
    };
    if (req.compact) {
      progress.compaction ??= { runId, startedAt };
      const p = progress.compaction;
      const done = await compactContext(a, p, {
        ...compaction,
        force: true,
        instructions: req.compact.instructions,
      });
      return { runId, status: "ok", startedAt, endedAt: Date.now(), reply: compactionNotice(done) };
    }

    let context = a.context.load(spec.sessionId, runId);
    if (progress.loop.produced.length === 0 && !progress.compaction?.ended) {
      const use = windowUse(systemWith(context.summary?.text), tools, context, inputs);
      const limits = {
        contextTokens: resolved.contextWindow,
        threshold: defaults.compaction.threshold,
        maxMessages: defaults.contextMessages,
      };
      if (progress.compaction || needsCompaction(use, limits)) {
        const memory = flushTools(tools);
        const flush =
          defaults.compaction.memoryFlush && agent?.workspace.writable !== false && memory.length > 0
            ? {
                system: systemWith(context.summary?.text),
                tools: memory,
                modelRef: resolved.ref,
                keepToolResults: defaults.contextPruning.keepToolResults,
                toolContext,
              }
            : undefined;
        progress.compaction ??= { runId: `${runId}:compact`, startedAt: Date.now() };
        save();
        await compactBeforeTurn(a, progress.compaction, req.sessionKey, {
          ...compaction,
          force: false,
          turn: { runId, firstInputId: inputs[0]?.id },
          ...(flush ? { flush } : {}),
        });
        context = a.context.load(spec.sessionId, runId);
      }
    }
    const system = systemWith(context.summary?.text);
    const promptTokens = windowUse(system, tools, context, inputs).tokens;
    const result: AgentLoopResult = await runAgentLoop({
      runId,
      model,
      modelRef: resolved.ref,
      system,
      history: [...context.messages, ...inputs],
      tools,
      maxSteps: defaults.maxSteps,
      maxOutputTokens: outputBudget(resolved.maxOutputTokens, resolved.contextWindow, promptTokens),
      providerOptions: providerOptionsFor(resolved, entry?.thinkingLevel).providerOptions,
      keepToolResults: defaults.contextPruning.keepToolResults,
      retry: config.models.retry,
      signal: controller.signal,
      checkpoint: progress.loop,
      toolContext,
      persist: async (cp, appended) => {
        progress.loop = cp;
        const final = appended.length === 1 && appended[0]?.role === "assistant" && !hasToolCall(appended[0]);
        // The final reply is checkpointed with the run's outcome (executeHead saves both before
        // any other I/O) and stored by the finalize batch, one round trip later.
        if (final) return;
        save();
        await a.records.messagesAppended(spec.sessionId, appended);
        progress.stored = cp.produced.length;
        save();
        await noticeToolActivity(a, spec, runId, cp.produced, appended);
      },
    });
    return { runId, status: "ok", startedAt, endedAt: Date.now(), reply: result.reply };
  } catch (error) {
    const endedAt = Date.now();
    if (controller.signal.aborted) {
      const reason = controller.signal.reason;
      const status: RunStatus =
        reason instanceof AbortRun && reason.kind === "timeout" ? "timeout" : "aborted";
      return {
        runId,
        status,
        startedAt,
        endedAt,
        error: status === "timeout" ? `run timed out after ${req.timeoutSeconds}s` : "run aborted",
      };
    }
    if (error instanceof ProviderError || error instanceof ModelRefError) {
      return { runId, status: "error", startedAt, endedAt, error: error.message };
    }
    // Infrastructure failures (D1 unavailable…) propagate: the alarm is retried and the run
    // resumes from its checkpoint instead of being recorded as failed.
    throw error;
  } finally {
    if (timer) clearTimeout(timer);
    stopActivity?.();
    a.live.current = undefined;
  }
}
