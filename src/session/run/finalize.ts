/**
 * The end of a run (lifecycle.ts's table, `ended` → `finalized` → `replied` → `continued` →
 * `done`): its records written in one batch, its reply handed to the outbox (taking its
 * preview's place, SPEC §22), its flow handed on, the run leaving the queue; and `giveUp`, the
 * same end for a run that cannot be executed.
 */
import { emptyCheckpoint, runTimelineOf, runUsage } from "../../agent/checkpoint";
import type { Config } from "../../config/schema";
import type { DeliveryOutbox } from "../../delivery/outbox";
import type { DeliveryRoute, DeliveryState, RunOutcome } from "../../runs/types";
import { localDay } from "../../time/zones";
import { outboundOf } from "../chat/posts";
import { usageFooter } from "../chat/usage";
import type { ActorRecords } from "../d1/records";
import type { ActorStore } from "../storage/store";
import { inputMessages } from "./admission";
import { type UsageEvents, usageSubject } from "./analytics";
import { budgetNoticeDue } from "./budget";
import { type QueuedRun, type QueueRow, type RunProgress, type RunQueue, specOf } from "./queue";
import { runRecordOf } from "./run-row";
import type { RunWaiters } from "./waiters";

/** What a run's end uses of the actor. */
export interface FinalizeHost {
  readonly config: Config;
  readonly queue: Pick<RunQueue, "progress" | "saveProgress" | "rows" | "remove">;
  readonly store: Pick<ActorStore, "entry" | "saveEntry" | "keepOutcome" | "kvGet" | "kvSet">;
  readonly records: Pick<ActorRecords, "runFinished" | "runsEnded">;
  readonly outbox: Pick<DeliveryOutbox, "payload" | "add" | "addAndAttempt">;
  readonly waiters: Pick<RunWaiters, "notify">;
  /** Where a run's end is reported as a usage data point (SPEC §21 Analytics Engine). */
  readonly analytics: UsageEvents;
  /** Deletes a run's preview from its chat (best effort; SPEC §22). */
  removePreview(route: DeliveryRoute, runId: string, sessionKey: string, messageId: string): Promise<void>;
  continueFlows(runId: string, spec: QueuedRun, progress: RunProgress, outcome: RunOutcome): Promise<void>;
  /** Sets the alarm for what is due (a reply held to its chat's pace). */
  schedule(): Promise<void>;
}

/** What an attempt leaves the actor to do: remove its session (a sub-agent with cleanup "delete"). */
export type AttemptEnd = "remove-session" | undefined;

/** How long a run waits for its reply's first attempt before going on without its outcome. */
export const FIRST_ATTEMPT_WAIT_MS = 1_000;

/** An error's first line, for a run's `error` and the logs. */
export function causeOf(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.split("\n")[0]?.slice(0, 500) ?? "unknown error";
}

/**
 * ended → finalized → replied → continued → done. Nothing here is checkpointed: a finalize
 * re-entered after a restart writes its idempotent batch again, finds its reply's outbox row
 * (added once) and hands its flow on again (step ids derive from the flow).
 */
