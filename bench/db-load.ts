/**
 * Bench row 14: the storage load of a message and what Cloudflare bills for it, counted from
 * outside. Per message, the D1 statements and D1 round trips (requests sent to D1: a statement's
 * first/all/run/raw, a batch, an exec), per run the D1 round trips, the Durable Object SQL
 * statements, and the billable units: D1 and Durable Object rows written and read, Durable
 * Object requests and active wall time (GB-s), Worker requests and workerd CPU; for:
 *  (a)  a message to a new session, one at a time;
 *  (b)  a sustained burst to one existing session (messages sent back to back, one ack after
 *       another, replies not awaited in between), averaged over the burst;
 *  (b2) the same burst to a session whose model answers over HTTP in SLOW_MODEL_MS (as real
 *       models do, not at once: the session is busy while messages arrive);
 *  (b1) a message to an existing session, one at a time (a conversation of `isolated` messages);
 *  (c)  a message whose turn makes one tool call (the echo model calls `current_time` for the
 *       text `call:current_time {}`), to an existing session, one at a time;
 *  (a-3s, b1-3s, c-3s, b-3s) (a), (b1), (c) and a burst, with a model over HTTP answering each
 *       call in MODEL_3S_MS (a tool-call turn calls it twice), SLOW_MESSAGES messages each (b1-3s
 *       and c-3s: a conversation of that many, its last delivery outcome written a minute on);
 *  (spread-new, spread-existing) a message to each of many new sessions, then one more to each,
 *       8 acks in flight (many keys: how the databases share the load, what a session stores);
 * and per read, for the operator's `sessions.list` (limit 50), `runs.list` (limit 50) and
 * `runs.get`, one at a time. Each workload also shows each D1 database's share of its statements
 * (with `--databases 4` the gateway spreads sessions over 4: `storage.d1` DB, DB_1, DB_2, DB_3),
 * the requests to Durable Objects, what the databases grew by (D1's `size_after`), and which SQL
 * texts write and read how many rows.
 *
 * Method: the gateway runs under its own `wrangler dev` (echo model, a bridge connector whose
 * replies go to a fake on 127.0.0.1) from a copy of wrangler.toml in which only `main` differs:
 * bench/floor/db-load-worker.ts, a test-only entry around the unchanged src/index.ts. It hands the
 * Worker and each SessionActor the runtime's own env with each D1 binding of `storage.d1` wrapped
 * (every call is counted, by binding, and passed on as made: same SQL, same batches, same order;
 * the rows of each statement read from D1's own answer) and `SESSION_ACTOR`'s stubs counting
 * their calls, replaces each actor's own `storage.sql.exec` (and its other storage methods) by a
 * counting pass-through whose cursors report their rows, and times each actor's calls, alarms,
 * waitUntil promises and timers. Nothing in src/ changes and no product code path is skipped or
 * added: the counts are what the gateway asked of D1 and of its Durable Object SQLite.
 * (Statements that miniflare's own wrapper runs on an actor's database, on its `__miniflare_*`
 * tables, absent in production, are left out.) The counts are read with
 * `GET /__bench/db-counts`, served by that entry without touching any storage. Nothing here
 * measures remote D1: the statements and rows are the product's, their time is local SQLite's.
 *
 * The load is its sessions': the entry tallies what each actor causes under its session key
 * (its D1 calls, its DO SQL and storage calls, its time, the requests made to it), and a
 * workload's figures are its sessions' tallies (the keys the gateway answered each inbound
 * with), each from the workload's start until what it deferred had landed. The gateway defers a
 * delivery's outcome: the session's next write carries it, or its actor's alarm writes it alone
 * a minute after the attempt; so a conversation's last outcome lands a minute on, in whatever
 * window is open then, and is still its own. After the last workload (and between the spread
 * workloads, which share their sessions) the bench waits until no actor has an alarm pending,
 * at most DEFERRED_WAIT_MS (`--deferred-wait-ms`), then reads the tallies. A session that starts
 * an existing-session workload gets its first message outside it, and that message's outcome
 * written at once (`deliveries.list` for the session), so the workload counts its own messages'
 * outcomes only. The Worker's own part (its requests, its D1 calls) is taken from the windows.
 *
 * A message's window runs from its send until nothing changes: its reply reached the fake
 * connector, then the counts stayed still for QUIET_MS with no actor at work or holding a timer,
 * and D1 (read through the unwrapped binding, not counted) shows every run ended and no delivery
 * pending or retrying; bounded by SETTLE_CAP_MS (`--quiet-ms`, `--settle-cap-ms`). A window gives
 * the message's own figures (its session's in it: the per-message ranges) and its CPU; what its
 * sessions do after their windows (the deferred writes) is reported apart. A warm-up (two new
 * sessions, one tool call, one 3 s tool call) runs first, so isolate-wide first-use work is not
 * charged to a workload; the reads run once nothing is deferred; after the last one the counts
 * are watched for another IDLE_WATCH_MS and any change is reported. workerd's CPU over each
 * window is measured with the bench's own requests (timed at rest) taken out: each request into
 * `wrangler dev` costs several ms, the message's own included, and another session's deferred
 * write landing in the window is in it, so it is an upper bound.
 *
 * Part of `npm run bench`; alone:
 * `node bench/db-load.ts [isolated=10] [burst=60] [spread=100] [--databases 4] [--slow 5]
 * [--quiet-ms 2000] [--settle-cap-ms 90000] [--deferred-wait-ms 75000] [--repo DIR] [--out FILE]
 * [--base FILE]`
 * (isolated: messages of (a), (b1) and (c) each, and calls of each read; burst: messages of (b);
 * spread: sessions of the spread workloads, 0 to leave them out; slow: messages of each 3 s
 * workload (the existing-session ones: a conversation of that many), 0 to leave them out;
 * deferred-wait-ms: the longest to wait for deferred writes, 0 not to; repo: the checkout whose gateway is measured, with this one's
 * counting entry; out: the result file; base: a result file whose figures the billing table
 * shows under each workload's). `node bench/db-load.ts --table FILE [--base FILE]` prints the
 * billing table of a result file. Both write the result to bench/results/db-load.json
 * (RESULT_FILE, or --out), the input of `npm run capacity`. Everything on 127.0.0.1.
 */
import { execFileSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type { LocalServer, LocalServerOptions } from "../scripts/lib/local-server.ts";
import { groupCpuSeconds } from "../scripts/lib/proc-cpu.ts";
import { SIGNATURE_HEADER, signBody } from "../src/auth/signature.ts";
import type {
  BindingTally,
  BriefTally,
  D1State,
  DeferredAnswer,
  SessionTallies,
  SessionTally,
  StillAnswer,
  Tally,
} from "./floor/db-load-tally.ts";
import { startModel } from "./workload.ts";

const TOKEN = "bench-db-load-token";
const SECRET = "bench-db-load-bridge-secret";
/**
 * Counts still for this long end a message's window, once no actor is at work or has a timer
 * pending either (`--quiet-ms`).
 */
export const QUIET_MS = 2_000;
const POLL_MS = 100;
/**
 * The longest a window waits for that (`--settle-cap-ms`). A write the gateway defers behind an
 * alarm does not hold a window open: it is its session's wherever it lands (DEFERRED_WAIT_MS).
 */
export const SETTLE_CAP_MS = 90_000;
const REPLY_CAP_MS = 30_000;
const BURST_REPLY_CAP_MS = 120_000;
const IDLE_WATCH_MS = 3_000;
/**
 * The longest the bench waits for the writes the actors defer to land (`--deferred-wait-ms`):
 * above the gateway's delay for a delivery outcome no run's write carried (a minute after its
 * attempt, delivery/outbox.ts OUTCOME_RECORD_DELAY_MS), with room for its alarm to run.
 */
export const DEFERRED_WAIT_MS = 75_000;
/** No message is sent after this long (every wait above has its own cap too). */
const TOTAL_CAP_MS = 20 * 60_000;
/** Session keys asked for per request of the counts (a URL of a few kB). */
const KEYS_PER_REQUEST = 50;
/** Above the largest burst, so the burst queues rather than meeting the cap. */
const QUEUE_CAP = 256;
const MAX_BURST = 200;
const MAX_ISOLATED = 50;
const MAX_SPREAD = 1_000;
/** Acks in flight at once in the spread workloads. */
const SPREAD_CONCURRENCY = 8;
const SPREAD_REPLY_CAP_MS = 180_000;
/**
 * The second spread message's text, in bytes: with the echo model's reply of the same length, a
 * turn of about 1 KB of text, so what a turn stores is measured with text of a chat's size.
 */
const SPREAD_TEXT_BYTES = 500;

/** A message text of exactly `bytes` bytes (ASCII), starting with `head`. */
function textOf(head: string, bytes: number): string {
  const filler = " the quick brown fox jumps over the lazy dog";
  let text = head;
  while (text.length < bytes) text += filler;
  return text.slice(0, bytes);
}
/** The entry the copied wrangler config points at (relative to the gateway's root). */
const ENTRY = "bench/floor/db-load-worker.ts";
const CONFIG_NAME = "wrangler.bench-db-load.toml";
/** A read's window closes once the counts stayed still this long (reads leave no work behind). */
const READ_QUIET_MS = 500;
/** Polls of the counts timed at rest, to take the bench's own requests out of a window's CPU. */
const POLL_CALIBRATION = 12;
/** Where the standalone run and `npm run bench` write their result (`npm run capacity` reads it). */
export const RESULT_FILE = "bench/results/db-load.json";
/** How long the model of the (b2) burst takes to answer, and the reference that names it. */
const SLOW_MODEL_MS = 250;
const SLOW_MODEL_REF = "slow/m";
/**
 * The model of the `-3s` workloads: over HTTP, answering every call in MODEL_3S_MS, as a real
 * model takes seconds (a tool call, then the final answer: two calls). Their sessions are an
 * agent's of their own (`MODEL_3S_AGENT`, whose model this is), which the messages reach through
 * a binding on their account id, so a new session has it from its first message.
 */
export const MODEL_3S_MS = 3_000;
const MODEL_3S_REF = "model3s/m";
const MODEL_3S_AGENT = "slow";
const MODEL_3S_ACCOUNT = "slow";
/** Messages of each `-3s` workload (counts are deterministic: a few suffice), and their cap. */
const SLOW_MESSAGES = 5;
const MAX_SLOW = 20;
/**
 * Cloudflare bills a Durable Object's duration as 128 MB for each second it is active
 * (https://developers.cloudflare.com/durable-objects/platform/pricing/): GB-s = 0.128 × seconds.
 */
export const DO_GB = 0.128;
/** `--databases 4`: the D1 bindings the gateway spreads its sessions over. */
export const FOUR_DATABASES = ["DB", "DB_1", "DB_2", "DB_3"] as const;

/** Counts of one window (or a sum of windows). */
export interface Load {
  d1Statements: number;
  d1RoundTrips: number;
  workerRoundTrips: number;
  actorRoundTrips: number;
  workerStatements: number;
  actorStatements: number;
  doStatements: number;
  doExecs: number;
  /** Statements of miniflare's own wrapper (`__miniflare_*` tables), not in doStatements. */
  doPlatform: number;
  /** Calls of the actors' other storage methods (alarms, key-value API…), by name. */
  storageCalls: Record<string, number>;
  /** Requests to Durable Objects (stub calls, alarms). */
  doRequests: number;
  doRequestsByMethod: Record<string, number>;
  /** Each D1 binding's statements, round trips and busy milliseconds. */
  byBinding: Record<string, BindingTally>;
  actors: number;
  byCall: Record<string, number>;
  d1Sql: Record<string, number>;
  doSql: Record<string, number>;
  /** D1 rows as billed (`meta.rows_read` / `meta.rows_written`), and by origin. */
  d1RowsRead: number;
  d1RowsWritten: number;
  workerRowsWritten: number;
  actorRowsWritten: number;
  workerRowsRead: number;
  /** D1 round trips whose rows the entry could not read (missing from the rows above). */
  d1Unmetered: number;
  /** Durable Object SQL rows as billed (each cursor's rowsRead / rowsWritten). */
  doRowsRead: number;
  doRowsWritten: number;
  /** Rows written and read by SQL text: D1 (`<origin> <SQL>`) and Durable Object SQL. */
  d1SqlRowsWritten: Record<string, number>;
  d1SqlRowsRead: Record<string, number>;
  doSqlRowsWritten: Record<string, number>;
  doSqlRowsRead: Record<string, number>;
  /** Durable Object wall time (ms, summed over actors): calls and alarms; and all it is active. */
  doCallsMs: number;
  doActiveMs: number;
  /** Invocations of the Worker (fetch and scheduled). */
  workerRequests: number;
  /** Timers the actors set, by kind and delay (`setTimeout 1000 ms`): each keeps its actor active. */
  doTimers: Record<string, number>;
  /**
   * Outcome writes: D1 batches of delivery-outcome upserts alone (an outcome no run's write
   * carried, written by its actor's alarm a minute on), their statements and rows; included in
   * the D1 figures above. Counted per session only (0 in a window's global delta).
   */
  outcomeRoundTrips: number;
  outcomeStatements: number;
  outcomeRowsWritten: number;
  outcomeRowsRead: number;
  /** Outcome upserts carried by a run's own batch (its finalize): those batches, the statements, their rows. */
  carriedRoundTrips: number;
  carriedStatements: number;
  carriedRowsWritten: number;
  /**
   * The usage rollup's upserts (`usage_daily`, db/usage.ts: one per finalized run): the round
   * trips made of them alone (what the rollup adds to D1's round trips), their statements and
   * rows; included in the D1 figures above. Counted per session only.
   */
  usageRoundTrips: number;
  usageStatements: number;
  usageRowsWritten: number;
  usageRowsRead: number;
}

/** The workloads with the model answering in MODEL_3S_MS. */
export const WORKLOADS_3S = ["a-3s", "b1-3s", "c-3s", "b-3s"] as const;

/** The counts as the entry serves them, with the tallies of the sessions asked for. */
type Counts = Tally & Partial<SessionTallies>;

export interface Workload {
  id: "a" | "b" | "b2" | "b1" | "c" | "spread-new" | "spread-existing" | (typeof WORKLOADS_3S)[number];
  name: string;
  messages: number;
  runs: number;
  /**
   * What the workload's sessions caused, each from the workload's start until what it deferred
   * had landed (per session key: its actor's D1 and DO SQL, storage calls, time, the requests to
   * it), and the Worker's own part of its windows (its requests, its D1 calls).
   */
  load: Load;
  /**
   * One per window: a message each for the one-at-a-time workloads, the whole burst for (b); the
   * window's sessions' load in it (not another session's deferred write landing then) and the
   * Worker's.
   */
  windows: Load[];
  settled: boolean;
  /** What the databases grew by over the workload's windows (bytes, D1's `size_after`). */
  storedBytes: number;
  /** Messages the transcript search index gained (each one D1 row written, as D1 counts it). */
  indexed: number;
  /** Sessions the workload created. */
  sessionsCreated: number;
  /** workerd CPU per message in ms over the workload's windows (the bench's polls taken out). */
  cpuMsPerMessage?: number;
  /** Bytes of a message's text and its reply's (the burst and the spread workloads; echo model). */
  textBytesPerMessage?: number;
  /** How long the session's model takes to answer (0: the echo model, at once). */
  modelMs: number;
  /**
   * The D1 databases' busy time over its windows and the statements they ran then (every
   * session's, the whole gateway's: the local cost of a statement, `localD1MsPerStatement`).
   */
  d1Busy: { ms: number; statements: number };
  /**
   * What its sessions caused after their last window had closed: the writes they deferred (a
   * conversation's last delivery outcome, written by its actor's alarm a minute on).
   */
  late: Load;
  /** Its sessions that did anything after their last window closed. */
  lateWindows: number;
  /** Its sessions (session keys). */
  sessions: number;
}

/** A read, called `calls` times one at a time. */
export interface ReadLoad {
  id: "sessions.list" | "runs.list" | "runs.get";
  name: string;
  calls: number;
  load: Load;
}

export interface DbLoadResult {
  /** The D1 bindings the gateway ran with (`storage.d1`). */
  databases: string[];
  workloads: Workload[];
  reads: ReadLoad[];
  /** Sessions in each database at the end (the warm-up's and every workload's). */
  sessionsByBinding: Record<string, number>;
  problems: string[];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function diffMap(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d !== 0) out[k] = d;
  }
  return out;
}

