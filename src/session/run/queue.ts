/**
 * A SessionActor's durable FIFO run queue (DO SQLite), and each run's checkpoint: the queue row
 * holds a run's request (`spec`), its state, its checkpoint (how far its turn got), its
 * attempts and starts, when it may be attempted again and its deadline; `run_steps` holds the
 * messages its turn produced, one row per step, so a save writes what is new. Runs are
 * attempted in order, one at a time (run/lifecycle.ts): the head is the run being seen to.
 * What the queue knows, it reads from its table; the one attempt under way keeps what it has
 * counted but not written yet (see `Attempt`). A new row's `pos` is the largest plus one
 * (SQLite's rowid): the queue stays in order without AUTOINCREMENT's counter row, and a run id
 * is looked up among a few rows without an index (storage/schema.ts).
 */
import type { TranscriptMessage } from "../../transcript/message";
import {
  type CompactionProgress,
  progressCodec,
  type QueuedRun,
  queuedRunCodec,
  type RunProgress,
  stepCodec,
} from "../storage/documents";

export type { CompactionProgress, QueuedRun, RunProgress };

export interface QueueRow {
  pos: number;
  run_id: string;
  state: "queued" | "running";
  spec: string;
  checkpoint: string | null;
  enqueued_at: number;
  /** Attempts that failed with an error. */
  attempts: number;
  /** Executions started, interrupted ones (the process stopped) included. */
  starts: number;
  retry_at: number | null;
  last_error: string | null;
  /** When a running run with `timeoutSeconds` times out (its start + the timeout). */
  deadline: number | null;
  [key: string]: SqlStorageValue;
}

export function specOf(row: QueueRow): QueuedRun {
  return queuedRunCodec.decode(row.spec);
}

/** A run is executed at most this many times; then it ends `error` with its last cause. */
export const MAX_RUN_ATTEMPTS = 3;
/** A run started this many times in a row without storing a step (interrupted each time) ends `error`. */
export const MAX_RUN_STARTS = 10;
/** Wait before attempt n + 1 after n failed attempts. */
export const RUN_RETRY_DELAYS_MS = [2_000, 10_000];

/**
 * The checkpoint as stored, without the produced messages (they are in `run_steps`): enough
 * for its start time and stage; `RunQueue.progress` reads the whole of it.
 */
export function progressOf(row: QueueRow): RunProgress | undefined {
  return row.checkpoint ? progressCodec.decode(row.checkpoint) : undefined;
}

/**
 * The attempt under way (one at a time, on the head): its start, counted when it began and
 * written with its first checkpoint (a first start costs no write of its own); how many of its
 * steps `run_steps` holds; whether it stored a step (progress: its starts go back to zero).
 */
interface Attempt {
  pos: number;
  starts: number;
  startsWritten: boolean;
  stored: number;
  advanced: boolean;
}

export class RunQueue {
  private attempt: Attempt | undefined;
  /**
   * The first two rows and how many the table holds, as the table holds them: the scheduler,
   * admission and the lifecycle ask for the head, its due times, whether others wait and how
   * many do several times a message. This instance is the table's only writer, and each of its
   * writes returns the rows it changed (`RETURNING *`), which replace their copies here; a
   * removal that leaves a row beyond the two unread forgets them. Kept for 3% of workerd CPU
   * per message or more (npm run ab, docs/decisions.md "CPU per message and per read").
   * Callers never change the rows they get.
   */
  private front: { rows: QueueRow[]; total: number } | undefined;

  constructor(private readonly sql: SqlStorage) {}

  private frontRows(): { rows: QueueRow[]; total: number } {
    if (this.front) return this.front;
    const read = this.sql
      .exec<QueueRow & { total: number }>(
        `SELECT *, (SELECT COUNT(*) FROM queue) AS total FROM queue ORDER BY pos LIMIT 2`,
      )
      .toArray();
    this.front = { rows: read.map(({ total: _, ...row }) => row as QueueRow), total: read[0]?.total ?? 0 };
    return this.front;
  }

  /** An update of one row by `pos`: its copy in `front` becomes the row as written. */
  private update(query: string, ...params: SqlStorageValue[]): void {
    const row = this.sql.exec<QueueRow>(`${query} RETURNING *`, ...params).toArray()[0];
    if (row && this.front) this.front.rows = this.front.rows.map((r) => (r.pos === row.pos ? row : r));
  }

  rows(): QueueRow[] {
    return this.sql.exec<QueueRow>(`SELECT * FROM queue ORDER BY pos`).toArray();
  }