export async function finalize(
  a: FinalizeHost,
  row: QueueRow,
  spec: QueuedRun,
  progress: RunProgress,
  outcome: RunOutcome,
): Promise<AttemptEnd> {
  const { req } = spec;
  const entry = a.store.entry();
  const usage = runUsage(progress.loop);
  // A reached budget's notice: once per session and day.
  const budget =
    outcome.status === "budget_exceeded"
      ? budgetNoticeDue(a.store, a.config.session.timezone, Date.now())
      : undefined;
  const post = budget?.due === false ? undefined : outboundOf(req, outcome);
  // `/usage tokens|full`: the delivered reply carries the footer, the transcript does not.
  const footer = post?.kind === "reply" ? usageFooter(entry?.usageMode, usage, entry?.model ?? null) : "";
  const out = post && footer ? { ...post, text: `${post.text}\n\n${footer}` } : post;
  const route = req.route ?? entry?.deliveryContext ?? undefined;
  const payload =
    out && route
      ? a.outbox.payload(`${row.run_id}:${out.kind}`, out, route, entry, req.sessionKey)
      : undefined;
  // Blocked by send policy: the reply stays in the transcript, marked as not delivered.
  const blocked = !payload && !!out && !!route;
  // finalized: the run's inputs, steps and reply, its row as it ended and the entry it changed,
  // in one batch, before the reply can reach the chat (SPEC §17 "Read your replies").
  const stored = progress.stored ?? 0;
  await a.records.runFinished({
    run: runRecordOf(row.run_id, spec, row.enqueued_at),
    messages: [
      ...(progress.inputsLeftOut ? [] : inputMessages(row.run_id, progress.inputs ?? req.inputs)),
      ...progress.loop.produced.slice(stored),
    ],
    end: {
      status: outcome.status,
      startedAt: outcome.startedAt ?? null,
      endedAt: outcome.endedAt ?? null,
      error: outcome.error ?? null,
      reply: outcome.reply ?? null,
      model: entry?.model ?? null,
      usage,
      timeline: runTimelineOf(progress.loop),
      // false: blocked by send policy; null: the delivery's own row says (runs.get reads it).
      delivered: blocked ? false : null,
    },
    ...(entry ? { entry } : {}),
    usage: {
      runId: row.run_id,
      day: localDay(outcome.endedAt ?? Date.now(), a.config.session.timezone),
      sessionKey: req.sessionKey,
      ...usageSubject(entry, req.init.agentId),
      model: entry?.model ?? null,
      usage,
    },
  });
  // replied: handed to the outbox (its row is the reply's durable record from here on) and
  // attempted at once, waited for at most FIRST_ATTEMPT_WAIT_MS so that the run's waiters hear
  // how it went; a slower connector is not waited for.
  // The reply takes its preview's place (delivery/deliver.ts); anything else removes it first.
  const preview = progress.preview;
  if (preview && route && payload?.kind !== "reply")
    await a.removePreview(route, row.run_id, req.sessionKey, preview.messageId);
  let delivery: DeliveryState = blocked ? "blocked" : "none";
  if (payload) {
    budget?.mark();
    const made =
      preview && payload.kind === "reply"
        ? { ...payload, preview: { messageId: preview.messageId, edit: preview.finalEdits } }
        : payload;
    if (preview?.notBefore !== undefined && made !== payload && preview.notBefore > Date.now()) {
      // The chat's pace: the reply's edit is due when the interval since the last preview is over.
      a.outbox.add(made, preview.notBefore);
      await a.schedule();
      delivery = "pending";
    } else {
      const first = await a.outbox.addAndAttempt(made, FIRST_ATTEMPT_WAIT_MS);
      delivery = first?.status ?? "pending";
    }
  }
  // continued: the flow's next step, once the run is in D1.
  await a.continueFlows(row.run_id, spec, progress, outcome);
  // done: the run leaves the queue in one synchronous step.
  const finished: RunOutcome = { ...outcome, delivery };
  a.queue.remove(row);
  a.store.keepOutcome(finished, Date.now());
  a.waiters.notify(finished);
  // After the step that leaves the queue, so a finalize made again after a restart reports once.
  a.analytics.runEnded(usageSubject(entry, req.init.agentId), {
    status: outcome.status,
    model: entry?.model ?? null,
    ms: (outcome.endedAt ?? Date.now()) - (outcome.startedAt ?? row.enqueued_at),
    usage,
  });
  // The announcement is recorded in the requester: the child can go.
  return req.spawn?.phase === "announce" && req.spawn.cleanup === "delete" ? "remove-session" : undefined;
}

/**
 * Ends a run that cannot be executed: `error` with its cause, through the ordinary finalize
 * (the run's record, the chat's short notice, its waiters) when D1 takes it; when even that
 * fails, the run leaves the queue anyway with its outcome kept for waiters and the cause in
 * the logs, and its D1 row is ended if it can be.
 */
export async function giveUp(a: FinalizeHost, row: QueueRow, error: string): Promise<AttemptEnd> {
  const now = Date.now();
  let spec: QueuedRun | undefined;
  let progress: RunProgress | undefined;
  try {
    spec = specOf(row);
    progress = a.queue.progress(row);
  } catch {
    // Unreadable: the run ends with what is known.
  }
  const startedAt = progress?.startedAt;
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
    // Twice: with the messages the run produced, then without them and its inputs (one of them
    // may be what D1 refuses).
    for (const skipUnstored of [false, true]) {
      try {
        if (skipUnstored) {
          ending.stored = ending.loop.produced.length;
          ending.inputsLeftOut = true;
        }
        a.queue.saveProgress(row, ending);
        return await finalize(a, row, spec, ending, ending.outcome);
      } catch (finalizeError) {
        console.error(`run ${row.run_id}: could not be finalized: ${causeOf(finalizeError)}`);
      }
    }
  }
  a.queue.remove(row);
  a.store.keepOutcome(outcome, now);
  a.waiters.notify(outcome);
  try {
    const run = spec ? runRecordOf(row.run_id, spec, row.enqueued_at) : undefined;
    if (run)
      await a.records.runsEnded([
        { ...run, status: "error", startedAt: startedAt ?? null, endedAt: now, error },
      ]);
  } catch (recordError) {
    console.error(
      `run ${row.run_id} ended (${error}); its D1 row could not be updated: ${causeOf(recordError)}`,
    );
  }
}