const emptyBinding = (): BindingTally => ({
  statements: 0,
  roundTrips: 0,
  busyMs: 0,
  rowsRead: 0,
  rowsWritten: 0,
});

function diffBindings(after: Tally, before: Tally): Record<string, BindingTally> {
  const out: Record<string, BindingTally> = {};
  for (const [name, a] of Object.entries(after.d1.byBinding)) {
    const b = before.d1.byBinding[name] ?? emptyBinding();
    out[name] = {
      statements: a.statements - b.statements,
      roundTrips: a.roundTrips - b.roundTrips,
      busyMs: a.busyMs - b.busyMs,
      rowsRead: a.rowsRead - b.rowsRead,
      rowsWritten: a.rowsWritten - b.rowsWritten,
    };
  }
  return out;
}

/** Thrown when the counts of a window come from two isolates (workerd started the Worker again). */
export class IsolateRestartError extends Error {
  override name = "IsolateRestartError";
}

/** A load's deferred-write counts before any is attributed to it. */
const NO_DEFERRED = {
  outcomeRoundTrips: 0,
  outcomeStatements: 0,
  outcomeRowsWritten: 0,
  outcomeRowsRead: 0,
  carriedRoundTrips: 0,
  carriedStatements: 0,
  carriedRowsWritten: 0,
};

/** A load's usage-rollup counts before any is attributed to it. */
const NO_USAGE = { usageRoundTrips: 0, usageStatements: 0, usageRowsWritten: 0, usageRowsRead: 0 };

function delta(before: Tally, after: Tally): Load {
  if (before.isolate !== after.isolate)
    throw new IsolateRestartError(
      "db load: workerd started the Worker's isolate again during a window, so its counts began anew",
    );
  return {
    d1Statements: after.d1.statements - before.d1.statements,
    d1RoundTrips: after.d1.roundTrips - before.d1.roundTrips,
    workerRoundTrips: after.d1.byOrigin.worker.roundTrips - before.d1.byOrigin.worker.roundTrips,
    actorRoundTrips: after.d1.byOrigin.actor.roundTrips - before.d1.byOrigin.actor.roundTrips,
    workerStatements: after.d1.byOrigin.worker.statements - before.d1.byOrigin.worker.statements,
    actorStatements: after.d1.byOrigin.actor.statements - before.d1.byOrigin.actor.statements,
    doStatements: after.doSql.statements - before.doSql.statements,
    doExecs: after.doSql.execs - before.doSql.execs,
    doPlatform: after.doSql.platform - before.doSql.platform,
    storageCalls: diffMap(after.doCalls, before.doCalls),
    doRequests: after.doRequests.total - before.doRequests.total,
    doRequestsByMethod: diffMap(after.doRequests.byMethod, before.doRequests.byMethod),
    byBinding: diffBindings(after, before),
    actors: after.actors - before.actors,
    byCall: diffMap(after.d1.byCall, before.d1.byCall),
    d1Sql: diffMap(after.d1.sql, before.d1.sql),
    doSql: diffMap(after.doSql.sql, before.doSql.sql),
    d1RowsRead: after.d1.rowsRead - before.d1.rowsRead,
    d1RowsWritten: after.d1.rowsWritten - before.d1.rowsWritten,
    workerRowsWritten: after.d1.byOrigin.worker.rowsWritten - before.d1.byOrigin.worker.rowsWritten,
    actorRowsWritten: after.d1.byOrigin.actor.rowsWritten - before.d1.byOrigin.actor.rowsWritten,
    workerRowsRead: after.d1.byOrigin.worker.rowsRead - before.d1.byOrigin.worker.rowsRead,
    d1Unmetered: after.d1.unmetered - before.d1.unmetered,
    doRowsRead: after.doSql.rowsRead - before.doSql.rowsRead,
    doRowsWritten: after.doSql.rowsWritten - before.doSql.rowsWritten,
    d1SqlRowsWritten: diffMap(after.d1.sqlRowsWritten, before.d1.sqlRowsWritten),
    d1SqlRowsRead: diffMap(after.d1.sqlRowsRead, before.d1.sqlRowsRead),
    doSqlRowsWritten: diffMap(after.doSql.sqlRowsWritten, before.doSql.sqlRowsWritten),
    doSqlRowsRead: diffMap(after.doSql.sqlRowsRead, before.doSql.sqlRowsRead),
    doCallsMs: after.doWall.callsMs - before.doWall.callsMs,
    doActiveMs: after.doWall.activeMs - before.doWall.activeMs,
    doTimers: diffMap(after.doWall.timersByDelay, before.doWall.timersByDelay),
    workerRequests:
      after.workerRequests.fetch +
      after.workerRequests.scheduled -
      before.workerRequests.fetch -
      before.workerRequests.scheduled,
    ...NO_DEFERRED,
    ...NO_USAGE,
  };
}

/** The part of a window's global delta that is the Worker's own (its D1 calls, its requests). */
function workerPart(l: Load): Load {
  const worker = (m: Record<string, number>) =>
    Object.fromEntries(Object.entries(m).filter(([k]) => k.startsWith("worker ")));
  return {
    ...sum([]),
    d1Statements: l.workerStatements,
    d1RoundTrips: l.workerRoundTrips,
    workerRoundTrips: l.workerRoundTrips,
    workerStatements: l.workerStatements,
    d1RowsWritten: l.workerRowsWritten,
    d1RowsRead: l.workerRowsRead,
    workerRowsWritten: l.workerRowsWritten,
    workerRowsRead: l.workerRowsRead,
    d1Sql: worker(l.d1Sql),
    d1SqlRowsWritten: worker(l.d1SqlRowsWritten),
    d1SqlRowsRead: worker(l.d1SqlRowsRead),
    workerRequests: l.workerRequests,
  };
}

/** `after` less `before`, count by count (nested records too; a count only `after` has is kept whole). */
function diffCounts<T>(after: T, before: T | undefined): T {
  if (typeof after === "number") return (after - ((before as number | undefined) ?? 0)) as T;
  if (after === null || typeof after !== "object") return after;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(after))
    out[k] = diffCounts(v, before === undefined ? undefined : (before as Record<string, unknown>)[k]);
  return out as T;
}

const nonZero = (m: Record<string, number>) =>
  Object.fromEntries(Object.entries(m).filter(([, v]) => v !== 0));

/**
 * What a session's tally grew by from `before` (none: the session did not exist) to `after`
 * (none: it has done nothing), as a Load: its actor's D1 calls, DO SQL, storage calls and time,
 * and the requests made to it.
 */
export function sessionLoad(after: SessionTally | undefined, before: SessionTally | undefined): Load {
  if (!after) return sum([]);
  const d = diffCounts(after, before);
  const byBinding: Record<string, BindingTally> = {};
  for (const [name, b] of Object.entries(d.d1.byBinding))
    if (b.roundTrips || b.statements || b.rowsRead || b.rowsWritten) byBinding[name] = b;
  return {
    ...sum([]),
    d1Statements: d.d1.statements,
    d1RoundTrips: d.d1.roundTrips,
    actorRoundTrips: d.d1.roundTrips,
    actorStatements: d.d1.statements,
    doStatements: d.doSql.statements,
    doExecs: d.doSql.execs,
    storageCalls: nonZero(d.doCalls),
    doRequests: d.doRequests.total,
    doRequestsByMethod: nonZero(d.doRequests.byMethod),
    byBinding,
    actors: d.instances,
    byCall: nonZero(d.d1.byCall),
    d1Sql: nonZero(d.d1.sql),
    doSql: nonZero(d.doSql.sql),
    d1RowsRead: d.d1.rowsRead,
    d1RowsWritten: d.d1.rowsWritten,
    actorRowsWritten: d.d1.rowsWritten,
    d1Unmetered: d.d1.unmetered,
    doRowsRead: d.doSql.rowsRead,
    doRowsWritten: d.doSql.rowsWritten,
    d1SqlRowsWritten: nonZero(d.d1.sqlRowsWritten),
    d1SqlRowsRead: nonZero(d.d1.sqlRowsRead),
    doSqlRowsWritten: nonZero(d.doSql.sqlRowsWritten),
    doSqlRowsRead: nonZero(d.doSql.sqlRowsRead),
    doCallsMs: d.doWall.callsMs,
    doActiveMs: d.doWall.activeMs,
    doTimers: nonZero(d.doWall.timersByDelay),
    outcomeRoundTrips: d.d1.outcomes.roundTrips,
    outcomeStatements: d.d1.outcomes.statements,
    outcomeRowsWritten: d.d1.outcomes.rowsWritten,
    outcomeRowsRead: d.d1.outcomes.rowsRead,
    carriedRoundTrips: d.d1.carried.roundTrips,
    carriedStatements: d.d1.carried.statements,
    carriedRowsWritten: d.d1.carried.rowsWritten,
    usageRoundTrips: d.d1.usage?.roundTrips ?? 0,
    usageStatements: d.d1.usage?.statements ?? 0,
    usageRowsWritten: d.d1.usage?.rowsWritten ?? 0,
    usageRowsRead: d.d1.usage?.rowsRead ?? 0,
  };
}

