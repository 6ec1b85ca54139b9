import type { TranscriptMessage } from "../transcript/message";
import {
  type CompactionProgress,
  progressCodec,
  type QueuedRun,
  queuedRunCodec,
  type RunProgress,
  stepCodec,
} from "./durable-state";

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

export class RunQueue {
  static readonly DDL = `CREATE TABLE IF NOT EXISTS queue (
    pos INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, state TEXT NOT NULL,
    spec TEXT NOT NULL, checkpoint TEXT, enqueued_at INTEGER NOT NULL)`;
  /**
   * The queue and its steps as a new actor creates them (the current shape, no migrations). A
   * new row's `pos` is the largest plus one (SQLite's rowid), so the queue stays in order without
   * AUTOINCREMENT's counter row; a run id is looked up among a few rows, without an index.
   */
  static readonly DDL_CURRENT = [
    `CREATE TABLE IF NOT EXISTS queue (
      pos INTEGER PRIMARY KEY, run_id TEXT NOT NULL, state TEXT NOT NULL,
      spec TEXT NOT NULL, checkpoint TEXT, enqueued_at INTEGER NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0, starts INTEGER NOT NULL DEFAULT 0, retry_at INTEGER, last_error TEXT)`,
    `CREATE TABLE IF NOT EXISTS run_steps (
      run_id TEXT NOT NULL, idx INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (run_id, idx)) WITHOUT ROWID`,
  ];
  /** Schema version 3: attempts, per-step progress. */
  static readonly DDL_V3 = [
    `ALTER TABLE queue ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE queue ADD COLUMN starts INTEGER NOT NULL DEFAULT 0`,
    `ALTER TABLE queue ADD COLUMN retry_at INTEGER`,
    `ALTER TABLE queue ADD COLUMN last_error TEXT`,
    `CREATE TABLE IF NOT EXISTS run_steps (
      run_id TEXT NOT NULL, idx INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (run_id, idx))`,
  ];

  /** Steps known to be stored per run (a cache; this instance is its storage's only writer). */
  private readonly storedSteps = new Map<string, number>();
  /**
   * What this instance knows of its queue, as the only writer of its storage: the number of
   * rows and the head's `retry_at` (`undefined`: not known; read when asked). Unknown after a
   * restart until the first read.
   */
  private known: { count: number; headRetryAt: number | null | undefined } | undefined;
  /** A first start counted by `beginAttempt`, written with the row's first checkpoint. */
  private readonly unwrittenStarts = new Map<number, number>();
  /** Rows whose current attempt stored a step (their starts are back to zero). */
  private readonly advanced = new Set<number>();
  /**
   * The head as this instance inserted it into an empty queue, until the next write: the step
   * that starts it at once reads it without a query.
   */
  private insertedHead: QueueRow | undefined;

  constructor(private readonly sql: SqlStorage) {}

  rows(): QueueRow[] {
    return this.sql.exec<QueueRow>(`SELECT * FROM queue ORDER BY pos`).toArray();
  }

  /**
   * What admission needs in one read: how many runs the queue holds, how many of them wait,
   * and the newest waiting run (collect mode merges into it).
   */
  summary(): { total: number; waiting: number; newestWaiting: QueueRow | undefined } {
    if (this.count() === 0) return { total: 0, waiting: 0, newestWaiting: undefined };
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
    if (this.insertedHead) return this.insertedHead;
    return this.sql.exec<QueueRow>(`SELECT * FROM queue ORDER BY pos LIMIT 1`).toArray()[0];
  }

  byRunId(runId: string): QueueRow | undefined {
    return this.sql.exec<QueueRow>(`SELECT * FROM queue WHERE run_id = ?`, runId).toArray()[0];
  }

