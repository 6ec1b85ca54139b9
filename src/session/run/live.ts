/**
 * The run a SessionActor executes now, in memory only (it describes live work): its abort
 * controller, which `/stop`, `abort` and the alarm at its deadline reach, and the sessions it
 * waits on (sessions_send).
 */
export interface LiveRun {
  current?: { runId: string; controller: AbortController };
  /** Sessions the current run is waiting on (sessions_send), with a count per key. */
  waitingOn: Map<string, number>;
}

/** Why a run was aborted: `/stop` and `abort`, or its deadline (`timeoutSeconds`). */
export class AbortRun extends Error {
  constructor(readonly kind: "aborted" | "timeout") {
    super(kind === "timeout" ? "run timed out" : "run aborted");
  }
}

/** Ends the run executing now, if any, as aborted (`/stop`) or timed out; true when there was one. */
export function abortCurrent(live: LiveRun, kind: "aborted" | "timeout" = "aborted"): boolean {
  if (!live.current) return false;
  live.current.controller.abort(new AbortRun(kind));
  return true;
}
