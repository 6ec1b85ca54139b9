/**
 * A run's D1 row as the lifecycle writes it: as its accept wrote it, as far as a waiting or
 * running run went, and the usage a run ended with, accounted on the entry. Pure.
 */
import { runTimelineOf } from "../../agent/checkpoint";
import type { SessionRow } from "../../db/queries";
import type { RunOutcome } from "../../runs/types";
import type { RunRecord } from "../d1/records";
import { progressOf, type QueuedRun, type QueueRow, type RunProgress, specOf } from "./queue";

/**
 * A waiting or running run's row as far as it went (D1 gets it with the run's finalize); with
 * its whole progress (its steps read back), its timeline so far.
 */
export function queuedRunRecord(row: QueueRow, whole?: RunProgress): RunRecord {
  const spec = specOf(row);
  const progress = whole ?? progressOf(row);
  const run = runRecordOf(row.run_id, spec, row.enqueued_at);
  return progress
    ? {
        ...run,
        status: "running",
        startedAt: progress.startedAt,
        ...(whole ? { timeline: runTimelineOf(whole.loop) } : {}),
      }
    : run;
}

/** The run's row as its accept wrote it (`createdAt`: when it was queued). */
export function runRecordOf(runId: string, spec: QueuedRun, createdAt: number) {
  const { req } = spec;
  return {
    runId,
    sessionKey: req.sessionKey,
    sessionId: spec.sessionId,
    trigger: req.trigger,
    status: "queued",
    createdAt,
    deliver: req.deliver,
    idempotencyKey: req.idempotencyKey ?? null,
  };
}

/**
 * The run's usage on the entry, in the same synchronous step that records the outcome, so a
 * finalization repeated after a restart never counts tokens twice.
 */
export function accountRun(
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
    costUsd: (entry.costUsd ?? 0) + (progress.loop.costUsd ?? 0),
    abortedLastRun: outcome.status === "aborted" || outcome.status === "timeout",
    systemSent: true,
    runStatus: morePending ? "queued" : "idle",
  };
}
