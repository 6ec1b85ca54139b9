/**
 * The run lifecycle: the one path every run of a SessionActor takes, from its admission to
 * leaving the queue. Each transition is made durable at one place, and a run interrupted
 * anywhere (the process ends, a deploy, an eviction) resumes from the last durable state and
 * never repeats what that state records.
 *
 *   state       reached when                               durable in                   D1
 *   queued      admission stores the queue row             DO: queue row, `received`,   a connector's: nothing (its
 *                                                          entry (one synchronous step) run's finalize writes it);
 *                                                                                        others: the entry and the
 *                                                                                        queued run, written through
 *   fetched     a run whose inputs carry files: each       DO: the inputs as fetched in  -
 *               downloaded, kept in R2, audio transcribed  the checkpoint (R2: the files,
 *               (run/media.ts), before its start is        by ids derived from the run)
 *               recorded
 *   started     the queue head is attempted                DO: checkpoint (running),     - (written through when
 *                                                          `starts` counted              session.writeBehind is off)
 *   stepped     each model step / tool result is produced  DO: checkpoint + `run_steps`  - (the step's messages ride
 *               (with its timeline span, SPEC §21)         row                           on the finalize, the spans
 *                                                                                        on the run's row)
 *   previewed   the reply's preview is first posted on    DO: its message id in the     -
 *               its chat while the model writes (SPEC     checkpoint, when posted
 *               §22 streaming, run/preview.ts), then
 *               edited at most once per minIntervalMs
 *   ended       the turn has an outcome                    DO: checkpoint `outcome`,     -
 *                                                          entry's usage accounted, the
 *                                                          signal log's event (its
 *                                                          version the entry's
 *                                                          stateVersion)
 *   refused     a model call would start past a budget     DO: checkpoint `outcome`      -
 *               (run/budget.ts, agent/loop.ts              budget_exceeded, as `ended`;
 *               beforeCall): not made, the turn ends       the notice's day (kv), in the
 *               `budget_exceeded`                          step that hands it to the
 *                                                          outbox
 *   steered     a message joins the running turn           DO: the `steer` kv, in the     (the run's finalize writes
 *               (session.queue.mode steer, /steer):        admission's step; taken into   them as its user messages)
 *               taken before its next model step            the checkpoint in one step
 *               (agent/loop.ts); tool calls not started    (run/turn.ts); left over at
 *               yet are skipped                            `ended`: a follow-up run,
 *                                                          queued in that same step
 *   noted       before a run starts: the changes of the      DO: the notes in the run's    -
 *               sessions it watches (their actors' signal  first checkpoint, the
 *               logs), one note per changed session        versions seen in the
 *                                                          `watching` kv, one step; the
 *                                                          watches a run starts are
 *                                                          added at `ended`
 *   yielded     an ended turn's last tool call was         DO: the `yield` kv (the       -
 *               sessions_yield (tools/sessions-yield.ts):  children waited on), in the
 *               each announcement of a child waited on      same step as `ended`; from
 *               starts a run here until none is left       the `stepped` step of the
 *               (flows/handoff.ts), and so does any that   model step that calls it, the
 *               comes while the yielding turn ends         kv marked `calling`
 *   finalized   the finalize batch is written              D1                            the run's inputs, steps and
 *                                                                                        reply, its row as it ended,
 *                                                                                        the entry (and the
 *                                                                                        transcript's row, its first
 *                                                                                        time): one batch, carrying
 *                                                                                        outcomes of earlier
 *                                                                                        deliveries (records.ts)
 *   replied     its reply is handed to the outbox and      DO: outbox row (naming the    -
 *               attempted once (waited for at most         preview the reply edits or
 *               FIRST_ATTEMPT_WAIT_MS); it takes its       deletes, and when: due an
 *               preview's place, and a run without a       interval after the last
 *               reply deletes its preview first            preview call)
 *   continued   the flow's next step is handed on          the next step's own queue     (the next run's accept)
 *               (exchange round, announce, announcement)   (ids derive from the flow)
 *   done        the run leaves the queue                   DO: queue row removed with    - (its Analytics Engine
 *                                                          its `finished` outcome, in    point, when configured,
 *                                                          one synchronous step          after this step: once)
 *   delivered   the outbox's attempts settle (after done,  DO: the outcome on the        -
 *               in the background; see delivery/outbox.ts) outbox row
 *   recorded    a D1 write of the session carries the      DO: outbox row removed        the delivery's row with its
 *               outcome (its next run's finalize, or the                                 outcome
 *               alarm once it is due)
 *
 * So D1 never shows a session older than its chat has seen (SPEC §17): a reply goes out only
 * after its run's records are written. `finalized` to `done` is checkpointed nowhere: a run
 * re-entering it writes its idempotent batch again and finds its reply's outbox row.
 *
 * Failures: an attempt that throws (D1 down, a bug) is retried from its checkpoint after a
 * backoff, at most MAX_RUN_ATTEMPTS times, and a run whose process keeps ending before its next
 * step ends after MAX_RUN_STARTS; either way it ends `error` through the same finalize
 * (`giveUp`), so no run wedges the queue. Aborts and timeouts end the turn (`ended`) like any
 * outcome. A stored document this version cannot read (runs/durable.ts) fails the attempt.
 * The actor starts the head at once when a run is admitted to an idle actor or the run before
 * it is done, and its alarm is the backstop (session/scheduler.ts).
 */
