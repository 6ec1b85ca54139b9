/**
 * What the bench's counting entry (db-load-worker.ts) tallies of a gateway's storage load and
 * bench/db-load.ts reads from `GET /__bench/db-counts`. Types only.
 */
export type Origin = "worker" | "actor";

/**
 * Rows as Cloudflare bills them: D1's `meta.rows_read` / `meta.rows_written` of each statement's
 * result, and a Durable Object SQL cursor's `rowsRead` / `rowsWritten` (index rows included: both
 * come from the SQLite engine D1 and SQLite-backed Durable Objects share).
 */
export interface Rows {
  rowsRead: number;
  rowsWritten: number;
}

/** One D1 binding's share of the load. */
export interface BindingTally extends Rows {
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
    byOrigin: Record<Origin, { statements: number; roundTrips: number } & Rows>;
    /** By D1 binding name (every binding of `storage.d1`), in the order first used. */
    byBinding: Record<string, BindingTally>;
    /** Round trips by call: first, all, run, raw, batch, exec, dump. */
    byCall: Record<string, number>;
    /** Statements by `<origin> <SQL, whitespace folded, cut>`. */
    sql: Record<string, number>;
    /** Rows read and written over every round trip whose answer carried D1's meta. */
    rowsRead: number;
    rowsWritten: number;
    /** Rows written and read by `<origin> <SQL>` (the keys of `sql`). */
    sqlRowsWritten: Record<string, number>;
    sqlRowsRead: Record<string, number>;
    /**
     * Round trips whose rows could not be read (no meta reached the entry: an `exec`, or a
     * `first`/`raw` when the runtime's D1 client is not the one the entry knows): their rows are
     * missing from the sums above.
     */
    unmetered: number;
  };
  /**
   * `platform`: statements of miniflare's own wrapper of the class (its `__miniflare_*` tables),
   * kept out of `statements` and `execs`.
   */
  doSql: {
    execs: number;
    statements: number;
    platform: number;
    sql: Record<string, number>;
    /** Every cursor's rowsRead / rowsWritten (miniflare's own statements left out). */
    rowsRead: number;
    rowsWritten: number;
    /** Rows written and read by SQL text (the keys of `sql`). */
    sqlRowsWritten: Record<string, number>;
    sqlRowsRead: Record<string, number>;
  };
  /** Calls of the actor's storage methods other than SQL, by name (alarms, key-value API…). */
  doCalls: Record<string, number>;
  /**
   * Requests to SessionActors: calls through a stub (RPC methods and `fetch`, from the Worker or
   * from another actor), and alarm invocations; by method name.
   */
  doRequests: { total: number; byMethod: Record<string, number> };
  /**
   * Durable Object wall time, summed over actor instances, each the union of its own intervals
   * (ms, by the Workers clock, which moves at I/O): `callsMs` while it handles at least one
   * method call (RPC, `fetch`) or alarm; `activeMs` while it also has a `ctx.waitUntil` promise
   * pending or a timer (setTimeout/setInterval) it set not yet fired or cleared, i.e. while it
   * cannot hibernate, which is what Cloudflare bills as duration. `open`: intervals open now
   * (calls, alarms, waitUntil promises, timers) over every actor; `timersPending`: of those, timers.
   */
  doWall: {
    callsMs: number;
    activeMs: number;
    open: number;
    timersPending: number;
    /** Timers set, by actors, and outside any actor's work (the Worker's, not billed as DO time). */
    timersSet: number;
    timersOutside: number;
    /** The actors' timers by kind and delay, e.g. `setTimeout 1000 ms`. */
    timersByDelay: Record<string, number>;
    waitUntils: number;
  };
  /** Invocations of the Worker entry (the bench's own /__bench/ requests left out), by handler. */
  workerRequests: { fetch: number; scheduled: number };
  /** SessionActor instances constructed in this isolate. */
  actors: number;
  /** Every actor's storage patch took, and `ctx.storage` / `.sql` are the same objects on every read. */
  patchedOk: boolean;
}

/**
 * `GET /__bench/db-counts?brief`: what the bench polls while a window settles. `changes` changes
 * whenever anything counted does (an actor's interval ending included); `open` and
 * `timersPending` are the tally's `doWall` fields.
 */
export interface BriefTally {
  isolate: string;
  changes: string;
  open: number;
  timersPending: number;
}

/**
 * `GET /__bench/db-still?still=MS&cap=MS&actors=0|1`: answers once the counts have not changed
 * for `still` ms (and, unless `actors=0`, no actor has anything open), or at `cap`: `still` says
 * which; `quiet`, whether the counts were still then (only actors kept it open).
 */
export interface StillAnswer extends BriefTally {
  still: boolean;
  quiet: boolean;
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
