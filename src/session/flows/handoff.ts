/**
 * Carries flows across sessions after a run ends (the plans come from the pure `flows.ts`):
 * the next step of a sessions_send exchange (a reply round or the announce step, enqueued in
 * whichever session it belongs to), a sub-agent's announce step, and the normalized
 * announcement recorded in the requester session. Step run ids derive from the flow, so a
 * step handed on twice (a finalize repeated after a restart) is queued once.
 */
import { runUsage } from "../../agent/checkpoint";
import { stableUuid } from "../../auth/signature";
import type { Config } from "../../config/schema";
import type { DeliveryContext } from "../../db/json-columns";
import { entryInitOf } from "../../runs/entry-init";
import type { EnqueueRequest, EnqueueResult, EntryInit, RunOutcome, SpawnMeta } from "../../runs/types";
import { boundedText, textOf } from "../../transcript/message";
import { transcriptPath } from "../../views/session";
import { type PostHost, queueDelivery } from "../chat/posts";
import { actorFor } from "../client";
import type { ActorRecords } from "../d1/records";
import { entryExpiry, newSessionRow } from "../entry/rules";
import type { QueuedRun, RunProgress } from "../storage/documents";
import { type ActorStore, ANNOUNCEMENT_SUFFIX } from "../storage/store";
import { buildAnnouncement, type NextRun, nextExchangeStep, spawnAnnouncePrompt } from "./plans";

/** What handing a flow on uses of the actor (other sessions are reached as actors, client.ts). */
export interface FlowHost extends PostHost {
  readonly env: Env;
  readonly config: Config;
  readonly store: Pick<
    ActorStore,
    "announced" | "keepAnnouncement" | "entry" | "saveEntry" | "markHistory" | "yielding" | "setYielding"
  >;
  readonly records: Pick<ActorRecords, "messagesAppended" | "sessionStarted">;
  /** Admits a run into this same session, without an RPC hop (an announce or exchange step). */
  admit(req: EnqueueRequest): Promise<EnqueueResult>;
}

export interface Announcement {
  id: string;
  text: string;
  sourceSessionKey: string;
  route?: DeliveryContext;
  init: EntryInit;
}

export async function continueFlows(
  a: FlowHost,
  runId: string,
  spec: QueuedRun,
  progress: RunProgress,
  outcome: RunOutcome,
): Promise<void> {
  const { req } = spec;
  if (req.flow) {
    const next = nextExchangeStep(req.flow, req.sessionKey, outcome);
    if (next) await enqueueFlowStep(a, next, req);
  }
  if (req.spawn?.phase === "task") {
    const lastTool = [...progress.loop.produced].reverse().find((m) => m.role === "toolResult");
    const task: NonNullable<SpawnMeta["task"]> = {
      runId,
      status: outcome.status,
      startedAt: outcome.startedAt ?? progress.startedAt,
      endedAt: outcome.endedAt ?? Date.now(),
      inputTokens: progress.loop.inputTokens,
      outputTokens: progress.loop.outputTokens,
      costUsd: runUsage(progress.loop).costUsd ?? null,
    };
    if (outcome.error) task.error = outcome.error;
    if (outcome.reply) task.reply = outcome.reply;
    if (lastTool) task.lastToolResult = textOf(lastTool);
    const announce: EnqueueRequest = {
      sessionKey: req.sessionKey,
      runId: await stableUuid(`${runId}:announce`),
      trigger: "announce",
      inputs: [
        { text: spawnAnnouncePrompt(task), provenance: { kind: "internal_system" }, timestamp: Date.now() },
      ],
      deliver: false,
      init: req.init,
      userInteraction: false,
      hasThread: false,
      spawn: { ...req.spawn, phase: "announce", task },
    };
    if (req.model) announce.model = req.model;
    const result = await a.admit(announce);
    if (!result.ok) throw new Error(`could not queue the announce step: ${result.message}`);
  }
  if (req.spawn?.phase === "announce" && req.spawn.task) {
    const entry = a.store.entry();
    const text = buildAnnouncement({
      task: req.spawn.task,
      announce: outcome,
      childKey: req.sessionKey,
      childSessionId: spec.sessionId,
      transcriptPath: transcriptPath(spec.sessionId),
    });
    if (text !== undefined) {
      await actorFor(a.env, req.spawn.requesterKey).postAnnouncement(req.spawn.requesterKey, {
        id: `${runId}${ANNOUNCEMENT_SUFFIX}`,
        text,
        sourceSessionKey: req.sessionKey,
        init: req.spawn.requesterInit,
        ...(req.spawn.requesterRoute ? { route: req.spawn.requesterRoute } : {}),
      });
    }
    if (entry) a.store.saveEntry({ ...entry, runStatus: "idle" });
  }
}