  /**
   * What admission needs: how many runs the queue holds, how many of them wait, and the newest
   * waiting run (collect mode merges into it). From `front` when it holds the whole queue.
   */
  summary(): { total: number; waiting: number; newestWaiting: QueueRow | undefined } {
    const front = this.frontRows();
    if (front.total === front.rows.length) {
      const waiting = front.rows.filter((r) => r.state === "queued");
      return { total: front.total, waiting: waiting.length, newestWaiting: waiting.at(-1) };
    }
    const rows = this.sql
      .exec<QueueRow & { total: number; waiting: number }>(
        `SELECT q.*, (SELECT COUNT(*) FROM queue) AS total,
           (SELECT COUNT(*) FROM queue WHERE state = 'queued') AS waiting
         FROM (SELECT 1) LEFT JOIN (
           SELECT * FROM queue WHERE state = 'queued' ORDER BY pos DESC LIMIT 1) q`,
      )
      .toArray();
    const first = rows[0];
    if (!first) return { total: 0, waiting: 0, newestWaiting: undefined };
    const { total, waiting, ...row } = first;
    // The LEFT JOIN gives null columns when nothing waits.
    return { total, waiting, newestWaiting: row.pos === null ? undefined : (row as QueueRow) };
  }

  head(): QueueRow | undefined {
    return this.frontRows().rows[0];
  }

  byRunId(runId: string): QueueRow | undefined {
    return this.sql.exec<QueueRow>(`SELECT * FROM queue WHERE run_id = ?`, runId).toArray()[0];
  }

  /** Whether runs other than the head wait behind it. */
  othersWaiting(): boolean {
    return this.frontRows().total > 1;
  }

  /**
   * The queue's due items (see scheduler.ts): when the head may next be executed (now, or after
   * a failed attempt's backoff), and when the running head times out.
   */
  due(now: number): { head?: number; deadline?: number } {
    const head = this.frontRows().rows[0];
    if (!head) return {};
    return {
      head: Math.max(now, head.retry_at ?? 0),
      ...(head.deadline !== null ? { deadline: head.deadline } : {}),
    };
  }

  /** Adds a run at the tail. */
  insert(runId: string, spec: QueuedRun, now: number): void {
    const row = this.sql
      .exec<QueueRow>(
        `INSERT INTO queue (run_id, state, spec, enqueued_at) VALUES (?, 'queued', ?, ?) RETURNING *`,
        runId,
        queuedRunCodec.encode(spec),
        now,
      )
      .one();
    if (this.front) {
      this.front.total++;
      if (this.front.rows.length < 2) this.front.rows = [...this.front.rows, row];
    }
  }

  updateSpec(pos: number, spec: QueuedRun): void {
    this.update(`UPDATE queue SET spec = ? WHERE pos = ?`, queuedRunCodec.encode(spec), pos);
  }

  /**
   * Marks the row running with its first checkpoint (a run starting has no steps stored), and
   * its deadline when its request sets a timeout.
   */
  start(row: QueueRow, progress: RunProgress, timeoutSeconds: number | undefined): void {
    if (this.attempt?.pos === row.pos) this.attempt.stored = 0;
    const deadline = timeoutSeconds && timeoutSeconds > 0 ? progress.startedAt + timeoutSeconds * 1000 : null;
    this.save(row, progress, { starting: true, deadline });
  }

  /**
   * The whole checkpoint of a started run: its produced messages read back from `run_steps`
   * (placeholders), or held in the checkpoint itself (a run's last message, saved with its
   * outcome; a checkpoint saved whole by an earlier version).
   */
  progress(row: QueueRow): RunProgress | undefined {
    const progress = progressOf(row);
    if (!progress) return undefined;
    const produced = progress.loop.produced as Array<TranscriptMessage | 0>;
    const n = produced.filter((m) => m === 0).length;
    if (this.attempt?.pos === row.pos) this.attempt.stored = n;
    if (n === 0) return progress;
    const steps = this.sql
      .exec<{ message: string }>(
        `SELECT message FROM run_steps WHERE run_id = ? ORDER BY idx LIMIT ?`,
        row.run_id,
        n,
      )
      .toArray()
      .map((s) => stepCodec.decode(s.message));
    if (steps.length !== n) {
      throw new Error(`checkpoint of run ${row.run_id} names ${n} steps, ${steps.length} are stored`);
    }
    let next = 0;
    progress.loop.produced = produced.map((m) => (m === 0 ? (steps[next++] as TranscriptMessage) : m));
    return progress;
  }

