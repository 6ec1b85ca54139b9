/**
 * A SessionActor's own storage (DO SQLite), apart from its run queue, delivery outbox, turn
 * context copy and earlier versions' journal: a kv table served from memory after the first
 * read, the session entry, which transcripts this actor has appended to, and per run id
 * (`run_ids`) the answer given when it was accepted (for dedupe; a sub-agent announcement's id
 * too) and its outcome once it finished (for waits). Everything here is synchronous, so callers
 * can build critical sections on it. The schema of every table is storage/schema.ts.
 */
import type { SessionRow } from "../../db/queries";
import type { Accepted } from "../../runs/schemas";
import type { RunOutcome } from "../../runs/types";
import {
  acceptedCodec,
  entryCodec,
  outcomeCodec,
  type SteerState,
  steerCodec,
  watchingCodec,
  type YieldState,
  yieldCodec,
} from "./documents";
import { migrate } from "./schema";
import { SignalLog } from "./signals";

/** How long run ids are remembered for dedupe (webhook retries come within minutes or hours). */
const RECEIVED_RETENTION_MS = 30 * 24 * 3_600_000;
const SWEEP_INTERVAL_MS = 3_600_000;

export type { Accepted };

/** What ends the id of a sub-agent announcement recorded with the accepted run ids. */
export const ANNOUNCEMENT_SUFFIX = ":announcement";

export class ActorStore {
  private readonly kvCache = new Map<string, string | null>();
  /** The session's signal log (SPEC §20); its newest version is the entry's `stateVersion`. */
  readonly signals: SignalLog;

  constructor(readonly sql: SqlStorage) {
    migrate(sql);
    this.signals = new SignalLog(sql);
  }

  /**
   * kv reads are served from memory after the first: this instance is the only writer of its
   * storage and every kv write goes through kvSet/kvDelete, so the copy cannot go stale. Worth
   * 7% of workerd CPU per message (`npm run ab`, existing session, model over HTTP).
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
    // An announcement's row (see `keepAnnouncement`) is no answer to a run.
    if (runId.endsWith(ANNOUNCEMENT_SUFFIX)) return undefined;
    const row = this.sql
      .exec<{ result: string | null }>(`SELECT result FROM run_ids WHERE run_id = ?`, runId)
      .toArray()[0];
    return row?.result ? acceptedCodec.decode(row.result) : undefined;
  }

  keepAnswer(runId: string, result: Accepted, at: number): void {
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

  keepAnnouncement(id: string, at: number): void {
    this.sql.exec(
      `INSERT OR IGNORE INTO run_ids (run_id, result, at) VALUES (?, ?, ?)`,
      id,
      JSON.stringify({ announcement: id }),
      at,
    );
  }

  /** The yield this session is in (SPEC §20 `sessions_yield`), if any. */
  yielding(): YieldState | undefined {
    const raw = this.kvGet("yield");
    return raw ? yieldCodec.decode(raw) : undefined;
  }

  /** Starts, changes or (undefined) ends the session's yield. */
  setYielding(state: YieldState | undefined): void {
    if (state) this.kvSet("yield", yieldCodec.encode(state));
    else if (this.kvGet("yield") !== undefined) this.kvDelete("yield");
  }

  /** Messages waiting to steer the running run (SPEC §20), if any. */
  steers(): SteerState | undefined {
    const raw = this.kvGet("steer");
    return raw ? steerCodec.decode(raw) : undefined;
  }

  setSteers(state: SteerState | undefined): void {
    if (state?.items.length) this.kvSet("steer", steerCodec.encode(state));
    else if (this.kvGet("steer") !== undefined) this.kvDelete("steer");
  }

  /** The sessions this session watches (SPEC §20), oldest first. */
  watching(): Array<{ key: string; seen: number }> {
    const raw = this.kvGet("watching");
    return raw ? watchingCodec.decode(raw).watches : [];
  }

  setWatching(watches: Array<{ key: string; seen: number }>): void {
    if (watches.length) this.kvSet("watching", watchingCodec.encode({ watches }));
    else if (this.kvGet("watching") !== undefined) this.kvDelete("watching");
  }

  finishedOutcome(runId: string): RunOutcome | undefined {
    const row = this.sql
      .exec<{ outcome: string | null }>(`SELECT outcome FROM run_ids WHERE run_id = ?`, runId)
      .toArray()[0];
    return row?.outcome ? outcomeCodec.decode(row.outcome) : undefined;
  }

  keepOutcome(outcome: RunOutcome, at: number): void {
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