async function enqueueFlowStep(a: FlowHost, next: NextRun, from: EnqueueRequest): Promise<void> {
  const flow = next.flow;
  const target = next.sessionKey;
  const init =
    target === flow.requesterKey ? flow.requesterInit : target === from.sessionKey ? from.init : undefined;
  const stub = actorFor(a.env, target);
  const entryInit = init ?? (await stub.getEntry(target).then((e) => (e ? entryInitOf(e) : undefined)));
  if (!entryInit) return; // the other side was deleted meanwhile: the exchange ends here
  const req: EnqueueRequest = {
    sessionKey: target,
    runId: await stableUuid(next.idSeed),
    trigger: next.trigger,
    inputs: [
      {
        text: next.text,
        provenance: { kind: "inter_session", sourceSessionKey: from.sessionKey, sourceTool: "sessions_send" },
        timestamp: Date.now(),
      },
    ],
    deliver: next.deliver,
    init: entryInit,
    userInteraction: false,
    hasThread: false,
    flow,
  };
  const result = target === from.sessionKey ? await a.admit(req) : await stub.enqueue(req);
  if (!result.ok && result.code !== "RATE_LIMITED")
    throw new Error(`could not continue the exchange: ${result.message}`);
}

/**
 * Records a sub-agent announcement in this (requester) session: appended to its current
 * transcript with `subagent_announce` provenance, and posted to its chat route when it has one.
 * While the session is yielded to that sub-agent (SPEC §20 `sessions_yield`), the announcement
 * is instead the user message of a run it starts here (its id derives from the announcement's,
 * so a repeat starts it once), and the yield ends with the last child it waited on.
 */
export async function recordAnnouncement(
  a: FlowHost,
  sessionKey: string,
  ann: Announcement,
): Promise<{ delivered: boolean }> {
  const now = Date.now();
  // A repeat (the sub-agent's hand-off retried after this one was recorded) changes nothing.
  if (a.store.announced(ann.id)) return { delivered: false };
  let entry = a.store.entry();
  if (!entry) {
    // A requester that never ran (e.g. /tools/invoke on a fresh key) still gets the
    // announcement: an announcement is never lost.
    entry = newSessionRow(sessionKey, ann.init, now, crypto.randomUUID());
    entry.expiresAt = entryExpiry(entry, a.config);
    a.store.saveEntry(entry);
    await a.records.sessionStarted(entry, now);
  }
  const message = {
    text: boundedText(ann.text),
    provenance: {
      kind: "subagent_announce" as const,
      sourceSessionKey: ann.sourceSessionKey,
      sourceTool: "sessions_spawn",
    },
  };
  const yielded = a.store.yielding();
  // Waited on, or any sub-agent while the turn that calls sessions_yield ends (`calling`).
  const resumes = yielded?.calling || yielded?.waitingOn.includes(ann.sourceSessionKey);
  if (resumes) {
    // Admitted before the announcement is kept: a crash between them admits it again, once.
    const started = await a.admit({
      sessionKey,
      runId: await stableUuid(`${ann.id}:yield`),
      trigger: "announce",
      inputs: [{ ...message, timestamp: now }],
      deliver: true,
      init: ann.init,
      userInteraction: false,
      hasThread: false,
    });
    if (!started.ok) throw new Error(`could not start the run for the announcement: ${started.message}`);
  } else {
    await a.records.messagesAppended(entry.sessionId, [
      {
        id: ann.id,
        role: "user",
        content: [{ type: "text", text: message.text }],
        timestamp: now,
        provenance: message.provenance,
      },
    ]);
    a.store.markHistory(entry.sessionId);
  }
  // Checked again, and recorded in the same synchronous step as the delivery's local row (which
  // queueDelivery adds before its first await): a repeat that raced this one delivers nothing,
  // and a crash before this step leaves the announcement to be posted again.
  if (a.store.announced(ann.id)) return { delivered: false };
  const route = entry.deliveryContext ?? ann.route;
  const queued = route
    ? queueDelivery(a, `${ann.id}:announce`, { kind: "announce", text: ann.text }, route, entry, sessionKey)
    : Promise.resolve(false);
  a.store.keepAnnouncement(ann.id, now);
  const current = a.store.yielding();
  if (resumes && current) {
    // The yield ends when no child it waited on is left.
    const waitingOn = current.waitingOn.filter((k) => k !== ann.sourceSessionKey);
    a.store.setYielding(waitingOn.length || current.calling ? { ...current, waitingOn } : undefined);
  }
  return { delivered: await queued };
}
