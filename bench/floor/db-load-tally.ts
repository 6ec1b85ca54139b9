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
  /** The sessions' tallies in brief (each one's with `?key=`). */
  sessions: SessionsBrief;
}

/**
 * Rows and statements of one kind of D1 round trip, or of the statements of one kind inside
 * other round trips.
 */
export interface D1Part extends Rows {
  roundTrips: number;
  statements: number;
}

/**
 * What one session's actor asked of its storage, and the requests made to it: the part of the
 * load its key causes, wherever and whenever it lands (a write the actor defers lands in whatever
 * window is open then). Kept per session key (the name the actor is reached by), over every
 * instance of its actor (an evicted actor's next instance adds to the same tally).
 */
export interface SessionTally {
  d1: {
    /** The actor's D1 calls (a Worker's reads for an RPC are not any session's: global only). */
    statements: number;
    roundTrips: number;
    rowsRead: number;
    rowsWritten: number;
    unmetered: number;
    /** By binding (`busyMs` 0: a database's busy time is timed for all its calls, not a session's). */
    byBinding: Record<string, BindingTally>;
    byCall: Record<string, number>;
    /** Statements, rows written and read by `actor <SQL>` (the global tally's keys). */
    sql: Record<string, number>;
    sqlRowsWritten: Record<string, number>;
    sqlRowsRead: Record<string, number>;
    /**
     * Outcome-only writes: batches whose every statement is a `deliveries` upsert (a delivery's
     * outcome written alone, by the actor's alarm once no run's write carried it, or when a read
     * asked for it). Included in the figures above.
     */
    outcomes: D1Part;
    /**
     * `deliveries` upserts carried by another batch (a run's finalize carrying the session's
     * earlier outcomes): `roundTrips` counts the batches that carried any. Included above.
     */
    carried: D1Part;
    /**
     * The usage rollup's upserts (`usage_daily`, db/usage.ts; one per finalized run): their
     * statements and rows wherever sent; `roundTrips`, the round trips made of them alone (what
     * the rollup adds to D1's round trips: 0 while each rides in its run's finalize). Included
     * above. Absent from a tally of an entry older than the rollup.
     */
    usage?: D1Part;
  };
  /** As the global `doSql`, this session's actor only (miniflare's own statements are not its). */
  doSql: Omit<Tally["doSql"], "platform">;
  /** Calls of the actor's storage methods other than SQL, by name (setAlarm, deleteAlarm…). */
  doCalls: Record<string, number>;
  /** Requests to this session's actor: stub calls by the name it is reached by, and its alarms. */
  doRequests: Tally["doRequests"];
  /** The actor's wall time (as the global `doWall`, this session's instances only). */
  doWall: Pick<Tally["doWall"], "callsMs" | "activeMs" | "timersSet" | "timersByDelay" | "waitUntils">;
  /** Instances of this session's actor constructed (a first one, or one after an eviction). */
  instances: number;
  /**
   * The alarm this session's actor has pending (ms since the epoch), as `setAlarm` set it and
   * `deleteAlarm` or its firing cleared it; null when none. A deferred write is pending while it is.
   */
  alarmAt: number | null;
}

/**
 * What `GET /__bench/db-counts?key=K&key=K2…` adds to the tally: each named session's (absent
 * when its actor has done nothing yet and no request reached it).
 */
export interface SessionTallies {
  bySession: Record<string, SessionTally>;
}

/** Every session's actor, in brief: how many are known, and which have an alarm pending. */
export interface SessionsBrief {
  /** Session keys with a tally. */
  keys: number;
  /** Of those, whose actor has an alarm pending, and the earliest and latest pending times. */
  pendingAlarms: number;
  firstAlarmAt: number | null;
  lastAlarmAt: number | null;
  /** Actor instances whose key was not learned (their counts are in the global tally only). */
  unkeyed: number;
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

/**
 * `GET /__bench/db-deferred?still=MS&cap=MS`: answers once no session's actor has an alarm
 * pending (every deferred write has landed), the counts have not changed for `still` ms and no
 * actor has anything open, or at `cap`: `done` says which; `sessions`, the pending alarms then.
 */
export interface DeferredAnswer extends BriefTally {
  done: boolean;
  waitedMs: number;
  sessions: SessionsBrief;
  /** Up to 20 keys whose actor still has an alarm pending, with its time. */
  pending: Array<[string, number]>;
}

/** What `GET /__bench/d1-state` reads of one database (through the real binding, not counted). */
export interface DatabaseState {
  /** Messages in the transcript search index (migration 0010's `messages_fts`). */
  indexed: number;
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