function addMap(into: Record<string, number>, from: Record<string, number>): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
}

export function sum(loads: Load[]): Load {
  const out: Load = {
    d1Statements: 0,
    d1RoundTrips: 0,
    workerRoundTrips: 0,
    actorRoundTrips: 0,
    workerStatements: 0,
    actorStatements: 0,
    doStatements: 0,
    doExecs: 0,
    doPlatform: 0,
    storageCalls: {},
    doRequests: 0,
    doRequestsByMethod: {},
    byBinding: {},
    actors: 0,
    byCall: {},
    d1Sql: {},
    doSql: {},
    d1RowsRead: 0,
    d1RowsWritten: 0,
    workerRowsWritten: 0,
    actorRowsWritten: 0,
    workerRowsRead: 0,
    d1Unmetered: 0,
    doRowsRead: 0,
    doRowsWritten: 0,
    d1SqlRowsWritten: {},
    d1SqlRowsRead: {},
    doSqlRowsWritten: {},
    doSqlRowsRead: {},
    doCallsMs: 0,
    doActiveMs: 0,
    workerRequests: 0,
    doTimers: {},
    ...NO_DEFERRED,
    ...NO_USAGE,
  };
  for (const l of loads) {
    out.d1Statements += l.d1Statements;
    out.d1RoundTrips += l.d1RoundTrips;
    out.workerRoundTrips += l.workerRoundTrips;
    out.actorRoundTrips += l.actorRoundTrips;
    out.workerStatements += l.workerStatements;
    out.actorStatements += l.actorStatements;
    out.doStatements += l.doStatements;
    out.doExecs += l.doExecs;
    out.doPlatform += l.doPlatform;
    addMap(out.storageCalls, l.storageCalls);
    out.doRequests += l.doRequests;
    addMap(out.doRequestsByMethod, l.doRequestsByMethod);
    for (const [name, b] of Object.entries(l.byBinding)) {
      const into = out.byBinding[name] ?? emptyBinding();
      out.byBinding[name] = into;
      into.statements += b.statements;
      into.roundTrips += b.roundTrips;
      into.busyMs += b.busyMs;
      into.rowsRead += b.rowsRead;
      into.rowsWritten += b.rowsWritten;
    }
    out.actors += l.actors;
    addMap(out.byCall, l.byCall);
    addMap(out.d1Sql, l.d1Sql);
    addMap(out.doSql, l.doSql);
    out.d1RowsRead += l.d1RowsRead;
    out.d1RowsWritten += l.d1RowsWritten;
    out.workerRowsWritten += l.workerRowsWritten;
    out.actorRowsWritten += l.actorRowsWritten;
    out.workerRowsRead += l.workerRowsRead;
    out.d1Unmetered += l.d1Unmetered;
    out.doRowsRead += l.doRowsRead;
    out.doRowsWritten += l.doRowsWritten;
    addMap(out.d1SqlRowsWritten, l.d1SqlRowsWritten);
    addMap(out.d1SqlRowsRead, l.d1SqlRowsRead);
    addMap(out.doSqlRowsWritten, l.doSqlRowsWritten);
    addMap(out.doSqlRowsRead, l.doSqlRowsRead);
    out.doCallsMs += l.doCallsMs;
    out.doActiveMs += l.doActiveMs;
    out.workerRequests += l.workerRequests;
    addMap(out.doTimers, l.doTimers);
    out.outcomeRoundTrips += l.outcomeRoundTrips;
    out.outcomeStatements += l.outcomeStatements;
    out.outcomeRowsWritten += l.outcomeRowsWritten;
    out.outcomeRowsRead += l.outcomeRowsRead;
    out.carriedRoundTrips += l.carriedRoundTrips;
    out.carriedStatements += l.carriedStatements;
    out.carriedRowsWritten += l.carriedRowsWritten;
    out.usageRoundTrips += l.usageRoundTrips;
    out.usageStatements += l.usageStatements;
    out.usageRowsWritten += l.usageRowsWritten;
    out.usageRowsRead += l.usageRowsRead;
  }
  return out;
}

/** Whether a late delta holds anything billable (writes, statements, requests), not just time. */
const somethingIn = (l: Load) =>
  l.d1RoundTrips > 0 ||
  l.doExecs > 0 ||
  l.d1RowsWritten > 0 ||
  l.doRowsWritten > 0 ||
  l.doRequests > 0 ||
  Object.keys(l.storageCalls).length > 0;

/** wrangler.toml with `main` pointed at the counting entry, written beside it in `root`. */
function writeCountingConfig(root: string): string {
  const base = readFileSync(path.join(root, "wrangler.toml"), "utf8");
  const main = /^main = "src\/index\.ts"$/m;
  if (!main.test(base))
    throw new Error(`wrangler.toml has no \`main = "src/index.ts"\` line to point at ${ENTRY}`);
  const file = path.join(root, CONFIG_NAME);
  writeFileSync(
    file,
    `# Written by bench/db-load.ts from wrangler.toml; only \`main\` differs. Never deployed.\n${base.replace(main, `main = "${ENTRY}"`)}`,
  );
  return file;
}

