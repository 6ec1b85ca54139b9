/**
 * A run's turn (the `started` → `ended` part of lifecycle.ts): the agent loop with the
 * session's model, tools, context and system prompt, compaction before it when the window is
 * full, each step handed to the lifecycle to make durable, and the tool notices the session's
 * `verboseLevel` asks for. A run's abort controller lives in the actor's live state so `/stop`,
 * `abort` and the run timeout reach it.
 */
import { needsCompaction, outputBudget } from "../../agent/compaction";
import { type AgentLoopResult, CallRefused, ProviderError, runAgentLoop } from "../../agent/loop";
import { languageModelFor, ModelRefError, resolveModelRef } from "../../agent/models";
import { priceOf } from "../../agent/pricing";
import { providerOptionsFor } from "../../agent/thinking";
import type { Config } from "../../config/schema";
import { showActivity } from "../../delivery/deliver";
import { previewPort } from "../../delivery/preview";
import type { RunOutcome, RunStatus } from "../../runs/types";
import { toolsForSession } from "../../tools/registry";
import type { ToolContext } from "../../tools/types";
import type { ContentPart, TranscriptMessage } from "../../transcript/message";
import type { PostHost } from "../chat/posts";
import { postNow, repliesToChat, toolNotice } from "../chat/posts";
import { actorSessions } from "../client";
import type { CompactionHost } from "../context/compaction";
import {
  compactBeforeTurn,
  compactContext,
  compactionNotice,
  flushTools,
  windowUse,
} from "../context/compaction";
import type { ContextStore } from "../context/copy";
import { buildSystemPrompt } from "../context/system-prompt";
import type { ActorRecords } from "../d1/records";
import type { ActorStore } from "../storage/store";
import { inputMessages } from "./admission";
import { usageEvents, usageSubject } from "./analytics";
import { budgetGate } from "./budget";
import { AbortRun, type LiveRun } from "./live";
import { mediaInputs } from "./media";
import { ReplyPreview } from "./preview";
import type { QueuedRun, RunProgress } from "./queue";

/**
 * What a run's turn uses of the actor: the session's entry and context copy, the records its
 * compaction writes, the outbox its tool notices go to (PostHost), its live state.
 */
export interface TurnHost extends CompactionHost, PostHost {
  readonly env: Env;
  readonly config: Config;
  readonly live: LiveRun;
  readonly store: Pick<ActorStore, "entry" | "saveEntry" | "steers" | "setSteers">;
  readonly context: Pick<ContextStore, "ready" | "hydrate" | "load" | "compacted">;
  readonly records: Pick<ActorRecords, "turnContext" | "messagesAppended" | "runStarted" | "runsEnded">;
}

function hasToolCall(m: TranscriptMessage): boolean {
  return m.content.some((p) => p.type === "toolCall");
}

