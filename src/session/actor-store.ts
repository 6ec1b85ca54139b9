/**
 * A SessionActor's own storage (DO SQLite), apart from its run queue, delivery outbox, turn
 * context copy and records journal: the versioned schema of all its tables, a kv table served
 * from memory after the first read, the session entry, which transcripts this actor has
 * appended to, and per run id (`run_ids`) the answer given when it was accepted (for dedupe;
 * a sub-agent announcement's id too) and its outcome once it finished (for waits). Everything
 * here is synchronous, so callers can build critical sections on it.
 *
 * Cloudflare bills each row a Durable Object writes, index rows included: tables keyed by text
 * are WITHOUT ROWID (one row per write, not a row and its key's index entry), none counts ids
 * with AUTOINCREMENT, and a run's accept and outcome are one row.
 */
import type { SessionRow } from "../db/queries";
import { DeliveryOutbox } from "../delivery/outbox";
import type { Accepted } from "../runs/schemas";
import type { RunOutcome } from "../runs/types";
import { ContextStore } from "./context-store";
import { acceptedCodec, entryCodec, outcomeCodec } from "./durable-state";
import { RecordsJournal } from "./records-journal";
import { RunQueue } from "./run-queue";

const SCHEMA_VERSION = 7;
/** How long run ids are remembered for dedupe (webhook retries come within minutes or hours). */
const RECEIVED_RETENTION_MS = 30 * 24 * 3_600_000;
const SWEEP_INTERVAL_MS = 3_600_000;

export type { Accepted };

/** What ends the id of a sub-agent announcement recorded with the accepted run ids. */
export const ANNOUNCEMENT_SUFFIX = ":announcement";

export class ActorStore {
  static readonly KV_DDL =
    `CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID`;
  static readonly RUN_IDS_DDL = `CREATE TABLE IF NOT EXISTS run_ids (
    run_id TEXT PRIMARY KEY, result TEXT, outcome TEXT, at INTEGER NOT NULL) WITHOUT ROWID`;
  /** Every table of a new actor, in its current shape (SCHEMA_VERSION). */
  static readonly DDL_CURRENT = [
    ...RunQueue.DDL_CURRENT,
    ActorStore.RUN_IDS_DDL,
    DeliveryOutbox.DDL_CURRENT,
    ContextStore.DDL_CURRENT,
    RecordsJournal.DDL_CURRENT,
  ];

  private readonly kvCache = new Map<string, string | null>();

  constructor(readonly sql: SqlStorage) {
    // Versioned, idempotent DDL run on every wake. A new actor creates its tables in their
    // current shape; one of an earlier version is migrated step by step.
    sql.exec(ActorStore.KV_DDL);
    const version = Number(this.kvGet("schema_version") ?? 0);
    if (version === 0 && !sql.exec(`SELECT 1 FROM sqlite_master WHERE name = 'queue'`).toArray().length) {
      for (const ddl of ActorStore.DDL_CURRENT) sql.exec(ddl);
      this.kvSet("schema_version", String(SCHEMA_VERSION));
      return;
    }
    if (version < 1) {
      sql.exec(RunQueue.DDL);
      sql.exec(
        `CREATE TABLE IF NOT EXISTS received (run_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL)`,
      );
      sql.exec(
        `CREATE TABLE IF NOT EXISTS finished (run_id TEXT PRIMARY KEY, outcome TEXT NOT NULL, at INTEGER NOT NULL)`,
      );
      sql.exec(DeliveryOutbox.DDL);
    }
    if (version < 2) sql.exec(ContextStore.DDL);
    if (version < 3) for (const ddl of RunQueue.DDL_V3) sql.exec(ddl);
    if (version < 4) sql.exec(RecordsJournal.DDL);
    if (version < 5) sql.exec(RecordsJournal.DDL_V5);
    if (version < 6) for (const ddl of DeliveryOutbox.DDL_V6) sql.exec(ddl);
    if (version < 7) migrateToV7(sql);
    if (version < SCHEMA_VERSION) this.kvSet("schema_version", String(SCHEMA_VERSION));
  }

  /**
   * kv reads are served from memory after the first: this instance is the only writer of its
   * storage and every kv write goes through kvSet/kvDelete, so the copy cannot go stale.
   */
  kvGet(k: string): string | undefined {
    if (this.kvCache.has(k)) return this.kvCache.get(k) ?? undefined;
    const v = this.sql.exec<{ v: string }>(`SELECT v FROM kv WHERE k = ?`, k).toArray()[0]?.v;
    this.kvCache.set(k, v ?? null);
    return v;
  }

  kvSet(k: string, v: string): void {
    this.sql.exec(`INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`, k, v);
    this.kvCache.set(k, v);
  }

  kvDelete(k: string): void {
    this.sql.exec(`DELETE FROM kv WHERE k = ?`, k);
    this.kvCache.set(k, null);
  }

  entry(): SessionRow | undefined {
    const raw = this.kvGet("entry");
    return raw ? entryCodec.decode(raw) : undefined;
  }

