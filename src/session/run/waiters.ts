/**
 * Server-side waits on runs (SPEC §5 `agent.wait`): callers of one SessionActor park here until
 * the run's outcome is recorded or their timeout passes. In memory on purpose: a wait is a live
 * request, and the outcome itself is durable (the actor's `run_ids` row), so a caller that
 * reconnects simply waits again.
 */
import type { RunOutcome, WaitResult } from "../../runs/types";
import { within } from "../../time/waits";

/** A finished run's outcome as a wait answers it. */
export function waitResultOf(o: RunOutcome): WaitResult {
  // A run stopped by a budget failed to answer: `error`, with runStatus `budget_exceeded`.
  const status =
    o.status === "ok" || o.status === "error" || o.status === "aborted"
      ? o.status
      : o.status === "budget_exceeded"
        ? "error"
        : "timeout";
  const r: WaitResult = { runId: o.runId, status, runStatus: o.status };
  if (o.startedAt !== undefined) r.startedAt = o.startedAt;
  if (o.endedAt !== undefined) r.endedAt = o.endedAt;
  if (o.error !== undefined) r.error = o.error;
  if (o.reply !== undefined) r.reply = o.reply;
  if (o.delivery !== undefined) r.delivery = o.delivery;
  return r;
}

export class RunWaiters {
  private readonly waiting = new Map<string, Set<(o: RunOutcome) => void>>();

  /** The run's outcome, or undefined when `timeoutMs` passed first. */
  async wait(runId: string, timeoutMs: number): Promise<RunOutcome | undefined> {
    const set = this.waiting.get(runId) ?? new Set();
    this.waiting.set(runId, set);
    let done: (o: RunOutcome) => void = () => {};
    const outcome = await within(
      new Promise<RunOutcome>((resolve) => {
        done = resolve;
        set.add(resolve);
      }),
      timeoutMs,
    );
    set.delete(done);
    return outcome;
  }

  notify(outcome: RunOutcome): void {
    const set = this.waiting.get(outcome.runId);
    this.waiting.delete(outcome.runId);
    for (const resolve of set ?? []) resolve(outcome);
  }
}
