/**
 * What the bench's counting entry (db-load-worker.ts) tallies of a gateway's storage load and
 * bench/db-load.ts reads from `GET /__bench/db-counts`. Types only.
 */
export type Origin = "worker" | "actor";

export interface Tally {
  d1: {
    statements: number;
    roundTrips: number;
    byOrigin: Record<Origin, { statements: number; roundTrips: number }>;
    /** Round trips by call: first, all, run, raw, batch, exec, dump. */
    byCall: Record<string, number>;
    /** Statements by `<origin> <SQL, whitespace folded, cut>`. */
    sql: Record<string, number>;
  };
  /**
   * `platform`: statements of miniflare's own wrapper of the class (its `__miniflare_*` tables),
   * kept out of `statements` and `execs`.
   */
  doSql: { execs: number; statements: number; platform: number; sql: Record<string, number> };
  /** Calls of the actor's storage methods other than SQL, by name (alarms, key-value API…). */
  doCalls: Record<string, number>;
  /** SessionActor instances constructed in this isolate. */
  actors: number;
  /** Every actor's storage patch took, and `ctx.storage` / `.sql` are the same objects on every read. */
  patchedOk: boolean;
}