  saveEntry(entry: SessionRow | undefined): void {
    if (entry) this.kvSet("entry", entryCodec.encode(entry));
    else this.kvDelete("entry");
  }

  /** Whether this actor has appended to `sessionId` before (so a turn must load older context). */
  hasHistory(sessionId: string): boolean {
    return this.kvGet(`history:${sessionId}`) !== undefined;
  }

  markHistory(sessionId: string): void {
    if (!this.hasHistory(sessionId)) this.kvSet(`history:${sessionId}`, "1");
  }

  /** The answer given when `runId` was accepted, if it was. */
  accepted(runId: string): Accepted | undefined {
    // An announcement's row (see `recordAnnounced`) is no answer to a run.
    if (runId.endsWith(ANNOUNCEMENT_SUFFIX)) return undefined;
    const row = this.sql
      .exec<{ result: string | null }>(`SELECT result FROM run_ids WHERE run_id = ?`, runId)
      .toArray()[0];
    return row?.result ? acceptedCodec.decode(row.result) : undefined;
  }

  recordAccepted(runId: string, result: Accepted, at: number): void {
    this.sql.exec(
      `INSERT INTO run_ids (run_id, result, at) VALUES (?, ?, ?)
       ON CONFLICT (run_id) DO UPDATE SET result = excluded.result`,
      runId,
      acceptedCodec.encode(result),
      at,
    );
  }

  /**
   * Whether the sub-agent announcement `id` was recorded here. Kept with the accepted run ids
   * (its id, `<runId>:announcement`, is never a run id), and forgotten with them.
   */
  announced(id: string): boolean {
    return this.sql.exec(`SELECT 1 FROM run_ids WHERE run_id = ?`, id).toArray().length > 0;
  }

  recordAnnounced(id: string, at: number): void {
    this.sql.exec(
      `INSERT OR IGNORE INTO run_ids (run_id, result, at) VALUES (?, ?, ?)`,
      id,
      JSON.stringify({ announcement: id }),
      at,
    );
  }

  finishedOutcome(runId: string): RunOutcome | undefined {
    const row = this.sql
      .exec<{ outcome: string | null }>(`SELECT outcome FROM run_ids WHERE run_id = ?`, runId)
      .toArray()[0];
    return row?.outcome ? outcomeCodec.decode(row.outcome) : undefined;
  }

  recordFinished(outcome: RunOutcome, at: number): void {
    // The run's accept row, with its outcome (one row per run); kept from now for dedupe and waits.
    this.sql.exec(
      `INSERT INTO run_ids (run_id, outcome, at) VALUES (?, ?, ?)
       ON CONFLICT (run_id) DO UPDATE SET outcome = excluded.outcome, at = excluded.at`,
      outcome.runId,
      outcomeCodec.encode(outcome),
      at,
    );
  }

  /** Forgets old run ids (dedupe and wait records), at most hourly: each sweep scans the table. */
  sweepRunIds(now: number): void {
    if (now - Number(this.kvGet("swept_at") ?? 0) < SWEEP_INTERVAL_MS) return;
    this.sql.exec(`DELETE FROM run_ids WHERE at < ?`, now - RECEIVED_RETENTION_MS);
    this.kvSet("swept_at", String(now));
  }
}

/**
 * Version 7: the tables keyed by text become WITHOUT ROWID, the queue and the context copy lose
 * AUTOINCREMENT (and the queue its unique run id, the context its ord key), and the accepted run
 * ids and finished outcomes become one table; each table is rebuilt with its rows.
 */
function migrateToV7(sql: SqlStorage): void {
  const rebuild = (table: string, ddl: string, columns: string) => {
    sql.exec(`ALTER TABLE ${table} RENAME TO ${table}_v6`);
    sql.exec(ddl);
    sql.exec(`INSERT INTO ${table} (${columns}) SELECT ${columns} FROM ${table}_v6`);
    sql.exec(`DROP TABLE ${table}_v6`);
  };
  rebuild("kv", ActorStore.KV_DDL, "k, v");
  const [queue, steps] = RunQueue.DDL_CURRENT as [string, string];
  rebuild(
    "queue",
    queue,
    "pos, run_id, state, spec, checkpoint, enqueued_at, attempts, starts, retry_at, last_error",
  );
  rebuild("run_steps", steps, "run_id, idx, message");
  rebuild(
    "outbox",
    DeliveryOutbox.DDL_CURRENT,
    "delivery_id, payload, attempts, next_at, done, state, state_v, record_at, created_at",
  );
  rebuild("context", ContextStore.DDL_CURRENT, "session_id, id, ord, run_id, tokens, message");
  sql.exec(ActorStore.RUN_IDS_DDL);
  sql.exec(`INSERT INTO run_ids (run_id, result, at) SELECT run_id, result, at FROM received`);
  sql.exec(
    `INSERT INTO run_ids (run_id, outcome, at) SELECT run_id, outcome, at FROM finished WHERE true
     ON CONFLICT (run_id) DO UPDATE SET outcome = excluded.outcome, at = MAX(run_ids.at, excluded.at)`,
  );
  sql.exec(`DROP TABLE received`);
  sql.exec(`DROP TABLE finished`);
}