/** A bridge endpoint that keeps each reply's text by the message it answers. */
async function startBridge() {
  const replies = new Map<string, string>();
  let delivered = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      delivered++;
      try {
        const d = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          replyToMessageId?: string;
          text?: string;
        };
        if (d.replyToMessageId) replies.set(d.replyToMessageId, d.text ?? "");
      } catch {
        // counted as delivered; no reply to match
      }
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/deliver`,
    replies,
    delivered: () => delivered,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export async function benchDbLoad(opts: {
  start: (o: LocalServerOptions) => Promise<LocalServer>;
  /** The gateway's root (a snapshot of the working tree): its wrangler.toml is copied beside it. */
  root: string;
  persistTo: string;
  log: (msg: string) => void;
  /** Messages of (a), (b1) and (c) each, and calls of each read (default 10). */
  isolated?: number;
  /** Messages of (b) (default 60). */
  burst?: number;
  /** Distinct sessions of the spread workloads (default 100; 0 leaves them out). */
  spread?: number;
  /** The D1 bindings to spread sessions over (`storage.d1`; default `["DB"]`). */
  d1?: readonly string[];
  /** Messages of each `-3s` workload (default SLOW_MESSAGES; 0 leaves them out). */
  slow?: number;
  /** How long the counts must stay still to end a window (default QUIET_MS). */
  quietMs?: number;
  /** The longest a window waits to settle (default SETTLE_CAP_MS). */
  settleCapMs?: number;
  /** The longest the bench waits for the writes the actors defer to land (default DEFERRED_WAIT_MS). */
  deferredWaitMs?: number;
}): Promise<DbLoadResult> {
  const isolated = Math.max(1, Math.min(MAX_ISOLATED, Math.floor(opts.isolated ?? 10)));
  const burst = Math.max(1, Math.min(MAX_BURST, Math.floor(opts.burst ?? 60)));
  const spread = Math.max(0, Math.min(MAX_SPREAD, Math.floor(opts.spread ?? 100)));
  const slow = Math.max(0, Math.min(MAX_SLOW, Math.floor(opts.slow ?? SLOW_MESSAGES)));
  const quietMs = Math.max(200, Math.min(120_000, opts.quietMs ?? QUIET_MS));
  const settleCapMs = Math.max(quietMs + 1_000, Math.min(600_000, opts.settleCapMs ?? SETTLE_CAP_MS));
  const deferredWaitMs = Math.max(0, Math.min(600_000, opts.deferredWaitMs ?? DEFERRED_WAIT_MS));
  const databases = [...(opts.d1 ?? ["DB"])];
  const problems: string[] = [];
  const bridge = await startBridge();
  const slowModel = await startModel(SLOW_MODEL_MS);
  const model3s = await startModel(MODEL_3S_MS);
  const wranglerConfig = writeCountingConfig(opts.root);
  let server: LocalServer | undefined;
  try {
    server = await opts.start({
      persistTo: opts.persistTo,
      wranglerConfig,
      d1: databases,
      vars: { GATEWAY_TOKEN: TOKEN, BRIDGE_SECRET: SECRET },
      config: {
        session: { dmScope: "per-channel-peer", queue: { cap: QUEUE_CAP } },
        // The echo model answers every workload but (b2), whose session picks the 250 ms model
        // with `/new`, and the `-3s` ones, whose messages come from an account bound to an agent
        // with the 3 s model.
        models: {
          providers: {
            slow: { api: "openai-compatible", baseUrl: slowModel.url },
            model3s: { api: "openai-compatible", baseUrl: model3s.url },
          },
        },
        agents: {
          list: [
            { id: "main", default: true },
            { id: MODEL_3S_AGENT, model: MODEL_3S_REF },
          ],
        },
        bindings: [{ agentId: MODEL_3S_AGENT, match: { channel: "bridge", accountId: MODEL_3S_ACCOUNT } }],
        connectors: { bridge: { deliverUrl: bridge.url, secretEnv: "BRIDGE_SECRET" } },
        ...(databases.length > 1 || databases[0] !== "DB" ? { storage: { d1: databases } } : {}),
      },
    });
    const url = server.url;
    const pid = server.pid;
    opts.log(
      `db load: gateway (counting entry ${ENTRY}, D1 ${databases.join(", ")}) on ${url} (pid ${pid}), bridge ${bridge.url}`,
    );

    const getJson = async <T>(p: string, timeoutMs = 10_000): Promise<T> => {
      const res = await fetch(`${url}${p}`, { signal: AbortSignal.timeout(timeoutMs) });
      if (!res.ok) throw new Error(`${p} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
      return (await res.json()) as T;
    };
    /** The bench's own requests to workerd, so their CPU can be taken out of a window's. */
    const polls = { counts: 0, brief: 0, state: 0, still: 0 };
    /** The counts, with the tallies of the sessions `keys` names (KEYS_PER_REQUEST per request). */
    const counts = async (keys: readonly string[] = []): Promise<Counts> => {
      let out: Counts | undefined;
      for (let i = 0; i === 0 || i < keys.length; i += KEYS_PER_REQUEST) {
        polls.counts++;
        const query = keys
          .slice(i, i + KEYS_PER_REQUEST)
          .map((k) => `key=${encodeURIComponent(k)}`)
          .join("&");
        const c = await getJson<Counts>(`/__bench/db-counts${query ? `?${query}` : ""}`);
        out = out ? { ...c, bySession: { ...out.bySession, ...c.bySession } } : c;
      }
      return out as Counts;
    };
    /** The few numbers that say whether anything changed (polled while a window settles). */
    const brief = () => {
      polls.brief++;
      return getJson<BriefTally>("/__bench/db-counts?brief");
    };
    /** Waits in the entry until the counts are still for `stillMs` (and the actors idle, with `actors`). */
    const still = (stillMs: number, capMs: number, actors: boolean) => {
      polls.still++;
      return getJson<StillAnswer>(
        `/__bench/db-still?still=${Math.round(stillMs)}&cap=${Math.round(capMs)}&actors=${actors ? 1 : 0}`,
        Math.ceil(capMs) + 10_000,
      );
    };
    const d1State = () => {
      polls.state++;
      return getJson<D1State>("/__bench/d1-state");
    };
    const cpuMs = () => groupCpuSeconds(pid, "workerd") * 1000;

    const stopAt = performance.now() + TOTAL_CAP_MS;
    const overCap = () => {
      if (performance.now() > stopAt)
        throw new Error(`db load: over its ${TOTAL_CAP_MS / 60_000}-minute cap`);
    };
    /** The session key the gateway gave each sender (`accountId|from`), from its inbound answers. */
    const keyOf = new Map<string, string>();
    let n = 0;
    const send = async (
      from: string,
      text: string,
      accountId?: string,
    ): Promise<{ id: string; key: string }> => {
      overCap();
      const messageId = `db-load-${++n}`;
      const body = JSON.stringify({
        messageId,
        chatType: "direct",
        from,
        text,
        ...(accountId ? { accountId } : {}),
      });
      const res = await fetch(`${url}/hooks/inbound/bridge`, {
        method: "POST",
        headers: { "content-type": "application/json", [SIGNATURE_HEADER]: await signBody(SECRET, body) },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      const answer = await res.text();
      if (res.status !== 200 && res.status !== 202)
        throw new Error(`inbound ${messageId} answered ${res.status}: ${answer.slice(0, 300)}`);
      let key: unknown;
      try {
        key = (JSON.parse(answer) as { sessionKey?: unknown }).sessionKey;
      } catch {
        // no JSON: no key (below)
      }
      if (typeof key !== "string" || !key)
        throw new Error(`inbound ${messageId} answered without its session key: ${answer.slice(0, 300)}`);
      keyOf.set(`${accountId ?? ""}|${from}`, key);
      return { id: messageId, key };
    };
    const rpc = async <T>(method: string, params: unknown): Promise<T> => {
      overCap();
      const res = await fetch(`${url}/rpc/${method}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify(params),
        signal: AbortSignal.timeout(10_000),
      });
      const body = (await res.json()) as { ok: boolean; payload?: T; error?: { message: string } };
      if (!body.ok || body.payload === undefined)
        throw new Error(`${method} answered ${res.status}: ${body.error?.message ?? "no payload"}`);
      return body.payload;
    };
    const replies = async (ids: string[], capMs: number): Promise<boolean> => {
      const deadline = performance.now() + capMs;
      while (!ids.every((id) => bridge.replies.has(id))) {
        if (performance.now() > deadline) return false;
        await sleep(20);
      }
      return true;
    };

    /**
     * Whether a window waits for every actor to be idle (no call, alarm, waitUntil promise or
     * timer of its own open): until a window meets its cap with the counts still and only that
     * left, after which the gateway is taken to keep something open for good.
     */
    let waitForActors = true;

    /**
     * Waits until nothing changes (see the header): the entry answers once the counts were still
     * for quietMs with every actor idle, then D1 must show the runs ended and the deliveries
     * settled, and the counts unchanged since; returns the counts (with the sessions `keys`
     * names) and D1's state then.
     */
    const settle = async (
      expectRuns: number,
      keys: readonly string[],
    ): Promise<{ tally: Counts; state: D1State; settled: boolean }> => {
      const deadline = performance.now() + settleCapMs;
      for (;;) {
        const left = deadline - performance.now();
        if (left < 1) break;
        const s = await still(quietMs, left, waitForActors);
        if (!s.still) {
          if (waitForActors && s.quiet && s.open > 0) {
            waitForActors = false;
            problems.push(
              `db load: ${s.open} actor interval(s) (${s.timersPending} timers) still open after ${settleCapMs / 1000} s with the counts still: later windows no longer wait for them`,
            );
          }
          break;
        }
        const state = await d1State();
        if (state.runs >= expectRuns && state.activeRuns === 0 && state.openDeliveries === 0) {
          const tally = await counts(keys);
          const after = await brief();
          if (after.changes === s.changes && after.isolate === s.isolate)
            return { tally, state, settled: true };
        } else await sleep(250);
      }
      return { tally: await counts(keys), state: await d1State(), settled: false };
    };

    /**
     * Waits until every write the actors defer has landed: no actor has an alarm pending (a
     * delivery's outcome no run's write carried is written by its actor's alarm a minute after
     * its attempt), the counts still for quietMs; at most deferredWaitMs.
     */
    const deferredWait = async (after: string): Promise<void> => {
      const d = await getJson<DeferredAnswer>(
        `/__bench/db-deferred?still=${Math.round(quietMs)}&cap=${Math.round(deferredWaitMs)}`,
        deferredWaitMs + 15_000,
      );
      opts.log(
        `db load: the writes deferred by ${after} ${d.done ? "landed" : "did NOT all land"} (waited ${(d.waitedMs / 1000).toFixed(0)} s)`,
      );
      if (!d.done)
        problems.push(
          `db load: ${d.sessions.pendingAlarms} session(s) still had an alarm pending ${deferredWaitMs / 1000} s after ${after} (${d.pending
            .map(([k, at]) => `${k} at ${new Date(at).toISOString()}`)
            .join(
              ", ",
            )}): what they defer is missing from their workloads (a longer --deferred-wait-ms would keep it in)`,
        );
    };

    /**
     * What each of the bench's own requests costs workerd (ms), timed at rest, spaced as in a
     * window: a poll of the counts (whole and brief), of D1's state, and a wait for the counts to
     * stay still for quietMs (once; the others before each workload, as the counts grow).
     */
    const pollCost = { counts: Number.NaN, brief: Number.NaN, state: Number.NaN, still: Number.NaN };
    const time = async (poll: () => Promise<unknown>, times: number) => {
      const c0 = cpuMs();
      for (let i = 0; i < times; i++) {
        await poll();
        await sleep(POLL_MS);
      }
      return (cpuMs() - c0) / times;
    };
    const calibrate = async () => {
      pollCost.counts = await time(() => counts(), POLL_CALIBRATION);
      pollCost.brief = await time(brief, POLL_CALIBRATION);
      pollCost.state = await time(d1State, POLL_CALIBRATION);
      if (Number.isNaN(pollCost.still))
        pollCost.still = await time(() => still(quietMs, quietMs * 2, true), 3);
    };
    /** workerd's CPU so far, less the bench's own polls (ms). */
    const cpuMark = () => ({ cpu: cpuMs(), polls: { ...polls } });
    const cpuSince = (m: ReturnType<typeof cpuMark>) =>
      cpuMs() -
      m.cpu -
      (polls.counts - m.polls.counts) * pollCost.counts -
      (polls.brief - m.polls.brief) * pollCost.brief -
      (polls.state - m.polls.state) * pollCost.state -
      (polls.still - m.polls.still) * pollCost.still;

    /**
     * A workload's sessions: each key's tally when the workload started (none: a new session),
     * after its last window, and at the end (once what they deferred has landed).
     */
    interface Tracker {
      isolate: string;
      start: Map<string, SessionTally | undefined>;
      lastWindow: Map<string, SessionTally | undefined>;
      end?: Record<string, SessionTally>;
    }
    /** Starts tracking the sessions `keys` (more join as a workload's messages make them). */
    const track = async (keys: string[]): Promise<{ tracker: Tracker; at: Counts }> => {
      const at = await counts(keys);
      const start = new Map(keys.map((k) => [k, at.bySession?.[k]]));
      return { tracker: { isolate: at.isolate, start, lastWindow: new Map(start) }, at };
    };
    /** A window's sessions joined the tracker (a new one from nothing) and reached `after`. */
    const windowClosed = (t: Tracker, keys: readonly string[], before: Counts, after: Counts) => {
      for (const k of keys) {
        if (!t.start.has(k)) t.start.set(k, before.bySession?.[k]);
        t.lastWindow.set(k, after.bySession?.[k]);
      }
    };
    /** The load of one window: its sessions' (`keys`) and the Worker's; the databases' busy time in it. */
    const windowLoad = (before: Counts, after: Counts, keys: readonly string[]) => {
      const all = delta(before, after);
      const worker = workerPart(all);
      const busy = Object.values(all.byBinding);
      return {
        worker,
        load: sum([worker, ...keys.map((k) => sessionLoad(after.bySession?.[k], before.bySession?.[k]))]),
        busy: {
          ms: busy.reduce((a, b) => a + b.busyMs, 0),
          statements: busy.reduce((a, b) => a + b.statements, 0),
        },
      };
    };
    const addBusy = (into: { ms: number; statements: number }, b: { ms: number; statements: number }) => {
      into.ms += b.ms;
      into.statements += b.statements;
    };

    const first = await counts();
    if (!first.patchedOk)
      problems.push("db load: the storage patch did not take (DO SQL counts are not complete)");
    let state = await d1State();

    /** One message and its window: send, reply, settle (`t`: the workload whose session it is). */
    const oneMessage = async (
      from: string,
      text: string,
      expectReply?: (t: string) => boolean,
      accountId?: string,
      t?: Tracker,
    ) => {
      const known = keyOf.get(`${accountId ?? ""}|${from}`);
      const before = await counts(known ? [known] : []);
      const stateBefore = state;
      const cpu = cpuMark();
      const { id, key } = await send(from, text, accountId);
      if (!(await replies([id], REPLY_CAP_MS)))
        problems.push(`db load: no reply to ${id} (${from}) within the cap`);
      const reply = bridge.replies.get(id);
      if (reply !== undefined && expectReply && !expectReply(reply))
        problems.push(`db load: reply to ${id} was ${JSON.stringify(reply.slice(0, 120))}`);
      const s = await settle(state.runs + 1, [key]);
      const cpuUsed = cpuSince(cpu);
      const runs = s.state.runs - state.runs;
      state = s.state;
      if (!s.settled) problems.push(`db load: ${id} did not settle within ${settleCapMs / 1000} s`);
      if (t) windowClosed(t, [key], before, s.tally);
      return {
        key,
        ...windowLoad(before, s.tally, [key]),
        cpuMs: cpuUsed,
        runs,
        settled: s.settled,
        bytes: s.state.sizeBytes - stateBefore.sizeBytes,
        indexed: s.state.indexed - stateBefore.indexed,
        sessions: s.state.sessions - stateBefore.sessions,
      };
    };
    /**
     * A session's first message, outside any workload, then its delivery's outcome written at once
     * (`deliveries.list` for the session has its actor write it), so a workload in that session
     * starts with nothing of it pending: its figures are its own messages'.
     */
    const setupSession = async (from: string, text: string, accountId?: string): Promise<string> => {
      const { key } = await oneMessage(from, text, undefined, accountId);
      await rpc("deliveries.list", { sessionKey: key, limit: 1 });
      await still(quietMs, settleCapMs, waitForActors);
      return key;
    };
    const toolReply = (t: string) => t.startsWith("echo: current_time -> ");
    const toolReply3s = (t: string) => t.startsWith("tool: current_time -> ");

    opts.log("db load: warm-up (two new sessions, one tool call)");
    await oneMessage("warm-0", "warm-up 0");
    await oneMessage("warm-1", "warm-up 1");
    await oneMessage("warm-1", "call:current_time {}", toolReply);
    if (slow > 0) {
      opts.log(`db load: warm-up of the model answering in ${MODEL_3S_MS} ms (one tool call)`);
      await oneMessage("warm-3s", "call:current_time {}", toolReply3s, MODEL_3S_ACCOUNT);
    }
    await calibrate();

    /**
     * The workloads measured, each with its sessions' tracker: its figures are known once what
     * its sessions deferred has landed (`finish`).
     */
    const measured: Array<{
      w: Omit<Workload, "load" | "late" | "lateWindows" | "sessions">;
      worker: Load[];
      t: Tracker;
      /** D1's size at its start, for a workload whose stored bytes count its deferred writes too. */
      sizeAtStart?: number;
    }> = [];
    const oneAtATime = async (
      id: Workload["id"],
      name: string,
      count: number,
      message: (i: number) => { from: string; text: string },
      expectReply?: (t: string) => boolean,
      model?: { ms: number; accountId: string },
      session?: string,
    ) => {
      opts.log(`db load: (${id}) ${name}, ${count} messages one at a time`);
      const { tracker } = await track(session ? [session] : []);
      const windows: Load[] = [];
      const worker: Load[] = [];
      let runs = 0;
      let settled = true;
      let storedBytes = 0;
      let indexed = 0;
      let sessionsCreated = 0;
      let cpu = 0;
      const d1Busy = { ms: 0, statements: 0 };
      for (let i = 0; i < count; i++) {
        const m = message(i);
        const r = await oneMessage(m.from, m.text, expectReply, model?.accountId, tracker);
        windows.push(r.load);
        worker.push(r.worker);
        addBusy(d1Busy, r.busy);
        runs += r.runs;
        settled &&= r.settled;
        storedBytes += r.bytes;
        indexed += r.indexed;
        sessionsCreated += r.sessions;
        cpu += r.cpuMs;
      }
      measured.push({
        w: {
          id,
          name,
          messages: count,
          runs,
          windows,
          settled,
          storedBytes,
          indexed,
          sessionsCreated,
          modelMs: model?.ms ?? 0,
          d1Busy,
          ...(Number.isFinite(cpu) ? { cpuMsPerMessage: cpu / count } : {}),
        },
        worker,
        t: tracker,
      });
    };

    await oneAtATime("a", "message to a new session", isolated, (i) => ({
      from: `new-${i}`,
      text: `hello ${i}`,
    }));

    /**
     * A burst to one existing session (`from`, created by `first`): `burst` messages sent back
     * to back, one ack after another, replies not awaited in between; one window.
     */
    const burstWorkload = async (
      id: Workload["id"],
      name: string,
      from: string,
      first: string,
      count = burst,
      model?: { ms: number; accountId?: string },
    ) => {
      opts.log(`db load: (${id}) creating the burst session, then ${count} messages back to back`);
      const key = await setupSession(from, first, model?.accountId);
      // What one poll of the counts and of D1's state costs workerd, timed at rest just before.
      await calibrate();
      const { tracker, at: before } = await track([key]);
      const stateBefore = state;
      const cpu0 = cpuMark();
      const runs0 = state.runs;
      const ids: string[] = [];
      let textBytes = 0;
      for (let i = 0; i < count; i++) {
        const text = `burst message ${i}`;
        textBytes += Buffer.byteLength(text);
        ids.push((await send(from, text, model?.accountId)).id);
      }
      if (!(await replies(ids, BURST_REPLY_CAP_MS)))
        problems.push(
          `db load (${id}): burst: ${ids.filter((x) => bridge.replies.has(x)).length}/${count} replies`,
        );
      const s = await settle(runs0 + count, [key]);
      const cpu = cpuSince(cpu0);
      state = s.state;
      if (!s.settled) problems.push(`db load (${id}): burst did not settle within ${settleCapMs / 1000} s`);
      windowClosed(tracker, [key], before, s.tally);
      const { load, worker, busy } = windowLoad(before, s.tally, [key]);
      measured.push({
        w: {
          id,
          name,
          messages: count,
          runs: s.state.runs - runs0,
          windows: [load],
          settled: s.settled,
          storedBytes: s.state.sizeBytes - stateBefore.sizeBytes,
          indexed: s.state.indexed - stateBefore.indexed,
          sessionsCreated: s.state.sessions - stateBefore.sessions,
          ...(Number.isFinite(cpu) ? { cpuMsPerMessage: cpu / count } : {}),
          textBytesPerMessage:
            (textBytes + ids.reduce((a, x) => a + Buffer.byteLength(bridge.replies.get(x) ?? ""), 0)) / count,
          modelMs: model?.ms ?? 0,
          d1Busy: busy,
        },
        worker: [worker],
        t: tracker,
      });
    };
    await burstWorkload("b", `message to an existing session, burst of ${burst}`, "burst", "first message");
    // The same burst in a session whose model answers as real ones do, not at once: `/new <model>`
    // gives it the HTTP model that answers after SLOW_MODEL_MS.
    await burstWorkload(
      "b2",
      `message to an existing session, burst of ${burst}, model answering in ${SLOW_MODEL_MS} ms`,
      "burst-slow",
      `/new ${SLOW_MODEL_REF}`,
      burst,
      { ms: SLOW_MODEL_MS },
    );

    const existing = await setupSession("existing", "first message");
    await oneAtATime(
      "b1",
      "message to an existing session, one at a time",
      isolated,
      (i) => ({ from: "existing", text: `again ${i}` }),
      undefined,
      undefined,
      existing,
    );

    const tool = await setupSession("tool", "first message");
    await oneAtATime(
      "c",
      "message whose turn makes one tool call (current_time), existing session",
      isolated,
      () => ({ from: "tool", text: "call:current_time {}" }),
      toolReply,
      undefined,
      tool,
    );

    // The same, with the model answering in MODEL_3S_MS (its own agent, through the account).
    if (slow > 0) {
      const m3 = { ms: MODEL_3S_MS, accountId: MODEL_3S_ACCOUNT };
      const secs = `model answering in ${MODEL_3S_MS / 1000} s`;
      await oneAtATime(
        "a-3s",
        `message to a new session, ${secs}`,
        slow,
        (i) => ({ from: `new-3s-${i}`, text: `hello ${i}` }),
        undefined,
        m3,
      );
      const existing3s = await setupSession("existing-3s", "first message", MODEL_3S_ACCOUNT);
      await oneAtATime(
        "b1-3s",
        `message to an existing session, one at a time (a conversation of ${slow}), ${secs}`,
        slow,
        (i) => ({ from: "existing-3s", text: `again ${i}` }),
        undefined,
        m3,
        existing3s,
      );
      const tool3s = await setupSession("tool-3s", "first message", MODEL_3S_ACCOUNT);
      await oneAtATime(
        "c-3s",
        `message whose turn makes one tool call (current_time), existing session, one at a time (a conversation of ${slow}), ${secs}`,
        slow,
        () => ({ from: "tool-3s", text: "call:current_time {}" }),
        toolReply3s,
        m3,
        tool3s,
      );
      await burstWorkload(
        "b-3s",
        `message to an existing session, burst of ${slow}, ${secs}`,
        "burst-3s",
        "first message",
        slow,
        m3,
      );
    }

    /**
     * Many distinct sessions at once: one message to each of `spread` new sessions, then one more
     * to each, SPREAD_CONCURRENCY acks in flight; one window each (replies, then settle). Many
     * keys show how the databases share the load, and many rows what a session stores. A
     * workload's stored bytes run from its start until its sessions' deferred writes landed.
     */
    const spreadWorkload = async (
      id: Workload["id"],
      name: string,
      text: (i: number) => string,
      sessions: string[],
    ) => {
      opts.log(`db load: (${id}) ${name}`);
      await calibrate();
      const { tracker, at: before } = await track(sessions);
      const stateBefore = state;
      const cpu0 = cpuMark();
      const ids: string[] = [];
      const keys = new Set<string>();
      let textBytes = 0;
      let next = 0;
      const lane = async () => {
        while (next < spread) {
          const i = next++;
          const t = text(i);
          textBytes += Buffer.byteLength(t);
          const sent = await send(`spread-${i}`, t);
          ids.push(sent.id);
          keys.add(sent.key);
        }
      };
      await Promise.all(Array.from({ length: SPREAD_CONCURRENCY }, lane));
      if (!(await replies(ids, SPREAD_REPLY_CAP_MS)))
        problems.push(
          `db load (${id}): ${ids.filter((x) => bridge.replies.has(x)).length}/${spread} replies`,
        );
      const s = await settle(stateBefore.runs + spread, [...keys]);
      const cpu = cpuSince(cpu0);
      state = s.state;
      if (!s.settled) problems.push(`db load (${id}) did not settle within ${settleCapMs / 1000} s`);
      windowClosed(tracker, [...keys], before, s.tally);
      const { load, worker, busy } = windowLoad(before, s.tally, [...keys]);
      const entry = {
        w: {
          id,
          name,
          messages: spread,
          runs: s.state.runs - stateBefore.runs,
          windows: [load],
          settled: s.settled,
          storedBytes: s.state.sizeBytes - stateBefore.sizeBytes,
          indexed: s.state.indexed - stateBefore.indexed,
          sessionsCreated: s.state.sessions - stateBefore.sessions,
          ...(Number.isFinite(cpu) ? { cpuMsPerMessage: cpu / spread } : {}),
          textBytesPerMessage:
            (textBytes + ids.reduce((a, x) => a + Buffer.byteLength(bridge.replies.get(x) ?? ""), 0)) /
            spread,
          modelMs: 0,
          d1Busy: busy,
        },
        worker: [worker],
        t: tracker,
        sizeAtStart: stateBefore.sizeBytes,
      };
      measured.push(entry);
      return { entry, keys: [...keys] };
    };
    /** A workload's sessions as they are once what they deferred has landed (and D1's size then). */
    const close = async (entry: (typeof measured)[number]) => {
      const at = await counts([...entry.t.start.keys()]);
      if (at.isolate !== entry.t.isolate)
        throw new IsolateRestartError(
          `db load (${entry.w.id}): workerd started the Worker's isolate again before its sessions' deferred writes landed`,
        );
      entry.t.end = at.bySession ?? {};
      if (entry.sizeAtStart !== undefined) {
        state = await d1State();
        entry.w.storedBytes = state.sizeBytes - entry.sizeAtStart;
      }
    };
    if (spread > 0) {
      const made = await spreadWorkload(
        "spread-new",
        `message to a new session, ${spread} sessions, ${SPREAD_CONCURRENCY} at a time`,
        (i) => `hello ${i}`,
        [],
      );
      // Their first messages' outcomes are theirs: they land (a minute on) before the next messages.
      await deferredWait(`(spread-new)`);
      await close(made.entry);
      await spreadWorkload(
        "spread-existing",
        `one more message (${SPREAD_TEXT_BYTES} bytes) to each of those ${spread} sessions, ${SPREAD_CONCURRENCY} at a time`,
        (i) => textOf(`again ${i}:`, SPREAD_TEXT_BYTES),
        made.keys,
      );
    }

    // What the workloads' sessions deferred (each conversation's last delivery outcome, written
    // by its actor's alarm a minute on) lands now, and is theirs.
    await deferredWait("the last workload");
    for (const entry of measured) if (!entry.t.end) await close(entry);
    const workloads = measured.map(({ w, worker, t }): Workload => {
      const keys = [...t.start.keys()];
      const end = t.end ?? {};
      const late = keys.map((k) => sessionLoad(end[k], t.lastWindow.get(k)));
      const lateLoad = sum(late);
      if (lateLoad.d1RoundTrips !== lateLoad.outcomeRoundTrips)
        problems.push(
          `db load (${w.id}): after its windows closed its sessions made ${lateLoad.d1RoundTrips} D1 round trips, ${lateLoad.outcomeRoundTrips} of them outcome writes: a longer --quiet-ms or --settle-cap-ms would keep the others in their windows`,
        );
      return {
        ...w,
        load: sum([...keys.map((k) => sessionLoad(end[k], t.start.get(k))), ...worker]),
        late: lateLoad,
        lateWindows: late.filter(somethingIn).length,
        sessions: keys.length,
      };
    });

    // Reads, once nothing is deferred: each call's window closes once the counts stayed still for
    // READ_QUIET_MS.
    const reads: ReadLoad[] = [];
    const readQuiet = async (): Promise<Tally> => {
      const s = await still(READ_QUIET_MS, settleCapMs, false);
      if (!s.still)
        problems.push(`db load: a read's counts did not stay still within ${settleCapMs / 1000} s`);
      return counts();
    };
    const someRun = (await rpc<{ runs: Array<{ runId: string }> }>("runs.list", { limit: 1 })).runs[0];
    const readOf = async (id: ReadLoad["id"], name: string, call: () => Promise<unknown>) => {
      opts.log(`db load: read ${name}, ${isolated} calls one at a time`);
      const windows: Load[] = [];
      for (let i = 0; i < isolated; i++) {
        const before = await readQuiet();
        await call();
        windows.push(delta(before, await readQuiet()));
      }
      reads.push({ id, name, calls: isolated, load: sum(windows) });
    };
    await readOf("sessions.list", "sessions.list (limit 50)", () => rpc("sessions.list", { limit: 50 }));
    await readOf("runs.list", "runs.list (limit 50)", () => rpc("runs.list", { limit: 50 }));
    if (someRun) await readOf("runs.get", "runs.get", () => rpc("runs.get", { runId: someRun.runId }));
    else problems.push("db load: runs.list found no run to read with runs.get");

    const end = await counts();
    await sleep(IDLE_WATCH_MS);
    const late = delta(end, await counts());
    if (late.d1RoundTrips || late.doExecs || Object.keys(late.storageCalls).length)
      problems.push(
        `db load: after the last window settled, ${IDLE_WATCH_MS / 1000} s more brought ${late.d1Statements} D1 statements in ${late.d1RoundTrips} round trips and ${late.doStatements} DO SQL statements`,
      );
    if (!end.patchedOk) problems.push("db load: an actor's storage patch did not take");
    if (end.d1.unmetered)
      problems.push(
        `db load: ${end.d1.unmetered} D1 round trips carried no meta the entry could read: their rows are missing`,
      );
    if (end.sessions.unkeyed)
      problems.push(
        `db load: ${end.sessions.unkeyed} actor instance(s) never learned their session key: their load is in no workload`,
      );
    for (const w of workloads)
      if (w.runs !== w.messages)
        problems.push(`db load (${w.id}): ${w.runs} runs for ${w.messages} messages`);
    const last = await d1State();
    const sessionsByBinding = Object.fromEntries(
      Object.entries(last.byBinding).map(([name, st]) => [name, st.sessions]),
    );
    return { databases, workloads, reads, sessionsByBinding, problems };
  } catch (error) {
    if (error instanceof IsolateRestartError && server)
      error.message += `\nwrangler's output (tail):\n${server.output().slice(-3000)}`;
    throw error;
  } finally {
    await server?.stop();
    await bridge.close();
    slowModel.close();
    model3s.close();
    rmSync(wranglerConfig, { force: true });
  }
}

const fixed = (v: number) => (Number.isFinite(v) ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : "n/a");

/** Each binding's share of `load`'s D1 statements, e.g. "DB 26%, DB_1 24%…" (empty for one). */
export function shares(load: Load): string {
  const entries = Object.entries(load.byBinding).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length < 2 || load.d1Statements === 0) return "";
  return entries
    .map(([name, b]) => `${name} ${((100 * b.statements) / load.d1Statements).toFixed(0)}%`)
    .join(", ");
}