import { emptyCheckpoint } from "../../agent/checkpoint";
import type { Config } from "../../config/schema";
import type { RunInput, RunOutcome } from "../../runs/types";
import type { TranscriptMessage } from "../../transcript/message";
import type { ActorRecords } from "../d1/records";
import type { ActorStore } from "../storage/store";
import { inputMessages } from "./admission";
import { type AttemptEnd, causeOf, type FinalizeHost, finalize, giveUp } from "./finalize";
import { hasMedia } from "./media";
import {
  MAX_RUN_ATTEMPTS,
  MAX_RUN_STARTS,
  type QueuedRun,
  type QueueRow,
  RUN_RETRY_DELAYS_MS,
  type RunProgress,
  type RunQueue,
  specOf,
} from "./queue";
import { accountRun, runRecordOf } from "./run-row";
import { endState, noticeWatched, type SessionStateHost, yieldCalled } from "./session-state";
import type { TurnSteps } from "./turn";

/**
 * What the run lifecycle uses of the actor: what a run's end uses (finalize.ts: the outbox its
 * reply goes to, its waiters, its flow's next step), and the queue and its checkpoints, the
 * entry, the records of a run's start, and the modules it hands a run to: its turn
 * (run/turn.ts), its files (run/media.ts), its tool notices.
 */
export interface LifecycleHost extends SessionStateHost, FinalizeHost {
  readonly config: Config;
  readonly queue: Pick<
    RunQueue,
    | "beginAttempt"
    | "attemptFailed"
    | "start"
    | "progress"
    | "saveProgress"
    | "othersWaiting"
    | "rows"
    | "remove"
    | "insert"
  >;
  readonly store: Pick<
    ActorStore,
    "entry" | "saveEntry" | "markHistory" | "keepOutcome" | "kvGet" | "kvSet"
  > &
    SessionStateHost["store"];
  readonly records: Pick<ActorRecords, "runStarted" | "runFinished" | "runsEnded">;
  /** The run's inputs with their files fetched, kept and transcribed (run/media.ts). */
  fetchMedia(spec: QueuedRun, runId: string): Promise<RunInput[]>;
  turn(spec: QueuedRun, runId: string, progress: RunProgress, steps: TurnSteps): Promise<RunOutcome>;
  noticeTools(
    spec: QueuedRun,
    runId: string,
    produced: readonly TranscriptMessage[],
    appended: readonly TranscriptMessage[],
  ): Promise<void>;
  /** Sets the alarm for what is due (a run's deadline, once it has started). */
  schedule(): Promise<void>;
}

export type { AttemptEnd };

/**
 * Executes the queue head once, counted: a failed attempt is retried after a backoff, and a
 * run whose attempts are spent (or whose stored state can no longer be read) ends `error`
 * with its cause, so the queue moves on (SPEC §5: no run can wedge a session).
 */