  /** Runs waiting to start (the running one not counted). */
  waitingCount(): number {
    return this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM queue WHERE state = 'queued'`).one().n;
  }

  /** How many runs the queue holds (running included). */
  count(): number {
    this.known ??= {
      count: this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM queue`).one().n,
      headRetryAt: undefined,
    };
    return this.known.count;
  }

  /** Whether runs other than the head wait behind it. */
  othersWaiting(): boolean {
    return this.count() > 1;
  }

  /** Adds a run at the tail; returns its stored spec. */
  insert(runId: string, spec: QueuedRun, now: number): string {
    const json = queuedRunCodec.encode(spec);
    const count = this.count();
    const { pos } = this.sql
      .exec<{ pos: number }>(
        `INSERT INTO queue (run_id, state, spec, enqueued_at) VALUES (?, 'queued', ?, ?) RETURNING pos`,
        runId,
        json,
        now,
      )
      .one();
    this.insertedHead =
      count === 0
        ? {
            pos,
            run_id: runId,
            state: "queued",
            spec: json,
            checkpoint: null,
            enqueued_at: now,
            attempts: 0,
            starts: 0,
            retry_at: null,
            last_error: null,
          }
        : undefined;
    // A row added to an empty queue is its head, due at once.
    this.known = { count: count + 1, headRetryAt: count === 0 ? null : this.known?.headRetryAt };
    return json;
  }

  updateSpec(pos: number, spec: QueuedRun): void {
    this.insertedHead = undefined;
    this.sql.exec(`UPDATE queue SET spec = ? WHERE pos = ?`, queuedRunCodec.encode(spec), pos);
  }

  /** Marks the row running with its first checkpoint (a run starting has no steps stored). */
  start(row: QueueRow, progress: RunProgress): void {
    this.storedSteps.set(row.run_id, 0);
    this.saveProgress(row, progress, true);
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
  saveProgress(row: QueueRow, progress: RunProgress, starting = false, holding = false): void {
    this.insertedHead = undefined;
    const produced = progress.loop.produced;
    const stored = this.storedSteps.get(row.run_id) ?? this.countSteps(row.run_id);
    if (!holding) {
      for (let i = stored; i < produced.length; i++) {
        this.sql.exec(
          `INSERT OR REPLACE INTO run_steps (run_id, idx, message) VALUES (?, ?, ?)`,
          row.run_id,
          i,
          stepCodec.encode(produced[i] as TranscriptMessage),
        );
      }
      this.storedSteps.set(row.run_id, produced.length);
    }
    const kept = holding ? stored : produced.length;
    const slim = {
      ...progress,
      loop: { ...progress.loop, produced: produced.map((m, i) => (i < kept ? (0 as const) : m)) },
    };
    const checkpoint = progressCodec.encode(slim as unknown as RunProgress);
    // A stored step is progress: the interruptions before it say nothing of a crash loop.
    const stepped = produced.length > stored;
    if (stepped) this.advanced.add(row.pos);
    const starts = stepped ? 0 : starting ? this.unwrittenStarts.get(row.pos) : undefined;
    if (starts !== undefined) {
      this.unwrittenStarts.delete(row.pos);
      this.sql.exec(
        starting
          ? `UPDATE queue SET state = 'running', checkpoint = ?, starts = ?, retry_at = NULL WHERE pos = ?`
          : `UPDATE queue SET checkpoint = ?, starts = ? WHERE pos = ?`,
        checkpoint,
        starts,
        row.pos,
      );
    } else {
      this.sql.exec(
        starting
          ? `UPDATE queue SET state = 'running', checkpoint = ? WHERE pos = ?`
          : `UPDATE queue SET checkpoint = ? WHERE pos = ?`,
        checkpoint,
        row.pos,
      );
    }
  }

  private countSteps(runId: string): number {
    return this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM run_steps WHERE run_id = ?`, runId).one()
      .n;
  }

  /**
   * Counts an execution of the run before it starts; returns the starts including this one.
   * Attempts are made on the head, so its retry time is known after.
   */
  beginAttempt(row: QueueRow): number {
    this.insertedHead = undefined;
    this.advanced.delete(row.pos);
    const starts = (row.starts ?? 0) + 1;
    if (row.checkpoint === null) {
      // A first start is written by `start`, which the executor calls in this synchronous step
      // (or by `attemptFailed` when it fails before).
      this.unwrittenStarts.set(row.pos, starts);
    } else {
      this.sql.exec(`UPDATE queue SET starts = ?, retry_at = NULL WHERE pos = ?`, starts, row.pos);
    }
    if (this.known) this.known.headRetryAt = null;
    return starts;
  }

  /** An attempt failed: its cause, and when the next may start; returns the failures so far. */
  attemptFailed(row: QueueRow, cause: string, retryAt: number): number {
    this.insertedHead = undefined;
    const attempts = (row.attempts ?? 0) + 1;
    const starts = this.advanced.has(row.pos) ? 0 : (this.unwrittenStarts.get(row.pos) ?? row.starts ?? 0);
    this.unwrittenStarts.delete(row.pos);
    const updated = this.sql
      .exec(
        `UPDATE queue SET attempts = ?, starts = ?, last_error = ?, retry_at = ? WHERE pos = ? RETURNING pos`,
        attempts,
        starts,
        cause,
        retryAt,
        row.pos,
      )
      .toArray().length;
    // Still queued, the row is still the head (nothing is put before it).
    if (updated && this.known) this.known.headRetryAt = retryAt;
    return attempts;
  }

  /** When the head may next be executed (now, or after a failed attempt's backoff). */
  headDueAt(now: number): number | undefined {
    if (this.count() === 0) return undefined;
    const known = this.known;
    if (known && known.headRetryAt !== undefined) return Math.max(now, known.headRetryAt ?? 0);
    const head = this.sql
      .exec<{ retry_at: number | null }>(`SELECT retry_at FROM queue ORDER BY pos LIMIT 1`)
      .toArray()[0];
    if (known) known.headRetryAt = head ? head.retry_at : undefined;
    if (!head) return undefined;
    return Math.max(now, head.retry_at ?? 0);
  }

  remove(row: Pick<QueueRow, "pos" | "run_id">): void {
    this.insertedHead = undefined;
    const removed = this.sql.exec(`DELETE FROM queue WHERE pos = ? RETURNING pos`, row.pos).toArray().length;
    // No step stored (this instance knows): nothing to delete.
    if (this.storedSteps.get(row.run_id) !== 0)
      this.sql.exec(`DELETE FROM run_steps WHERE run_id = ?`, row.run_id);
    this.storedSteps.delete(row.run_id);
    this.unwrittenStarts.delete(row.pos);
    this.advanced.delete(row.pos);
    // The next head's retry time is read when asked (it may have failed an attempt before).
    if (this.known) this.known = { count: this.known.count - removed, headRetryAt: undefined };
  }
}
