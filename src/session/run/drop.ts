/**
 * Runs dropped before they started (`abort` with `clearQueue`, `/stop`): each leaves the queue
 * `aborted` at once, outside the run lifecycle (lifecycle.ts), which only the head goes through:
 * its outcome kept for waits, its waiters answered and its D1 row ended.
 */
import type { RunOutcome } from "../../runs/types";
import type { ActorRecords, RunRecord } from "../d1/records";
import type { ActorStore } from "../storage/store";
import { type RunQueue, specOf } from "./queue";
import { runRecordOf } from "./run-row";
import type { RunWaiters } from "./waiters";

/**
 * Waiting runs dropped before they started (`abort` with `clearQueue`): each is done at once,
 * `aborted`, its waiters answered and its D1 row ended. Returns how many.
 */
export async function dropQueued(a: {
  readonly queue: Pick<RunQueue, "rows" | "remove">;
  readonly store: Pick<ActorStore, "entry" | "keepOutcome">;
  readonly waiters: Pick<RunWaiters, "notify">;
  readonly records: Pick<ActorRecords, "runsEnded">;
}): Promise<number> {
  const now = Date.now();
  const dropped: RunRecord[] = [];
  for (const row of a.queue.rows()) {
    if (row.state !== "queued") continue;
    a.queue.remove(row);
    const outcome: RunOutcome = {
      runId: row.run_id,
      status: "aborted",
      endedAt: now,
      error: "aborted before start",
    };
    a.store.keepOutcome(outcome, now);
    a.waiters.notify(outcome);
    let run: RunRecord = {
      ...outcome,
      sessionKey: a.store.entry()?.key ?? "",
      sessionId: "",
      trigger: "inbound",
      createdAt: row.enqueued_at,
    };
    try {
      run = { ...runRecordOf(row.run_id, specOf(row), row.enqueued_at), ...outcome };
    } catch {
      // An unreadable spec: the row as far as it is known.
    }
    dropped.push(run);
  }
  await a.records.runsEnded(dropped);
  return dropped.length;
}