/** Tool results as notices to the chat, when the session's `verboseLevel` asks for them. */
export async function noticeToolActivity(
  a: TurnHost,
  spec: QueuedRun,
  runId: string,
  produced: readonly TranscriptMessage[],
  appended: readonly TranscriptMessage[],
): Promise<void> {
  const { req } = spec;
  const entry = a.store.entry();
  if (!req.deliver || req.flow || req.spawn || !entry?.verboseLevel || entry.verboseLevel === "off") return;
  const route = req.route ?? entry.deliveryContext ?? undefined;
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
function toolContextOf(a: TurnHost, spec: QueuedRun, runId: string): Omit<ToolContext, "toolCallId"> {
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

/**
 * The messages steering run `runId` (admission.ts `steer`), as the loop takes them: user
 * messages in arrival order, ids from the requests that brought them (a repeat is the same
 * message). Taking forgets them in the same synchronous step in which the loop checkpoints them.
 */
function steeringOf(a: TurnHost, runId: string) {
  const held = () => {
    const s = a.store.steers();
    return s?.runId === runId ? s.items : [];
  };
  return {
    waiting: () => held().length > 0,
    take: (): TranscriptMessage[] => {
      const items = held();
      if (items.length === 0) return [];
      a.store.setSteers(undefined);
      return items.map((item) => ({
        id: `${runId}:steer:${item.id}`,
        role: "user" as const,
        content: [{ type: "text" as const, text: item.input.text }],
        timestamp: item.input.timestamp,
        runId,
        ...(item.input.provenance ? { provenance: item.input.provenance } : {}),
      }));
    },
  };
}

/** How the lifecycle makes a turn's progress durable. */
export interface TurnSteps {
  /** Saves the checkpoint (compaction's resume points). */
  save(): void;
  /** A model step or tool result was produced (it is in `progress.loop`): made durable, then stored. */
  stepped(appended: TranscriptMessage[]): Promise<void>;
}

/** Runs (or resumes) the turn to its outcome; infrastructure failures propagate (the attempt is retried). */
export async function runTurn(
  a: TurnHost,
  spec: QueuedRun,
  runId: string,
  progress: RunProgress,
  steps: TurnSteps,
): Promise<RunOutcome> {
  const save = steps.save;
  const { req } = spec;
  const config = a.config;
  const startedAt = progress.startedAt;
  const controller = new AbortController();
  a.live.current = { runId, controller };
  // The chat sees the agent at work while the run lasts, where its platform can show it.
  const stopActivity = req.deliver && req.route ? showActivity(req.route, config, a.env) : undefined;
  const preview = replyPreview(a, spec, runId, progress, save);
  let reply: string | undefined;
  // A run past its deadline (its start + `timeoutSeconds`, in its queue row) is ended by the
  // actor's alarm (scheduler.ts), or here when a resumed run finds it passed already.
  if (req.timeoutSeconds && req.timeoutSeconds > 0 && startedAt + req.timeoutSeconds * 1000 <= Date.now())
    controller.abort(new AbortRun("timeout"));
  try {
    const entry = a.store.entry();
    const agent = config.agents.list.find((ag) => ag.id === req.init.agentId);
    const runInputs = progress.inputs ?? req.inputs;
    const inputs = inputMessages(runId, runInputs);
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
        ...(progress.notes ? { notes: progress.notes } : {}),
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
    const events = usageEvents(a.env, config);
    const promptTokens = windowUse(system, tools, context, inputs).tokens;
    const result: AgentLoopResult = await runAgentLoop({
      runId,
      model,
      modelRef: resolved.ref,
      price: priceOf(resolved.ref, resolved.spec.api, resolved.modelId, config.models.pricing),
      beforeCall: await budgetGate(a, req, req.init.agentId, agent?.budget ?? defaults.budget),
      onModelCall: (call) => events.modelCall(usageSubject(entry, req.init.agentId), call),
      system,
      history: [...context.messages, ...inputs],
      media: await mediaInputs(a, runInputs, resolved.vision),
      tools,
      maxSteps: defaults.maxSteps,
      maxOutputTokens: outputBudget(resolved.maxOutputTokens, resolved.contextWindow, promptTokens),
      providerOptions: providerOptionsFor(resolved, entry?.thinkingLevel).providerOptions,
      keepToolResults: defaults.contextPruning.keepToolResults,
      retry: config.models.retry,
      signal: controller.signal,
      checkpoint: progress.loop,
      toolContext,
      steering: steeringOf(a, runId),
      onText: preview && ((text) => preview.text(text)),
      onActivity: preview && ((act) => preview.progress(act.tool ? `Using ${act.tool}…` : "Thinking…")),
      persist: async (cp, appended) => {
        progress.loop = cp;
        const final = appended.length === 1 && appended[0]?.role === "assistant" && !hasToolCall(appended[0]);
        // The final reply is checkpointed with the run's outcome (the lifecycle saves both
        // before any other I/O) and stored by the finalize batch, one round trip later.
        if (final) return;
        await steps.stepped(appended);
      },
    });
    reply = result.reply;
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
    if (error instanceof CallRefused) {
      return { runId, status: "budget_exceeded", startedAt, endedAt, error: error.message };
    }
    // Infrastructure failures (D1 unavailable…) propagate: the alarm is retried and the run
    // resumes from its checkpoint instead of being recorded as failed.
    throw error;
  } finally {
    stopActivity?.();
    // The preview's last edit has landed before the reply, and the reply's own edit waits out
    // the platform's interval (the outbox holds it until then; saved with the run's end).
    const settled = await preview?.settle(reply);
    if (settled && progress.preview) {
      if (settled.notBefore !== undefined) progress.preview.notBefore = settled.notBefore;
      else delete progress.preview.notBefore;
    }
    a.live.current = undefined;
  }
}

/**
 * The preview of a run whose reply goes to a chat that streams (SPEC §22), or undefined: its
 * connector's `streaming`, send policy as for the reply itself, and the preview an earlier
 * attempt of the run posted.
 */
function replyPreview(
  a: TurnHost,
  spec: QueuedRun,
  runId: string,
  progress: RunProgress,
  save: () => void,
): ReplyPreview | undefined {
  const { req } = spec;
  const entry = a.store.entry();
  const route = req.route ?? entry?.deliveryContext ?? undefined;
  if (!route || req.compact || !repliesToChat(req)) return undefined;
  const deliveryId = `${runId}:reply`;
  if (!a.outbox.payload(deliveryId, { kind: "reply", text: "" }, route, entry, req.sessionKey))
    return undefined;
  const port = previewPort(route, deliveryId, req.sessionKey, a.config, a.env);
  if (!port) return undefined;
  return new ReplyPreview(port, progress.preview?.messageId, (messageId) => {
    progress.preview = { messageId, finalEdits: port.finalEdits };
    save();
  });
}