  /**
   * Saves the checkpoint: the steps not stored yet, one row each, and the rest of the
   * checkpoint with `produced` reduced to its length (placeholders), so a save stays small.
   * `holding`: the steps not stored yet stay in the checkpoint instead (a run's last message,
   * saved with its outcome, which the run's end removes with its row: no step row written).
   */
  saveProgress(row: QueueRow, progress: RunProgress, holding = false): void {
    this.save(row, progress, { holding });
  }

  private save(
    row: QueueRow,
    progress: RunProgress,
    opts: { starting?: boolean; holding?: boolean; deadline?: number | null },
  ): void {
    const produced = progress.loop.produced;
    const attempt = this.attempt?.pos === row.pos ? this.attempt : undefined;
    const stored =
      attempt?.stored ??
      this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM run_steps WHERE run_id = ?`, row.run_id).one()
        .n;
    if (!opts.holding) {
      for (let i = stored; i < produced.length; i++) {
        this.sql.exec(
          `INSERT OR REPLACE INTO run_steps (run_id, idx, message) VALUES (?, ?, ?)`,
          row.run_id,
          i,
          stepCodec.encode(produced[i] as TranscriptMessage),
        );
      }
      if (attempt) attempt.stored = produced.length;
    }
    const kept = opts.holding ? stored : produced.length;
    const slim = {
      ...progress,
      loop: { ...progress.loop, produced: produced.map((m, i) => (i < kept ? (0 as const) : m)) },
    };
    const checkpoint = progressCodec.encode(slim as unknown as RunProgress);
    // A stored step is progress: the interruptions before it say nothing of a crash loop.
    const stepped = produced.length > stored;
    if (stepped && attempt) attempt.advanced = true;
    const starts = stepped
      ? 0
      : opts.starting && attempt && !attempt.startsWritten
        ? attempt.starts
        : undefined;
    if (attempt && starts !== undefined) attempt.startsWritten = true;
    const sets = [
      ...(opts.starting ? ["state = 'running'", "retry_at = NULL", "deadline = ?"] : []),
      "checkpoint = ?",
      ...(starts !== undefined ? ["starts = ?"] : []),
    ];
    this.update(
      `UPDATE queue SET ${sets.join(", ")} WHERE pos = ?`,
      ...(opts.starting ? [opts.deadline ?? null] : []),
      checkpoint,
      ...(starts !== undefined ? [starts] : []),
      row.pos,
    );
  }

  /**
   * Counts an execution of the run before it starts; returns the starts including this one. A
   * first start is written by `start`, which the lifecycle calls in this synchronous step (or by
   * `attemptFailed` when it fails before).
   */
  beginAttempt(row: QueueRow): number {
    const starts = (row.starts ?? 0) + 1;
    const first = row.checkpoint === null;
    this.attempt = { pos: row.pos, starts, startsWritten: !first, stored: 0, advanced: false };
    if (!first) this.update(`UPDATE queue SET starts = ?, retry_at = NULL WHERE pos = ?`, starts, row.pos);
    return starts;
  }

  /** An attempt failed: its cause, and when the next may start; returns the failures so far. */
  attemptFailed(row: QueueRow, cause: string, retryAt: number): number {
    const attempts = (row.attempts ?? 0) + 1;
    const attempt = this.attempt?.pos === row.pos ? this.attempt : undefined;
    const starts = attempt?.advanced ? 0 : (attempt?.starts ?? row.starts ?? 0);
    this.attempt = undefined;
    this.update(
      `UPDATE queue SET attempts = ?, starts = ?, last_error = ?, retry_at = ? WHERE pos = ?`,
      attempts,
      starts,
      cause,
      retryAt,
      row.pos,
    );
    return attempts;
  }

  remove(row: Pick<QueueRow, "pos" | "run_id">): void {
    const attempt = this.attempt?.pos === row.pos ? this.attempt : undefined;
    this.sql.exec(`DELETE FROM queue WHERE pos = ?`, row.pos);
    if (this.front?.rows.some((r) => r.pos === row.pos)) {
      const rows = this.front.rows.filter((r) => r.pos !== row.pos);
      const total = this.front.total - 1;
      // A row beyond the two it held moves up unread: read again when asked.
      this.front = rows.length === Math.min(total, 2) ? { rows, total } : undefined;
    } else {
      this.front = undefined;
    }
    // No step stored by the attempt that ends it: nothing to delete.
    if (!attempt || attempt.stored > 0) this.sql.exec(`DELETE FROM run_steps WHERE run_id = ?`, row.run_id);
    if (attempt) this.attempt = undefined;
  }
}
