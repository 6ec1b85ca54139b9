/**
 * What a run's start and end tell the session's own state (SPEC §20), the `noted`, `steered`
 * (late) and `yielded` transitions of the run lifecycle (lifecycle.ts), each made durable in the
 * synchronous step of the transition it belongs to: before a run starts, the notes of the
 * sessions it watches; at its end, the steering messages it did not take (a follow-up run), the
 * signal log's event (the entry's new stateVersion), the watches it started and its yield.
 */
import type { RunOutcome } from "../../runs/types";
import { yieldOf } from "../../tools/sessions-yield";
import type { SessionState } from "../../tools/types";
import { mergeWatches, NOTED_KINDS, type Watch, watchesOf, watchNote } from "../../tools/watches";
import type { Signal } from "../storage/signals";
import type { ActorStore } from "../storage/store";
import type { QueuedRun, RunProgress, RunQueue } from "./queue";

/** What these transitions use of the actor. */
export interface SessionStateHost {
  readonly queue: Pick<RunQueue, "insert">;
  readonly store: Pick<
    ActorStore,
    "steers" | "setSteers" | "signals" | "watching" | "setWatching" | "setYielding"
  >;
  /** A watched session's stateVersion and its signal log after `since` (its actor answers). */
  stateChanges(sessionKey: string, since: number): Promise<SessionState>;
}

/**
 * The notes a run of a watcher starts with: for each watched session, asked of its actor, one
 * note when a person or an operator changed it (not this session) since the version seen; the
 * watches to keep, each at the version now seen (a deleted session's watch goes; one whose actor
 * did not answer is asked again next run). Nothing when it watches nothing, or compacts.
 */
export async function noticeWatched(
  a: SessionStateHost,
  spec: QueuedRun,
): Promise<{ notes: string[]; watches: Watch[] } | undefined> {
  if (spec.req.compact || a.store.watching().length === 0) return undefined;
  const self = spec.req.sessionKey;
  const answers = await Promise.all(
    a.store.watching().map(async (w) => {
      try {
        return { w, state: await a.stateChanges(w.key, w.seen) };
      } catch {
        return { w, state: undefined };
      }
    }),
  );
  const notes: string[] = [];
  const watches: Watch[] = [];
  for (const { w, state } of answers) {
    if (!state) {
      watches.push(w);
      continue;
    }
    if (!state.exists) continue;
    const last = (state.events ?? []).filter((e) => NOTED_KINDS.has(e.kind) && e.by !== self).at(-1);
    if (last) notes.push(watchNote(w.key, last.kind, w.seen));
    watches.push({ key: w.key, seen: state.stateVersion });
  }
  return { notes, watches };
}

/** The signal log's event for a run's end (SPEC §20): completed, failed, or a compaction. */
function runSignal(runId: string, spec: QueuedRun, outcome: RunOutcome): Omit<Signal, "version"> {
  const at = outcome.endedAt ?? Date.now();
  if (outcome.status === "ok") {
    return spec.req.compact
      ? { kind: "compacted", actor: "agent", at, summary: "the context was compacted", runId }
      : { kind: "run_completed", actor: "agent", at, summary: `a ${spec.req.trigger} run completed`, runId };
  }
  return {
    kind: "run_failed",
    actor: "agent",
    at,
    summary: `a ${spec.req.trigger} run ended ${outcome.status}`,
    runId,
    outcome: outcome.status === "queued" || outcome.status === "running" ? "error" : outcome.status,
  };
}

/**
 * Messages that came to steer run `runId` after its last model step: queued as one follow-up
 * run (SPEC §20 "if the run ends before a next step"), in the `ended` step, so they are neither
 * lost nor run twice.
 */
function followSteers(a: SessionStateHost, runId: string, spec: QueuedRun): void {
  const left = a.store.steers();
  if (left?.runId !== runId) return;
  const followUp = crypto.randomUUID();
  const { idempotencyKey: _key, steer: _steer, ...req } = spec.req;
  a.queue.insert(
    followUp,
    { req: { ...req, runId: followUp, inputs: left.items.map((i) => i.input) }, sessionId: spec.sessionId },
    Date.now(),
  );
  a.store.setSteers(undefined);
}

/**
 * The session's state at run `runId`'s end, in the `ended` step: the steering messages it did
 * not take become a follow-up run, the signal log gets the run's event, the watches it started
 * are kept, and a yield it ended in starts. Returns the session's new stateVersion.
 */
export function endState(
  a: SessionStateHost,
  runId: string,
  spec: QueuedRun,
  progress: RunProgress,
  outcome: RunOutcome,
): number {
  followSteers(a, runId, spec);
  const stateVersion = a.store.signals.record(runSignal(runId, spec, outcome));
  // watching: the sub-agents it spawned, the sessions it sent to with `watch: true`.
  const added = watchesOf(progress.loop.produced);
  if (added.length) a.store.setWatching(mergeWatches(a.store.watching(), added));
  // yielded: sessions_yield was its last tool call.
  const yielded = outcome.status === "ok" ? yieldOf(progress.loop.produced) : undefined;
  if (yielded) a.store.setYielding({ runId, since: Date.now(), waitingOn: yielded.waitingOn });
  return stateVersion;
}