/** The per-message figures of a workload (run.ts's row and the table below use them). */
export function perMessage(w: Workload) {
  const per = (v: number) => v / w.messages;
  const range = (f: (l: Load) => number) => {
    if (w.windows.length < 2) return "";
    const vs = w.windows.map(f);
    const lo = Math.min(...vs);
    const hi = Math.max(...vs);
    return lo === hi ? `every message ${lo}` : `${lo}–${hi}`;
  };
  const spread = shares(w.load);
  return {
    d1Statements: per(w.load.d1Statements),
    d1RoundTrips: per(w.load.d1RoundTrips),
    d1RoundTripsPerRun: w.load.d1RoundTrips / w.runs,
    doStatements: per(w.load.doStatements),
    doRequests: per(w.load.doRequests),
    detail: [
      `${w.messages} messages, ${w.runs} runs, ${w.sessions} session${w.sessions === 1 ? "" : "s"}`,
      `D1 round trips per message: Worker ${fixed(per(w.load.workerRoundTrips))}, actors ${fixed(per(w.load.actorRoundTrips))}: by its runs ${fixed(per(w.load.d1RoundTrips - w.load.outcomeRoundTrips))}, deferred outcome writes ${fixed(per(w.load.outcomeRoundTrips))}`,
      `calls ${Object.entries(w.load.byCall)
        .map(([k, v]) => `${k} ${fixed(per(v))}`)
        .join(", ")}`,
      spread ? `statements by database: ${spread}` : "",
      w.windows.length > 1
        ? `per message in its window: D1 statements ${range((l) => l.d1Statements)}, round trips ${range((l) => l.d1RoundTrips)}, DO SQL ${range((l) => l.doStatements)}`
        : "",
      `DO SQL exec calls ${fixed(per(w.load.doExecs))}${w.load.doPlatform ? ` (and ${fixed(per(w.load.doPlatform))} statements of miniflare's own, left out)` : ""}; other DO storage calls ${
        Object.entries(w.load.storageCalls)
          .map(([k, v]) => `${k} ${fixed(per(v))}`)
          .join(", ") || "none"
      }`,
      `DO requests per message ${fixed(per(w.load.doRequests))} (${
        Object.entries(w.load.doRequestsByMethod)
          .map(([k, v]) => `${k} ${fixed(per(v))}`)
          .join(", ") || "none"
      })`,
      `stored ${fixed(per(w.storedBytes))} bytes per message${w.sessionsCreated ? ` (${w.sessionsCreated} sessions created)` : ""}${w.textBytesPerMessage !== undefined ? `, of ${fixed(w.textBytesPerMessage)} bytes of text and reply` : ""}`,
      w.cpuMsPerMessage !== undefined ? `workerd CPU ${fixed(w.cpuMsPerMessage)} ms per message` : "",
      `usage rollup per message: ${fixed(per(w.load.usageStatements))} statements, ${fixed(per(w.load.usageRowsWritten))} D1 rows written, ${fixed(per(w.load.usageRowsRead))} read, ${fixed(per(w.load.usageRoundTrips))} round trips of its own`,
      `rows written per message: D1 ${fixed(per(w.load.d1RowsWritten))} (by its runs ${fixed(per(w.load.d1RowsWritten - w.load.outcomeRowsWritten))}, of which outcomes carried ${fixed(per(w.load.carriedRowsWritten))}; deferred outcome writes ${fixed(per(w.load.outcomeRowsWritten))}), DO ${fixed(per(w.load.doRowsWritten + (w.load.storageCalls.setAlarm ?? 0)))} (alarms included); rows read: D1 ${fixed(per(w.load.d1RowsRead))}, DO ${fixed(per(w.load.doRowsRead))}`,
      `DO active ${fixed(per(w.load.doActiveMs))} ms per message (in calls ${fixed(per(w.load.doCallsMs))} ms; actor timers ${
        Object.entries(w.load.doTimers)
          .map(([k, v]) => `${k} ${fixed(per(v))}`)
          .join(", ") || "none"
      }); Worker requests ${fixed(per(w.load.workerRequests))}`,
      w.lateWindows
        ? `after their windows (deferred) ${w.lateWindows} of its sessions: D1 ${fixed(per(w.late.d1RoundTrips))} round trips, ${fixed(per(w.late.d1RowsWritten))} rows written, DO ${fixed(per(w.late.doRowsWritten + (w.late.storageCalls.setAlarm ?? 0)))} rows written, ${fixed(per(w.late.doRequests))} requests per message`
        : "",
      w.settled ? "" : "NOT SETTLED within the cap",
    ]
      .filter(Boolean)
      .join("; "),
  };
}

/** A workload's billable units per message (what Cloudflare bills for; docs/capacity.md). */
export interface Billing {
  d1Statements: number;
  d1RoundTrips: number;
  d1RowsWritten: number;
  d1RowsRead: number;
  /** D1 round trips whose rows could not be read (0: every row is in the sums). */
  d1Unmetered: number;
  doSqlStatements: number;
  /**
   * Durable Object rows written: its SQL's, and one per `setAlarm`: "Each `setAlarm()` is billed
   * as a single row written" (https://developers.cloudflare.com/durable-objects/platform/pricing/,
   * SQLite storage backend, footnote 3).
   */
  doRowsWritten: number;
  doSqlRowsWritten: number;
  doAlarmRowsWritten: number;
  /** `deleteAlarm` calls: the same page says nothing of them, so they add no row (counted apart). */
  doDeleteAlarms: number;
  doRowsRead: number;
  doRequests: number;
  /** Durable Object wall time: in calls and alarms, and all of it active (what is billed), ms. */
  doCallsMs: number;
  doActiveMs: number;
  /** doActiveMs as Cloudflare bills it: 128 MB × seconds. */
  doGbSeconds: number;
  workerRequests: number;
  /** workerd's CPU (Worker, actors, local D1 and SQLite): an upper bound of the Worker's billed CPU. */
  cpuMs?: number;
}

export function billingOf(w: Workload): Billing {
  const per = (v: number) => v / w.messages;
  const l = w.load;
  const alarms = l.storageCalls.setAlarm ?? 0;
  return {
    d1Statements: per(l.d1Statements),
    d1RoundTrips: per(l.d1RoundTrips),
    d1RowsWritten: per(l.d1RowsWritten),
    d1RowsRead: per(l.d1RowsRead),
    d1Unmetered: per(l.d1Unmetered),
    doSqlStatements: per(l.doStatements),
    doRowsWritten: per(l.doRowsWritten + alarms),
    doSqlRowsWritten: per(l.doRowsWritten),
    doAlarmRowsWritten: per(alarms),
    doDeleteAlarms: per(l.storageCalls.deleteAlarm ?? 0),
    doRowsRead: per(l.doRowsRead),
    doRequests: per(l.doRequests),
    doCallsMs: per(l.doCallsMs),
    doActiveMs: per(l.doActiveMs),
    doGbSeconds: (per(l.doActiveMs) / 1000) * DO_GB,
    workerRequests: per(l.workerRequests),
    ...(w.cpuMsPerMessage !== undefined ? { cpuMs: w.cpuMsPerMessage } : {}),
  };
}

/** The `n` keys of `m` with the most, per message (`of` messages), most first. */
export function top(m: Record<string, number>, of: number, n = 10): Array<[string, number]> {
  return Object.entries(m)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, n)
    .map(([k, v]) => [k, v / of]);
}

/** The per-call figures of a read. */
export function perCall(r: ReadLoad) {
  const per = (v: number) => v / r.calls;
  const byBinding = Object.fromEntries(
    Object.entries(r.load.byBinding).map(([name, b]) => [name, per(b.statements)]),
  );
  return {
    d1Statements: per(r.load.d1Statements),
    d1RoundTrips: per(r.load.d1RoundTrips),
    byBinding,
    detail: [
      `${r.calls} calls`,
      Object.keys(byBinding).length > 1
        ? `statements per call by database: ${Object.entries(byBinding)
            .sort(([a], [b]) => a.localeCompare(b))
            .map(([name, v]) => `${name} ${fixed(v)}`)
            .join(", ")}`
        : "",
      `DO requests per call ${fixed(per(r.load.doRequests))}`,
    ]
      .filter(Boolean)
      .join("; "),
  };
}

/** The table of the standalone run (and the breakdown by SQL text, per message). */
export function dbLoadReport(result: DbLoadResult, breakdown: boolean): string[] {
  const out = [
    `D1 databases (storage.d1): ${result.databases.join(", ")}`,
    "",
    "| workload | D1 statements/msg | D1 round trips/msg | D1 round trips/run | DO SQL statements/msg | DO requests/msg | detail |",
    "|---|---|---|---|---|---|---|",
  ];
  for (const w of result.workloads) {
    const p = perMessage(w);
    out.push(
      `| (${w.id}) ${w.name} | ${fixed(p.d1Statements)} | ${fixed(p.d1RoundTrips)} | ${fixed(p.d1RoundTripsPerRun)} | ${fixed(p.doStatements)} | ${fixed(p.doRequests)} | ${p.detail} |`,
    );
  }
  out.push("", "| read | D1 statements/call | D1 round trips/call | detail |", "|---|---|---|---|");
  for (const r of result.reads) {
    const p = perCall(r);
    out.push(`| ${r.name} | ${fixed(p.d1Statements)} | ${fixed(p.d1RoundTrips)} | ${p.detail} |`);
  }
  if (result.databases.length > 1)
    out.push(
      "",
      `Sessions by database at the end: ${Object.entries(result.sessionsByBinding)
        .map(([name, v]) => `${name} ${v}`)
        .join(", ")}`,
    );
  if (breakdown) {
    for (const w of result.workloads) {
      out.push("", `(${w.id}) ${w.name}: statements per message by SQL text`);
      const bySql = (m: Record<string, number>) =>
        Object.entries(m)
          .sort((a, b) => b[1] - a[1])
          .map(([sql, v]) => `    ${fixed(v / w.messages).padStart(6)}  ${sql}`);
      out.push(
        "  D1 (origin, SQL):",
        ...bySql(w.load.d1Sql),
        "  Durable Object SQL:",
        ...bySql(w.load.doSql),
      );
      const rows = (written: Record<string, number>, read: Record<string, number>) =>
        [...new Set([...Object.keys(written), ...Object.keys(read)])]
          .sort((a, b) => (written[b] ?? 0) - (written[a] ?? 0) || (read[b] ?? 0) - (read[a] ?? 0))
          .map(
            (sql) =>
              `    ${fixed((written[sql] ?? 0) / w.messages).padStart(6)} ${fixed((read[sql] ?? 0) / w.messages).padStart(8)}  ${sql}`,
          );
      out.push(
        `(${w.id}) rows per message by SQL text (written, read)`,
        "  D1 (origin, SQL):",
        ...rows(w.load.d1SqlRowsWritten, w.load.d1SqlRowsRead),
        "  Durable Object SQL:",
        ...rows(w.load.doSqlRowsWritten, w.load.doSqlRowsRead),
        `    ${fixed((w.load.storageCalls.setAlarm ?? 0) / w.messages).padStart(6)} ${"".padStart(8)}  setAlarm (billed as one row written each)`,
      );
    }
    for (const r of result.reads) {
      out.push("", `${r.name}: statements per call by SQL text`);
      out.push(
        ...Object.entries(r.load.d1Sql)
          .sort((a, b) => b[1] - a[1])
          .map(([sql, v]) => `    ${fixed(v / r.calls).padStart(6)}  ${sql}`),
      );
    }
  }
  if (result.problems.length) out.push("", "Problems seen:", ...result.problems.map((p) => `- ${p}`));
  return out;
}

/** One workload's figures in the result file. */
export interface MeasuredWorkload {
  name: string;
  messages: number;
  runs: number;
  d1StatementsPerMessage: number;
  d1RoundTripsPerMessage: number;
  d1RoundTripsPerRun: number;
  doSqlStatementsPerMessage: number;
  doRequestsPerMessage: number;
  /** D1 statements per message by binding. */
  d1StatementsByBinding: Record<string, number>;
  /** What the databases grew by per message (bytes). */
  storedBytesPerMessage: number;
  /** D1 rows written per message by the transcript search index (one per indexed message); absent in older files. */
  searchIndexRowsPerMessage?: number;
  /**
   * The usage rollup per message (`usage_daily` upserts, one per run, in its finalize's batch):
   * its statements and D1 rows written, and `roundTrips`, the round trips of its own (what it
   * adds). Absent in older files.
   */
  usageRollup?: D1Share;
  sessionsCreated: number;
  /** Bytes of a message's text and its reply's, where known. */
  textBytesPerMessage?: number;
  cpuMsPerMessage?: number;
  settled: boolean;
  /** How long the session's model took to answer (0: the echo model). Absent in older files. */
  modelMs?: number;
  /** Billable units per message. Absent in older files. */
  billing?: Billing;
  /** Timers the actors set per message, by kind and delay: each keeps its actor active (billed) until it fires. */
  doTimers?: Record<string, number>;
  /** The 10 SQL texts that wrote the most rows, rows written per message (D1: `<origin> <SQL>`). */
  rowsWrittenBySql?: { d1: Array<[string, number]>; do: Array<[string, number]> };
  /**
   * Older files only (measured in whole-gateway windows): windows after which more was counted
   * before the next one opened (late writes), and what.
   */
  late?: {
    windows: number;
    d1RowsWritten: number;
    doRowsWritten: number;
    d1Statements: number;
    doStatements: number;
  };
  /**
   * How the figures were counted: `session`, per session key (each of the workload's sessions
   * from its start until what it deferred had landed). Absent in older files: the figures were
   * the whole gateway's in the workload's windows.
   */
  attribution?: "session";
  /** Its sessions. Absent in older files. */
  sessions?: number;
  /**
   * Its D1 round trips, statements and rows written per message by where they come from: `runs`,
   * its runs' own writes (a new session's key binding, each run's finalize, which carries the
   * session's earlier delivery outcomes: `carried`, part of `runs`); `outcomes`, the outcome
   * writes (a delivery's outcome no run's write carried, written alone by its actor's alarm a
   * minute after its attempt). `runs` + `outcomes` are the totals. Absent in older files.
   */
  d1Split?: { runs: D1Share; outcomes: D1Share; carried: D1Share };
  /** What its sessions caused after their last window closed (the deferred writes), per message. */
  deferred?: {
    sessions: number;
    d1RoundTrips: number;
    d1RowsWritten: number;
    doRowsWritten: number;
    doRequests: number;
  };
}

/** D1 round trips, statements and rows written per message (one part of a workload's). */
export interface D1Share {
  roundTrips: number;
  statements: number;
  rowsWritten: number;
}

/**
 * bench/results/db-load.json: what `npm run capacity` reads when it is not told to measure. Per
 * message (and per read) figures only; the SQL breakdown stays in the printed report.
 */
export interface DbLoadMeasurement {
  version: 1;
  measuredAt: string;
  /**
   * The commit the gateway was measured at, and whether src/, migrations/ or wrangler.toml
   * differed from it; `bench`: the counting entry's checkout (bench/floor), when it was another
   * one (`--repo`), and whether its bench/floor differed from its commit.
   */
  source: { commit: string; changed: boolean; bench?: { commit: string; changed: boolean } };
  /** The windows' quiet period and cap (ms), and the `-3s` workloads' model latency. Absent in older files. */
  quietMs?: number;
  settleCapMs?: number;
  /** The longest the run waited for the actors' deferred writes (ms). Absent in older files. */
  deferredWaitMs?: number;
  model3sMs?: number;
  databases: string[];
  workloads: Partial<Record<Workload["id"], MeasuredWorkload>>;
  reads: Partial<
    Record<
      ReadLoad["id"],
      {
        name: string;
        calls: number;
        d1StatementsPerCall: number;
        d1RoundTripsPerCall: number;
        d1StatementsByBinding: Record<string, number>;
      }
    >
  >;
  /** The local D1's busy time per statement over the message workloads (ms; transport included). */
  localD1MsPerStatement: number;
  sessionsByBinding: Record<string, number>;
  problems: string[];
}

/** A workload's D1 per message: its runs' own writes, the outcome writes, the outcomes its runs carried. */
export function d1SplitOf(w: Workload): { runs: D1Share; outcomes: D1Share; carried: D1Share } {
  const per = (v: number) => v / w.messages;
  const l = w.load;
  return {
    runs: {
      roundTrips: per(l.d1RoundTrips - l.outcomeRoundTrips),
      statements: per(l.d1Statements - l.outcomeStatements),
      rowsWritten: per(l.d1RowsWritten - l.outcomeRowsWritten),
    },
    outcomes: {
      roundTrips: per(l.outcomeRoundTrips),
      statements: per(l.outcomeStatements),
      rowsWritten: per(l.outcomeRowsWritten),
    },
    carried: {
      roundTrips: per(l.carriedRoundTrips),
      statements: per(l.carriedStatements),
      rowsWritten: per(l.carriedRowsWritten),
    },
  };
}

/** The commit of `repo` and whether `paths` differ from it there (unknown outside git). */
function commitOf(repo: string, paths: string[]): { commit: string; changed: boolean } {
  try {
    const git = (...args: string[]) => execFileSync("git", args, { cwd: repo, encoding: "utf8" }).trim();
    return { commit: git("rev-parse", "HEAD"), changed: git("status", "--porcelain", "--", ...paths) !== "" };
  } catch {
    return { commit: "unknown", changed: true };
  }
}

/** The gateway's commit (`repo`) and the counting entry's (`bench`, this checkout unless told). */
function sourceOf(repo: string, bench = repo): DbLoadMeasurement["source"] {
  const gateway = ["src", "migrations", "wrangler.toml"];
  if (path.resolve(bench) === path.resolve(repo)) return commitOf(repo, [...gateway, "bench/floor"]);
  return { ...commitOf(repo, gateway), bench: commitOf(bench, ["bench/floor"]) };
}

export function measurementOf(
  result: DbLoadResult,
  repo: string,
  settings: { bench?: string; quietMs?: number; settleCapMs?: number; deferredWaitMs?: number } = {},
): DbLoadMeasurement {
  const workloads: DbLoadMeasurement["workloads"] = {};
  let busyMs = 0;
  let statements = 0;
  for (const w of result.workloads) {
    const p = perMessage(w);
    busyMs += w.d1Busy.ms;
    statements += w.d1Busy.statements;
    workloads[w.id] = {
      name: w.name,
      messages: w.messages,
      runs: w.runs,
      d1StatementsPerMessage: p.d1Statements,
      d1RoundTripsPerMessage: p.d1RoundTrips,
      d1RoundTripsPerRun: p.d1RoundTripsPerRun,
      doSqlStatementsPerMessage: p.doStatements,
      doRequestsPerMessage: p.doRequests,
      d1StatementsByBinding: Object.fromEntries(
        Object.entries(w.load.byBinding).map(([name, b]) => [name, b.statements / w.messages]),
      ),
      storedBytesPerMessage: w.storedBytes / w.messages,
      searchIndexRowsPerMessage: w.indexed / w.messages,
      usageRollup: {
        roundTrips: w.load.usageRoundTrips / w.messages,
        statements: w.load.usageStatements / w.messages,
        rowsWritten: w.load.usageRowsWritten / w.messages,
      },
      sessionsCreated: w.sessionsCreated,
      ...(w.textBytesPerMessage !== undefined ? { textBytesPerMessage: w.textBytesPerMessage } : {}),
      ...(w.cpuMsPerMessage !== undefined ? { cpuMsPerMessage: w.cpuMsPerMessage } : {}),
      settled: w.settled,
      modelMs: w.modelMs,
      billing: billingOf(w),
      doTimers: Object.fromEntries(Object.entries(w.load.doTimers).map(([k, v]) => [k, v / w.messages])),
      rowsWrittenBySql: {
        d1: top(w.load.d1SqlRowsWritten, w.messages),
        do: top(w.load.doSqlRowsWritten, w.messages),
      },
      attribution: "session",
      sessions: w.sessions,
      d1Split: d1SplitOf(w),
      deferred: {
        sessions: w.lateWindows,
        d1RoundTrips: w.late.d1RoundTrips / w.messages,
        d1RowsWritten: w.late.d1RowsWritten / w.messages,
        doRowsWritten: (w.late.doRowsWritten + (w.late.storageCalls.setAlarm ?? 0)) / w.messages,
        doRequests: w.late.doRequests / w.messages,
      },
    };
  }
  const reads: DbLoadMeasurement["reads"] = {};
  for (const r of result.reads) {
    const p = perCall(r);
    reads[r.id] = {
      name: r.name,
      calls: r.calls,
      d1StatementsPerCall: p.d1Statements,
      d1RoundTripsPerCall: p.d1RoundTrips,
      d1StatementsByBinding: p.byBinding,
    };
  }
  return {
    version: 1,
    measuredAt: new Date().toISOString(),
    source: sourceOf(repo, settings.bench),
    quietMs: settings.quietMs ?? QUIET_MS,
    settleCapMs: settings.settleCapMs ?? SETTLE_CAP_MS,
    deferredWaitMs: settings.deferredWaitMs ?? DEFERRED_WAIT_MS,
    model3sMs: MODEL_3S_MS,
    databases: result.databases,
    workloads,
    reads,
    localD1MsPerStatement: statements ? busyMs / statements : Number.NaN,
    sessionsByBinding: result.sessionsByBinding,
    problems: result.problems,
  };
}

export function writeMeasurement(repo: string, m: DbLoadMeasurement, file = RESULT_FILE): string {
  const target = path.resolve(repo, file);
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, `${JSON.stringify(m, null, 2)}\n`);
  // The file is committed: left as the repository's formatter writes it, `npm run lint` stays clean.
  try {
    execFileSync(path.join(repo, "node_modules/.bin/biome"), ["format", "--write", target], {
      cwd: repo,
      stdio: "ignore",
    });
  } catch {
    // unformatted JSON is still the measurement
  }
  return target;
}

/** What a gateway snapshot holds of the repository (node_modules is linked, not copied). */
const SNAPSHOT_ENTRIES = [
  "src",
  "migrations",
  "scripts/lib",
  "bench/floor",
  "wrangler.toml",
  "package.json",
  "tsconfig.json",
];

/**
 * Copies the sources a gateway runs from `repo` into `root`, and links its node_modules; the
 * counting entry (bench/floor) from `bench` when given (another checkout's gateway, measured
 * with this one's entry, so two revisions are counted alike).
 */
export function copySources(repo: string, root: string, bench = repo): void {
  for (const entry of SNAPSHOT_ENTRIES) {
    const from = path.join(entry === "bench/floor" ? bench : repo, entry);
    if (existsSync(from)) cpSync(from, path.join(root, entry), { recursive: true });
  }
  symlinkSync(path.join(repo, "node_modules"), path.join(root, "node_modules"), "dir");
}

/** Standalone: a snapshot of the working tree (wrangler dev reloads on any change in it). */
function snapshot(repo: string, bench = repo): string {
  const root = mkdtempSync(path.join(tmpdir(), "switchboard-bench-db-load-src-"));
  copySources(repo, root, bench);
  return root;
}

/** `count` D1 binding names: DB, then DB_1, DB_2… (as `--databases` and the capacity simulation use them). */
export function databaseNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => (i === 0 ? "DB" : `DB_${i}`));
}

/**
 * The measurement on a snapshot of `repo`'s working tree, in a throwaway persistence directory:
 * what the standalone run and `npm run capacity -- --measure` do.
 */
export async function measureDbLoad(
  repo: string,
  opts: {
    isolated?: number;
    burst?: number;
    spread?: number;
    d1?: readonly string[];
    slow?: number;
    quietMs?: number;
    settleCapMs?: number;
    deferredWaitMs?: number;
    /** The checkout whose counting entry (bench/floor) runs the gateway (default: `repo`). */
    bench?: string;
    log: (m: string) => void;
  },
): Promise<DbLoadResult> {
  const { bench, ...rest } = opts;
  const root = snapshot(repo, bench);
  try {
    const { scratchDir, startLocalServer } = (await import(
      pathToFileURL(path.join(root, "scripts/lib/local-server.ts")).href
    )) as typeof import("../scripts/lib/local-server.ts");
    const persistTo = scratchDir("switchboard-bench-db-load-");
    try {
      return await benchDbLoad({ start: startLocalServer, root, persistTo, ...rest });
    } finally {
      rmSync(persistTo, { recursive: true, force: true });
    }
  } finally {
    // The snapshot links node_modules: unlink that first, so nothing can ever follow it.
    rmSync(path.join(root, "node_modules"), { force: true });
    rmSync(root, { recursive: true, force: true });
  }
}

/** A number for the billing table: 3 significant digits below 100, whole above. */
function num(v: number | undefined): string {
  if (v === undefined || !Number.isFinite(v)) return "—";
  if (v === 0) return "0";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  return String(Number(v.toPrecision(3)));
}

/** The order of the billing table: each 3 s workload beside its instant twin. */
const BILLING_ORDER: ReadonlyArray<Workload["id"]> = [
  "a-3s",
  "a",
  "b1-3s",
  "b1",
  "c-3s",
  "c",
  "b-3s",
  "b",
  "b2",
  "spread-new",
  "spread-existing",
];

/** `commit (date)` of a measurement, for a table's labels. */
export const labelOf = (m: DbLoadMeasurement) =>
  `${m.source.commit.slice(0, 7)}${m.source.changed ? "+changes" : ""} ${m.measuredAt.slice(0, 10)}`;

/**
 * The billable units per message of each workload (bench/results/db-load.json's `billing`), and
 * with `base`, the same workload of that file on the row below, so two revisions read side by side.
 */
export function billingReport(m: DbLoadMeasurement, base?: DbLoadMeasurement): string[] {
  const out = [
    `Billable units per message (${labelOf(m)}${base ? `; base: ${labelOf(base)}` : ""}): D1 and DO rows as the engine counts them (index rows included), DO rows written with one per setAlarm; DO active: while an actor handles a call or alarm, or has a waitUntil promise or a timer pending (what Cloudflare bills as duration); GB-s = ${DO_GB} GB × active seconds; CPU: workerd's (Worker, actors, local D1 and SQLite), an upper bound.`,
    "",
    "| workload | model | D1 statements | D1 round trips | D1 rows written | D1 rows read | DO SQL statements | DO rows written (alarms) | DO rows read | DO requests | DO active ms (in calls) | DO GB-s | Worker requests | CPU ms |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  const rowOf = (name: string, w: MeasuredWorkload | undefined) => {
    if (!w) return `| ${name} | — | ${Array(12).fill("—").join(" | ")} |`;
    const b = w.billing;
    // An older file has the statements and requests, not the billable units (shown as —).
    if (!b)
      return `| ${name} | — | ${num(w.d1StatementsPerMessage)} | ${num(w.d1RoundTripsPerMessage)} | — | — | ${num(w.doSqlStatementsPerMessage)} | — | — | ${num(w.doRequestsPerMessage)} | — | — | — | ${num(w.cpuMsPerMessage)} |`;
    const model = w.modelMs ? `${w.modelMs / 1000} s` : "instant";
    return `| ${name} | ${model} | ${num(b.d1Statements)} | ${num(b.d1RoundTrips)} | ${num(b.d1RowsWritten)}${b.d1Unmetered ? ` (+${num(b.d1Unmetered)} unmetered)` : ""} | ${num(b.d1RowsRead)} | ${num(b.doSqlStatements)} | ${num(b.doRowsWritten)} (${num(b.doAlarmRowsWritten)}) | ${num(b.doRowsRead)} | ${num(b.doRequests)} | ${num(b.doActiveMs)} (${num(b.doCallsMs)}) | ${num(b.doGbSeconds)} | ${num(b.workerRequests)} | ${num(b.cpuMs ?? w.cpuMsPerMessage)} |`;
  };
  const ids = [
    ...BILLING_ORDER,
    ...(Object.keys(m.workloads) as Array<Workload["id"]>).filter((id) => !BILLING_ORDER.includes(id)),
  ];
  for (const id of ids) {
    const w = m.workloads[id];
    if (!w) continue;
    out.push(rowOf(`(${id}) ${w.name}`, w));
    if (base) out.push(rowOf(`  base ${labelOf(base)}`, base.workloads[id]));
  }
  // Counted per session (an older file's figures were its windows', with no split).
  if (Object.values(m.workloads).some((w) => w?.attribution === "session")) {
    out.push("", ...splitReport(m, base, ids));
    const deferred = ids.flatMap((id) => {
      const d = m.workloads[id]?.deferred;
      return d?.sessions
        ? [
            `(${id}) ${d.sessions} session${d.sessions === 1 ? "" : "s"}: ${num(d.d1RoundTrips)} D1 round trips, ${num(d.d1RowsWritten)} D1 and ${num(d.doRowsWritten)} DO rows written, ${num(d.doRequests)} DO requests per message`,
          ]
        : [];
    });
    out.push(
      "",
      `Counted per session (each workload's figures are its sessions', from its start until what they deferred had landed, waited for up to ${(m.deferredWaitMs ?? DEFERRED_WAIT_MS) / 1000} s; windows: quiet ${m.quietMs ?? QUIET_MS} ms, cap ${(m.settleCapMs ?? SETTLE_CAP_MS) / 1000} s). After their windows closed: ${deferred.length ? deferred.join("; ") : "nothing"}.`,
    );
  } else {
    const late = ids.flatMap((id) => {
      const l = m.workloads[id]?.late;
      return l?.windows
        ? [
            `(${id}) ${l.windows} windows: ${l.d1RowsWritten} D1 and ${l.doRowsWritten} DO rows written after they closed`,
          ]
        : [];
    });
    out.push(
      "",
      `Late writes (counted after a window closed; quiet ${m.quietMs ?? QUIET_MS} ms, cap ${(m.settleCapMs ?? SETTLE_CAP_MS) / 1000} s): ${late.length ? late.join("; ") : "none"}.`,
    );
  }
  return out;
}

/**
 * Each workload's D1 round trips and rows written per message by where they come from (its
 * runs' own writes, and the outcome writes), with the DO rows written beside them and the sum,
 * and with `base` the same workload of that file (its totals: an older file has no split) and
 * the ratio of the rows written to its.
 */
export function splitReport(
  m: DbLoadMeasurement,
  base: DbLoadMeasurement | undefined,
  ids: ReadonlyArray<Workload["id"]>,
): string[] {
  const out = [
    "D1 round trips and rows written per message by where they come from: by its runs (a new session's key binding, each run's finalize, which carries the session's earlier delivery outcomes: carried) and deferred outcome writes (a delivery's outcome no run's write carried, written alone by its actor's alarm a minute after its attempt: a conversation's last one).",
    "",
    `| workload | D1 round trips | by its runs | deferred outcome writes | D1 rows written | by its runs (outcomes carried) | deferred outcome writes | DO rows written | D1 + DO rows written${base ? " (÷ base)" : ""} |`,
    "|---|---|---|---|---|---|---|---|---|",
  ];
  const rowsOf = (w: MeasuredWorkload | undefined) =>
    w?.billing ? w.billing.d1RowsWritten + w.billing.doRowsWritten : undefined;
  const rowOf = (name: string, w: MeasuredWorkload | undefined, against?: MeasuredWorkload) => {
    if (!w) return `| ${name} | ${Array(8).fill("—").join(" | ")} |`;
    const b = w.billing;
    const split = w.d1Split;
    const rows = rowsOf(w);
    const was = rowsOf(against);
    const ratio = rows !== undefined && was ? ` (${(rows / was).toFixed(2)})` : "";
    return `| ${name} | ${num(b?.d1RoundTrips ?? w.d1RoundTripsPerMessage)} | ${num(split?.runs.roundTrips)} | ${num(split?.outcomes.roundTrips)} | ${num(b?.d1RowsWritten)} | ${split ? `${num(split.runs.rowsWritten)} (${num(split.carried.rowsWritten)})` : "—"} | ${num(split?.outcomes.rowsWritten)} | ${num(b?.doRowsWritten)} | ${num(rows)}${ratio} |`;
  };
  for (const id of ids) {
    const w = m.workloads[id];
    if (!w) continue;
    out.push(rowOf(`(${id}) ${w.name}`, w, base?.workloads[id]));
    if (base) out.push(rowOf(`  base ${labelOf(base)}`, base.workloads[id]));
  }
  return out;
}

/** The SQL texts that write the most rows, per message, for each workload with the lists. */
export function topRowsReport(m: DbLoadMeasurement, only?: ReadonlyArray<Workload["id"]>): string[] {
  const out: string[] = [];
  for (const id of only ?? BILLING_ORDER) {
    const w = m.workloads[id];
    if (!w?.rowsWrittenBySql) continue;
    out.push("", `(${id}) ${w.name}: the statements that write the most rows, rows written per message`);
    out.push(
      "  D1 (origin, SQL):",
      ...w.rowsWrittenBySql.d1.map(([sql, v]) => `    ${num(v).padStart(6)}  ${sql}`),
    );
    out.push(
      "  Durable Object SQL:",
      ...w.rowsWrittenBySql.do.map(([sql, v]) => `    ${num(v).padStart(6)}  ${sql}`),
      ...(w.billing?.doAlarmRowsWritten
        ? [`    ${num(w.billing.doAlarmRowsWritten).padStart(6)}  setAlarm (billed as a row written)`]
        : []),
    );
  }
  return out;
}

/** A result file (bench/results/db-load.json or another), read. */
export function readMeasurementFile(file: string): DbLoadMeasurement {
  const m = JSON.parse(readFileSync(file, "utf8")) as DbLoadMeasurement;
  if (m.version !== 1) throw new Error(`${file} is of version ${m.version}; this bench reads version 1`);
  return m;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const here = path.resolve(import.meta.dirname, "..");
  const usage = `node bench/db-load.ts [isolated=10] [burst=60] [spread=100] [--databases N] [--slow N=${SLOW_MESSAGES}]
  [--quiet-ms MS=${QUIET_MS}] [--settle-cap-ms MS=${SETTLE_CAP_MS}] [--deferred-wait-ms MS=${DEFERRED_WAIT_MS}]
  [--repo DIR] [--out FILE=${RESULT_FILE}] [--base FILE]
node bench/db-load.ts --table FILE [--base FILE]     the billing table of a result file, measuring nothing`;
  let values: ReturnType<typeof parseCli>["values"];
  let positionals: string[];
  try {
    ({ values, positionals } = parseCli());
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : error}\n${usage}\n`);
    process.exit(2);
  }
  const number = (name: string, v: string | undefined, lo: number, hi: number): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n < lo || n > hi) {
      process.stderr.write(`${name} takes ${lo} to ${hi} (got ${v})\n${usage}\n`);
      process.exit(2);
    }
    return n;
  };
  const count = number("--databases", values.databases, 1, 8) ?? 1;
  if (!Number.isInteger(count)) {
    process.stderr.write(`--databases takes 1 to 8 (got ${values.databases})\n`);
    process.exit(2);
  }
  const base = values.base ? readMeasurementFile(path.resolve(values.base)) : undefined;
  if (values.table) {
    const m = readMeasurementFile(path.resolve(values.table));
    console.log([...billingReport(m, base), ...topRowsReport(m)].join("\n"));
    process.exit(0);
  }
  const repo = values.repo ? path.resolve(values.repo) : here;
  const [isolated, burst, spread] = positionals.map(Number);
  const quietMs = number("--quiet-ms", values["quiet-ms"], 200, 120_000);
  const settleCapMs = number("--settle-cap-ms", values["settle-cap-ms"], 1_000, 600_000);
  const deferredWaitMs = number("--deferred-wait-ms", values["deferred-wait-ms"], 0, 600_000);
  const slow = number("--slow", values.slow, 0, MAX_SLOW);
  let failed = false;
  try {
    const result = await measureDbLoad(repo, {
      log: (m) => process.stderr.write(`[bench] ${m}\n`),
      d1: databaseNames(count),
      bench: here,
      ...(isolated ? { isolated } : {}),
      ...(burst ? { burst } : {}),
      ...(spread !== undefined && Number.isFinite(spread) ? { spread } : {}),
      ...(slow !== undefined ? { slow } : {}),
      ...(quietMs !== undefined ? { quietMs } : {}),
      ...(settleCapMs !== undefined ? { settleCapMs } : {}),
      ...(deferredWaitMs !== undefined ? { deferredWaitMs } : {}),
    });
    console.log(dbLoadReport(result, true).join("\n"));
    const measurement = measurementOf(result, repo, {
      bench: here,
      ...(quietMs !== undefined ? { quietMs } : {}),
      ...(settleCapMs !== undefined ? { settleCapMs } : {}),
      ...(deferredWaitMs !== undefined ? { deferredWaitMs } : {}),
    });
    console.log(["", ...billingReport(measurement, base)].join("\n"));
    const file = writeMeasurement(here, measurement, values.out ?? RESULT_FILE);
    process.stderr.write(`[bench] wrote ${path.relative(here, file)}\n`);
  } catch (error) {
    failed = true;
    process.stderr.write(
      `[bench] db load failed: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
    );
  }
  process.exit(failed ? 1 : 0);
}

function parseCli() {
  return parseArgs({
    allowPositionals: true,
    options: {
      databases: { type: "string" },
      slow: { type: "string" },
      "quiet-ms": { type: "string" },
      "settle-cap-ms": { type: "string" },
      "deferred-wait-ms": { type: "string" },
      repo: { type: "string" },
      out: { type: "string" },
      base: { type: "string" },
      table: { type: "string" },
    },
  });
}
