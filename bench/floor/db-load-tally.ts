/**
 * What the bench's counting entry (db-load-worker.ts) tallies of a gateway's storage load and
 * bench/db-load.ts reads from `GET /__bench/db-counts`. Types only.
 */
export type Origin = "worker" | "actor";

/** One D1 binding's share of the load. */
export interface BindingTally {
  statements: number;
  roundTrips: number;
  /**
   * Milliseconds during which at least one call to this binding was waiting for its answer (the
   * union of the calls' intervals, so overlapping calls are not counted twice): under
   * `wrangler dev`, the local D1's time per statement, transport included.
   */
  busyMs: number;
}

export interface Tally {
  /** This isolate's id: a change means workerd started it again, and the counts began anew. */
  isolate: string;
  d1: {
    statements: number;
    roundTrips: number;
    byOrigin: Record<Origin, { statements: number; roundTrips: number }>;
    /** By D1 binding name (every binding of `storage.d1`), in the order first used. */
    byBinding: Record<string, BindingTally>;
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
  /**
   * Requests to SessionActors: calls through a stub (RPC methods and `fetch`, from the Worker or
   * from another actor), and alarm invocations; by method name.
   */
  doRequests: { total: number; byMethod: Record<string, number> };
  /** SessionActor instances constructed in this isolate. */
  actors: number;
  /** Every actor's storage patch took, and `ctx.storage` / `.sql` are the same objects on every read. */
  patchedOk: boolean;
}

/** What `GET /__bench/d1-state` reads of one database (through the real binding, not counted). */
export interface DatabaseState {
  runs: number;
  activeRuns: number;
  deliveries: number;
  openDeliveries: number;
  sessions: number;
  /** The database's size in bytes (D1's `meta.size_after`). */
  sizeBytes: number;
}

/** `GET /__bench/d1-state`: the sums over every database of `storage.d1`, and each one's. */
export interface D1State extends DatabaseState {
  byBinding: Record<string, DatabaseState>;
}
