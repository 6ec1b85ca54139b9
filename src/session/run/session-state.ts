/**
 * What a run's start and end tell the session's own state (SPEC §20), the `noted`, `steered`
 * (late) and `yielded` transitions of the run lifecycle (lifecycle.ts), each made durable in the
 * synchronous step of the transition it belongs to: before a run starts, the notes of the
 * sessions it watches; at its end, the steering messages it did not take (a follow-up run), the
 * signal log's event (the entry's new stateVersion), the watches it started and its yield; and
 * while it runs, the step that calls sessions_yield.
 */
import type { RunOutcome } from "../../runs/types";
import { YIELD_TOOL, yieldOf } from "../../tools/sessions-yield";
import type { SessionState } from "../../tools/types";
import { mergeWatches, NOTED_KINDS, type Watch, watchesOf, watchNote } from "../../tools/watches";
import type { TranscriptMessage } from "../../transcript/message";
import type { Signal } from "../storage/signals";
import type { ActorStore } from "../storage/store";
import { type QueuedRun, type RunProgress, type RunQueue, specOf } from "./queue";

/** What these transitions use of the actor. */
export interface SessionStateHost {
  readonly queue: Pick<RunQueue, "insert" | "rows">;
  readonly store: Pick<
    ActorStore,
    "steers" | "setSteers" | "signals" | "watching" | "setWatching" | "yielding" | "setYielding"
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
    outcome:
      outcome.status === "queued" || outcome.status === "running" || outcome.status === "budget_exceeded"
        ? "error"
        : outcome.status,
  };
}

/**
 * Messages that came to steer run `runId` after its last model step: queued as one follow-up
 * run (SPEC §20 "if the run ends before a next step"), in the `ended` step, so they are neither
 * lost nor run twice. Its reply answers the last of them, not the message `runId` answered.
 */
function followSteers(a: SessionStateHost, runId: string, spec: QueuedRun): void {
  const left = a.store.steers();
  if (left?.runId !== runId) return;
  const followUp = crypto.randomUUID();
  const { idempotencyKey: _key, steer: _steer, route: _route, ...req } = spec.req;
  const route = left.items.findLast((i) => i.route)?.route;
  a.queue.insert(
    followUp,
    {
      req: { ...req, runId: followUp, inputs: left.items.map((i) => i.input), ...(route ? { route } : {}) },
      sessionId: spec.sessionId,
    },
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
  // yielded: sessions_yield was its last tool call. A child whose announcement came while the
  // turn was ending (`calling`) has its run queued here already.
  const yielded = outcome.status === "ok" ? yieldOf(progress.loop.produced) : undefined;
  const held = a.store.yielding();
  if (yielded) {
    const resumed = announcementRuns(a.queue);
    const waitingOn = yielded.waitingOn.filter((k) => !resumed.has(k));
    a.store.setYielding(waitingOn.length ? { runId, since: Date.now(), waitingOn } : undefined);
  } else if (held?.calling && held.runId === runId) {
    const { calling: _calling, ...before } = held;
    a.store.setYielding(before.waitingOn.length ? before : undefined);
  }
  return stateVersion;
}

/**
 * `calling` (documents.ts YieldState), in the `stepped` step of a model step that calls
 * sessions_yield, before the call is made: from then until the run ends, every announcement of a
 * sub-agent starts a run (flows/handoff.ts), so one that comes while the yield is being made is
 * acted on too. The yield waited on before (if any) is kept until the run ends.
 */
export function yieldCalled(
  a: SessionStateHost,
  runId: string,
  appended: readonly TranscriptMessage[],
): void {
  const calls = appended.some(
    (m) => m.role === "assistant" && m.content.some((p) => p.type === "toolCall" && p.name === YIELD_TOOL),
  );
  if (!calls) return;
  const held = a.store.yielding();
  a.store.setYielding({
    runId,
    since: held?.since ?? Date.now(),
    waitingOn: held?.waitingOn ?? [],
    calling: true,
  });
}

/** The sub-agents whose announcements have a run queued in this session. */
function announcementRuns(queue: Pick<RunQueue, "rows">): Set<string> {
  const keys = new Set<string>();
  for (const row of queue.rows()) {
    const { req } = specOf(row);
    if (req.trigger !== "announce") continue;
    for (const input of req.inputs)
      if (input.provenance?.kind === "subagent_announce" && input.provenance.sourceSessionKey)
        keys.add(input.provenance.sourceSessionKey);
  }
  return keys;
}
