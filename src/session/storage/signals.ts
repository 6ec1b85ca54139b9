/**
 * A session's signal log (SPEC §20 "State awareness"), in its actor's SQLite: one row per
 * material change, `{ version, kind, actor, at, summary, runId?, outcome? }`, a one-line summary
 * and never message content. The newest version is the session's `stateVersion` (kept on its
 * entry, so listings read it from D1). Kept for 30 days and at most 1,000 events; a reader
 * whose version is older than what is kept is told so (`historyGap`).
 */

export type SignalKind =
  | "human_message"
  | "run_completed"
  | "run_failed"
  | "compacted"
  | "reset"
  | "settings_changed";

export interface Signal {
  version: number;
  kind: SignalKind;
  actor: "human" | "agent" | "system";
  at: number;
  summary: string;
  runId?: string;
  outcome?: "error" | "timeout" | "aborted";
  /** The session that caused it, when another session did (a watcher's own changes are not news to it). */
  by?: string;
}

interface SignalRow {
  version: number;
  kind: string;
  actor: string;
  at: number;
  summary: string;
  run_id: string | null;
  outcome: string | null;
  by: string | null;
  [key: string]: SqlStorageValue;
}

export const SIGNALS_KEPT = 1_000;
export const SIGNALS_KEPT_MS = 30 * 24 * 3_600_000;
/** The most events one read returns (oldest first). */
export const SIGNALS_READ_MAX = 200;
/** Pruned every this many versions (a prune is one statement). */
const PRUNE_EVERY = 64;

function signalOf(r: SignalRow): Signal {
  return {
    version: r.version,
    kind: r.kind as SignalKind,
    actor: r.actor as Signal["actor"],
    at: r.at,
    summary: r.summary,
    ...(r.run_id ? { runId: r.run_id } : {}),
    ...(r.outcome ? { outcome: r.outcome as NonNullable<Signal["outcome"]> } : {}),
    ...(r.by ? { by: r.by } : {}),
  };
}

export class SignalLog {
  constructor(private readonly sql: SqlStorage) {}

  /** Records an event (one row); returns its version, the session's new stateVersion. */
  record(e: Omit<Signal, "version">): number {
    const { version } = this.sql
      .exec<{ version: number }>(
        `INSERT INTO signals (kind, actor, at, summary, run_id, outcome, by) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING version`,
        e.kind,
        e.actor,
        e.at,
        e.summary.slice(0, 200),
        e.runId ?? null,
        e.outcome ?? null,
        e.by ?? null,
      )
      .one();
    if (version % PRUNE_EVERY === 0) {
      this.sql.exec(
        `DELETE FROM signals WHERE version <= ? OR at < ?`,
        version - SIGNALS_KEPT,
        e.at - SIGNALS_KEPT_MS,
      );
    }
    return version;
  }

  /**
   * The events after `version`, oldest first (at most SIGNALS_READ_MAX), and whether some after
   * it are no longer kept (`stateVersion`: the session's newest version, from its entry).
   */
  since(version: number, stateVersion: number): { events: Signal[]; historyGap: boolean } {
    const rows = this.sql
      .exec<SignalRow>(
        `SELECT * FROM signals WHERE version > ? ORDER BY version LIMIT ?`,
        version,
        SIGNALS_READ_MAX,
      )
      .toArray();
    // Versions are consecutive: a first event kept later than the next one means some were dropped.
    const next = rows[0]?.version ?? stateVersion + 1;
    return { events: rows.map(signalOf), historyGap: version < stateVersion && next > version + 1 };
  }
}