export async function attemptHead(a: LifecycleHost, row: QueueRow): Promise<AttemptEnd> {
  const starts = a.queue.beginAttempt(row);
  if (starts > MAX_RUN_STARTS) {
    const last = row.last_error ? `; last error: ${row.last_error}` : "";
    return giveUp(
      a,
      row,
      `run stopped ${MAX_RUN_STARTS} times in a row before its next step (its process ended each time)${last}`,
    );
  }
  try {
    return await executeHead(a, row);
  } catch (error) {
    const cause = causeOf(error);
    const failures = (row.attempts ?? 0) + 1;
    console.error(`run ${row.run_id}: attempt ${failures} of ${MAX_RUN_ATTEMPTS} failed: ${cause}`);
    if (failures >= MAX_RUN_ATTEMPTS) {
      return giveUp(a, row, `run failed after ${MAX_RUN_ATTEMPTS} attempts: ${cause}`);
    }
    const delay = RUN_RETRY_DELAYS_MS[failures - 1] ?? RUN_RETRY_DELAYS_MS.at(-1) ?? 0;
    a.queue.attemptFailed(row, cause, Date.now() + delay);
    return undefined;
  }
}

/** queued → started → stepped… → ended, then on through `finalize`. */
async function executeHead(a: LifecycleHost, row: QueueRow): Promise<AttemptEnd> {
  const spec = specOf(row);
  const runId = row.run_id;
  const stored = a.queue.progress(row);
  const progress: RunProgress = stored ?? { startedAt: Date.now(), loop: emptyCheckpoint() };
  if (!stored) {
    // noted: the changes of watched sessions since this session's last run, shown to this one.
    const watched = await noticeWatched(a, spec);
    if (watched?.notes.length) progress.notes = watched.notes;
    a.queue.start(row, progress, spec.req.timeoutSeconds);
    if (watched) a.store.setWatching(watched.watches);
    // Its deadline is a due item of the actor's alarm.
    if (spec.req.timeoutSeconds) await a.schedule();
  }
  const save = () => a.queue.saveProgress(row, progress);

  // fetched: its inputs' files downloaded, kept and transcribed, once, before its start is recorded.
  if (!progress.outcome && !progress.inputs && hasMedia(spec.req.inputs)) {
    progress.inputs = await a.fetchMedia(spec, runId);
    save();
  }
  if (!progress.outcome) {
    await recordStart(a, row, spec, progress);
    progress.outcome = await a.turn(spec, runId, progress, {
      save,
      stepped: async (appended) => {
        // The checkpoint holds the step's messages (`run_steps`): a restart resumes after this
        // step. D1 gets them with the run's finalize, in the run's one round trip.
        save();
        yieldCalled(a, runId, appended);
        await a.noticeTools(spec, runId, progress.loop.produced, appended);
      },
    });
    // The session's state at the run's end: steers left over, the signal log, watches, a yield.
    const stateVersion = endState(a, runId, spec, progress, progress.outcome);
    const entry = a.store.entry();
    if (entry && entry.sessionId === spec.sessionId) {
      // The run is the head: whatever else the queue holds waits behind it.
      const accounted = accountRun(entry, progress, progress.outcome, a.queue.othersWaiting());
      a.store.saveEntry({ ...accounted, stateVersion });
    } else if (entry) {
      a.store.saveEntry({ ...entry, stateVersion });
    }
    // ended: its last message is held in the checkpoint with the outcome (the run's end removes
    // both with its row; no step row is written for it).
    a.queue.saveProgress(row, progress, true);
  }
  return finalize(a, row, spec, progress, progress.outcome);
}

/**
 * `started` in D1 when `session.writeBehind` is off: the run marked running, the entry showing
 * it, its inputs and what a resumed run produced appended. Otherwise its finalize writes it.
 */
async function recordStart(
  a: LifecycleHost,
  row: QueueRow,
  spec: QueuedRun,
  progress: RunProgress,
): Promise<void> {
  const { req } = spec;
  const runId = row.run_id;
  const entry = a.store.entry();
  const messages: TranscriptMessage[] = [
    ...inputMessages(runId, progress.inputs ?? req.inputs),
    ...progress.loop.produced.slice(progress.stored ?? 0),
  ];
  await a.records.runStarted({
    run: {
      ...runRecordOf(runId, spec, row.enqueued_at),
      status: "running",
      startedAt: progress.startedAt,
    },
    ...(entry ? { entry: { ...entry, runStatus: "running" } } : {}),
    messages,
    behind: a.config.session.writeBehind,
  });
  a.store.markHistory(spec.sessionId);
}
