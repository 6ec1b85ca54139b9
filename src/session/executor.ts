/**
 * Executes the head of a SessionActor's queue: starts (or resumes) the run, runs the agent loop
 * with the session's model, tools, history and system prompt, checkpoints every step, accounts
 * its tokens on the entry, and hands the outcome to `finalizeRun`. A run's abort controller
 * lives in the actor's live state so `/stop`, `abort` and the run timeout reach it.
 */
import { type AgentLoopResult, emptyCheckpoint, ProviderError, runAgentLoop } from "../agent/loop";
import { languageModelFor, ModelRefError, resolveModelRef } from "../agent/models";
import { providerOptionsFor } from "../agent/thinking";
import type { SessionRow } from "../db/queries";
import type { RunOutcome, RunStatus } from "../runs/types";
import { toolsForSession } from "../tools/registry";
import type { TranscriptMessage } from "../transcript/message";
import type { ActorContext } from "./actor-context";
import { inputMessages } from "./admission";
import { actorSessions } from "./client";
import { finalizeRun } from "./finalize";
import { progressOf, type QueuedRun, type QueueRow, type RunProgress, specOf } from "./run-queue";
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

/** Runs (or resumes) the queue head through to its finalize. */
export async function executeHead(a: ActorContext, row: QueueRow): Promise<void> {
  const spec = specOf(row);
  const runId = row.run_id;
  const progress: RunProgress = progressOf(row) ?? {
    startedAt: spec.prestarted?.startedAt ?? Date.now(),
    loop: emptyCheckpoint(),
  };
  if (!row.checkpoint) a.queue.start(row.pos, progress);
  const save = () => a.queue.saveProgress(row.pos, progress);

  if (!progress.outcome) {
    progress.outcome = await runTurn(a, spec, runId, progress, save);
    const entry = a.store.entry();
    if (entry && entry.sessionId === spec.sessionId) {
      const waiting = a.queue.rows().some((r) => r.state === "queued");
      a.store.saveEntry(accountRun(entry, progress, progress.outcome, waiting));
    }
    save();
  }
  await finalizeRun(a, row, spec, progress, progress.outcome);
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
  const env = a.env;
  const startedAt = progress.startedAt;
  const controller = new AbortController();
  a.live.current = { runId, controller };
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (req.timeoutSeconds && req.timeoutSeconds > 0) {
    const remaining = startedAt + req.timeoutSeconds * 1000 - Date.now();
    timer = setTimeout(() => controller.abort(new AbortRun("timeout")), Math.max(0, remaining));
  }
  try {
    const entry = a.store.entry();
    const agent = config.agents.list.find((ag) => ag.id === req.init.agentId);
    const inputs = inputMessages(runId, req.inputs);
    const hadHistory = spec.prestarted?.hadHistory ?? a.store.hasHistory(spec.sessionId);
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
    const model = languageModelFor(resolved, env as unknown as Record<string, unknown>);
    if (entry && (entry.model !== resolved.ref || entry.contextTokens !== resolved.contextWindow)) {
      a.store.saveEntry({ ...entry, model: resolved.ref, contextTokens: resolved.contextWindow });
    }
    // A transcript this actor never wrote to before this run has nothing older to load.
    const history = hadHistory
      ? await a.records.recentContext(spec.sessionId, config.agents.defaults.contextMessages, runId)
      : [];
    const result: AgentLoopResult = await runAgentLoop({
      runId,
      model,
      modelRef: resolved.ref,
      system: buildSystemPrompt({
        base: agent?.systemPrompt ?? config.agents.defaults.systemPrompt,
        req,
        timezone: config.session.timezone,
      }),
      history: [...history, ...inputs],
      tools: toolsForSession(req.sessionKey, agent, config),
      maxSteps: config.agents.defaults.maxSteps,
      maxOutputTokens: resolved.maxOutputTokens,
      providerOptions: providerOptionsFor(resolved, entry?.thinkingLevel).providerOptions,
      keepToolResults: config.agents.defaults.contextPruning.keepToolResults,
      retry: config.models.retry,
      signal: controller.signal,
      checkpoint: progress.loop,
      toolContext: {
        caller: {
          sessionKey: req.sessionKey,
          agentId: req.init.agentId,
          entry: a.store.entry(),
          runId,
          trigger: req.trigger,
          ...(req.flow ? { flow: { flowId: req.flow.flowId, hop: req.flow.hop } } : {}),
        },
        sessions: actorSessions(env),
        config,
        env,
        onWait: (targetKey) => {
          const waitingOn = a.live.waitingOn;
          waitingOn.set(targetKey, (waitingOn.get(targetKey) ?? 0) + 1);
          return () => {
            const n = (waitingOn.get(targetKey) ?? 1) - 1;
            if (n > 0) waitingOn.set(targetKey, n);
            else waitingOn.delete(targetKey);
          };
        },
      },
      persist: async (cp, appended) => {
        progress.loop = cp;
        save();
        const final = appended.length === 1 && appended[0]?.role === "assistant" && !hasToolCall(appended[0]);
        if (final) return; // stored by the finalize batch, one round trip later
        await a.records.messagesAppended(spec.sessionId, appended);
        progress.stored = cp.produced.length;
        save();
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
    a.live.current = undefined;
  }
}
