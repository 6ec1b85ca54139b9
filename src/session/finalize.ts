/**
 * The end of a run, in resumable steps (each recorded in the run's checkpoint): the reply's
 * first delivery attempt, one D1 batch with the final messages, the delivery row, the run's
 * outcome and the entry, then the flow's next step, then the run leaves the queue with its
 * outcome recorded and its waiters answered. Re-entered after a restart, it skips what is done.
 */
import type { DeliveryContext } from "../db/queries";
import { deliveryRow } from "../delivery/outbox";
import type { DeliveryState, RunOutcome } from "../runs/types";
import type { ActorContext } from "./actor-context";
import { continueFlows } from "./flow-runner";
import { outboundOf } from "./outbound";
import type { QueuedRun, QueueRow, RunProgress } from "./run-queue";

/** How long a run waits for its reply's first attempt before going on without its outcome. */
export const FIRST_ATTEMPT_WAIT_MS = 1_000;

export async function finalizeRun(
  a: ActorContext,
  row: QueueRow,
  spec: QueuedRun,
  progress: RunProgress,
  outcome: RunOutcome,
): Promise<void> {
  const { req } = spec;
  const save = () => a.queue.saveProgress(row, progress);
  if (!progress.delivery) {
    const entry = a.store.entry();
    const out = outboundOf(req, outcome);
    const route = req.route ?? (entry?.deliveryContext as DeliveryContext | null) ?? undefined;
    const payload =
      progress.outgoing?.payload ??
      (out && route
        ? a.outbox.payload(`${row.run_id}:${out.kind}`, out, route, entry, req.sessionKey)
        : undefined);
    // The reply goes out before the run is written to D1: the local outbox row makes it
    // durable, the user gets it one round trip sooner, and when the connector answers within
    // FIRST_ATTEMPT_WAIT_MS the `deliveries` row below is written once with that outcome. A
    // slower connector is not waited for: the attempt goes on and records itself. A restart
    // between the attempt and its checkpoint may repeat the POST (at least once; connectors
    // dedupe by deliveryId).
    if (payload && !progress.outgoing) {
      const first = (await a.outbox.addAndAttempt(payload, FIRST_ATTEMPT_WAIT_MS)) ?? null;
      progress.outgoing = { payload, attempt: first };
      save();
    }
    const attempt = progress.outgoing?.attempt ?? undefined;
    const state: DeliveryState = !payload
      ? out && route
        ? "blocked"
        : "none"
      : (attempt?.status ?? "pending");
    // false: blocked by send policy or dead on its only attempt; null: still being retried.
    const delivered =
      state === "blocked"
        ? false
        : attempt
          ? { delivered: true, dead: false, retrying: null }[attempt.status]
          : null;
    // One round trip: the final reply, the delivery and its first attempt, the run's outcome, the entry.
    await a.records.runFinished({
      runId: row.run_id,
      sessionId: spec.sessionId,
      messages: progress.loop.produced.slice(progress.stored ?? 0),
      ...(payload ? { delivery: { ...deliveryRow(payload), ...attempt } } : {}),
      end: {
        status: outcome.status,
        startedAt: outcome.startedAt ?? null,
        endedAt: outcome.endedAt ?? null,
        error: outcome.error ?? null,
        reply: outcome.reply ?? null,
        model: entry?.model ?? null,
        usage: {
          inputTokens: progress.loop.inputTokens,
          outputTokens: progress.loop.outputTokens,
          // SPEC §17: totalTokens is the last model call's prompt + completion (the context size).
          totalTokens: progress.loop.lastCallTokens,
        },
        delivered,
      },
      ...(entry ? { entry } : {}),
    });
    progress.delivery = { delivered, state };
    // A run with a flow step to hand on is checkpointed here; any other leaves the queue below
    // in this same synchronous step (a crash before that repeats the idempotent batch above).
    if (req.flow || req.spawn) save();
  }
  if (!progress.continued) {
    await continueFlows(a, row.run_id, spec, progress, outcome);
    // No save: the run leaves the queue below, in the same synchronous step.
    progress.continued = true;
  }
  // Done: the run leaves the queue in one synchronous step.
  const finished: RunOutcome = { ...outcome, delivery: progress.delivery?.state ?? "pending" };
  a.queue.remove(row);
  a.store.recordFinished(finished, Date.now());
  a.waiters.notify(finished);
  if (req.spawn?.phase === "announce" && req.spawn.cleanup === "delete") {
    // The announcement is recorded in the requester: the child can go.
    await a.remove(req.sessionKey, true);
  }
}
