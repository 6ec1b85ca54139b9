/**
 * The gateway as the bench's D1/DO load row (bench/db-load.ts, row 14 of `npm run bench`) runs it
 * under `wrangler dev`: src/index.ts unchanged, behind this entry, which counts what the gateway
 * asks of its storage. Never deployed; bench/db-load.ts points a copy of wrangler.toml (only
 * `main` differs) at it. It lives in bench/floor/ because that is the part of bench/ that
 * type-checks as Worker code (tsconfig.json includes it, tsconfig.node.json leaves it out).
 *
 * - D1: the Worker's `env` and each SessionActor's `env` are the runtime's own, seen through a
 *   Proxy in which every D1 binding named in `storage.d1` (`DB` alone by default) is a counting
 *   wrapper of the real one (one per binding and origin, so the bench can tell the databases
 *   apart, and the Worker's requests from the actors'). A round trip is a call that sends one
 *   request to D1: a statement's `first`, `all`, `run` or `raw`, a `batch`, an `exec`. Its
 *   statements: 1, the batch's length, or the statements of the `exec` text. `prepare` and
 *   `bind` send nothing. Every call is passed on to the real binding as made (a batch with the
 *   real statements the wrapped ones stand for), so the product's code paths and its SQL are
 *   unchanged. Per binding, the time during which at least one call waited for its answer is
 *   summed too (the local D1's busy time).
 * - D1 rows: each answered round trip adds the rows D1 says its statements read and wrote
 *   (`meta.rows_read` / `meta.rows_written`, per statement of a batch), by origin, binding and
 *   SQL text. `first` and `raw` return no meta, so the entry reads it from the answer the
 *   runtime's D1 client received for that same request (see `meterSession`); `run`, `all` and
 *   `batch` results carry it anyway. A round trip whose meta cannot be read is counted as
 *   unmetered.
 * - Durable Object requests: `SESSION_ACTOR` is seen through a Proxy whose stubs count each
 *   method call (RPC, `fetch`) made through them, and the actor's `alarm` counts its own
 *   invocations: what Cloudflare bills and limits as requests to an object.
 * - Durable Object SQL: each SessionActor's `ctx.storage.sql.exec` (and its storage's other
 *   methods: alarms, the key-value API, transactions) is replaced, on that actor's own storage
 *   objects before the actor's constructor runs, by a function that counts and calls the
 *   original. A statement is one SQL statement of the text passed to `exec` (a multi-statement
 *   text counts each); the other methods are counted as calls, by name. Each cursor's
 *   `rowsRead` / `rowsWritten` are added at `exec` and after each call that consumes it, only
 *   what grew (see `meterCursor`). Statements on miniflare's own `__miniflare_*` tables (its
 *   wrapper records each object's name there under `wrangler dev`; production has none) are
 *   counted apart and left out.
 * - Durable Object wall time: each method of the actor's class (on this subclass's prototype)
 *   and its alarm run as one of the actor's intervals, and so do its `ctx.waitUntil` promises and
 *   the timers set during its work (the global setTimeout/setInterval, seen through an
 *   AsyncLocalStorage of the actor at work); per actor, the union of its intervals (see `Activity`).
 * - Worker requests: the entry's `fetch` (the bench's own `/__bench/` requests left out) and
 *   `scheduled` invocations.
 * - Per session: everything an actor causes is also tallied under its session key (the name it
 *   is reached by: `ctx.id.name`, else the key its storage holds, else the `sessionKey` its
 *   first RPC call carries; what it counted before it knew is added once it does): its D1 round
 *   trips (each SessionActor has its own counting env), statements and rows, its DO SQL,
 *   storage calls, requests (stub calls by the name they address, its alarms) and wall time,
 *   and the alarm it has pending (`setAlarm` / `deleteAlarm` / its firing). A write the actor
 *   defers (a delivery's outcome, written alone by its alarm a minute on) is thus its session's
 *   wherever it lands. The Worker's own D1 calls (reads for an RPC) are no session's. Two
 *   kinds of the actor's D1 statements are kept apart as well: delivery-outcome upserts (alone
 *   or carried by a run's write) and the usage rollup's upserts (with the round trips that are
 *   theirs alone).
 *
 * The counts live in this isolate (under `wrangler dev` the Worker and its Durable Objects share
 * one) and are read from outside with `GET /__bench/db-counts` (`?brief`: the few numbers that
 * change when anything does; `?key=K&key=…`: those sessions' tallies too); `GET
 * /__bench/db-still` waits here until they stop changing (one request instead of many polls,
 * each of which costs workerd CPU), `GET /__bench/db-deferred` until no actor has an alarm
 * pending either (every deferred write has landed); `GET /__bench/d1-state`
 * reads the runs, deliveries, sessions and size of every database through the real bindings
 * (not counted) so the bench knows when a message's work has settled and what it stored. Every
 * other request goes to the gateway.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { loadConfig } from "../../src/config/load";
import gateway, { SessionActor as GatewaySessionActor } from "../../src/index";
import type {
  BindingTally,
  BriefTally,
  D1Part,
  D1State,
  DatabaseState,
  DeferredAnswer,
  Origin,
  SessionsBrief,
  SessionTallies,
  SessionTally,
  Tally,
} from "./db-load-tally";

const tally: Tally = {
  // Set on the first request: random values are not allowed in the global scope.
  isolate: "",
  d1: {
    statements: 0,
    roundTrips: 0,
    byOrigin: {
      worker: { statements: 0, roundTrips: 0, rowsRead: 0, rowsWritten: 0 },
      actor: { statements: 0, roundTrips: 0, rowsRead: 0, rowsWritten: 0 },
    },
    byBinding: {},
    byCall: {},
    sql: {},
    rowsRead: 0,
    rowsWritten: 0,
    sqlRowsWritten: {},
    sqlRowsRead: {},
    unmetered: 0,
  },
  doSql: {
    execs: 0,
    statements: 0,
    platform: 0,
    sql: {},
    rowsRead: 0,
    rowsWritten: 0,
    sqlRowsWritten: {},
    sqlRowsRead: {},
  },
  doCalls: {},
  doRequests: { total: 0, byMethod: {} },
  doWall: {
    callsMs: 0,
    activeMs: 0,
    open: 0,
    timersPending: 0,
    timersSet: 0,
    timersOutside: 0,
    timersByDelay: {},
    waitUntils: 0,
  },
  workerRequests: { fetch: 0, scheduled: 0 },
  actors: 0,
  patchedOk: true,
  sessions: { keys: 0, pendingAlarms: 0, firstAlarmAt: null, lastAlarmAt: null, unkeyed: 0 },
};

/** Distinct SQL texts kept per histogram; the rest are summed under "(other)". */
const MAX_KEYS = 400;

function bump(map: Record<string, number>, key: string, by: number): void {
  const k = key in map || Object.keys(map).length < MAX_KEYS ? key : "(other)";
  map[k] = (map[k] ?? 0) + by;
}

/** A SQL text as a histogram key: whitespace folded; a long one keeps its head and its tail. */
function label(sql: string): string {
  const folded = sql.replace(/\s+/g, " ").trim();
  return folded.length <= 180 ? folded : `${folded.slice(0, 110)} … ${folded.slice(-66)}`;
}

/** The SQL statements of a text: `;`-separated, outside quotes and comments, empty ones skipped. */
function statementCount(sql: string): number {
  let count = 0;
  let open = false;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i] as string;
    if (c === "'" || c === '"' || c === "`") {
      const end = sql.indexOf(c, i + 1);
      i = end < 0 ? sql.length : end + 1;
      open = true;
    } else if (c === "-" && sql[i + 1] === "-") {
      const end = sql.indexOf("\n", i);
      i = end < 0 ? sql.length : end + 1;
    } else if (c === "/" && sql[i + 1] === "*") {
      const end = sql.indexOf("*/", i + 2);
      i = end < 0 ? sql.length : end + 2;
    } else {
      if (c === ";") {
        if (open) count++;
        open = false;
      } else if (!/\s/.test(c)) open = true;
      i++;
    }
  }
  return count + (open ? 1 : 0);
}

// ---------------------------------------------------------------------------------------------
// Per session: each actor's load under its session key

const emptyPart = (): D1Part => ({ roundTrips: 0, statements: 0, rowsRead: 0, rowsWritten: 0 });

function emptySession(): SessionTally {
  return {
    d1: {
      statements: 0,
      roundTrips: 0,
      rowsRead: 0,
      rowsWritten: 0,
      unmetered: 0,
      byBinding: {},
      byCall: {},
      sql: {},
      sqlRowsWritten: {},
      sqlRowsRead: {},
      outcomes: emptyPart(),
      carried: emptyPart(),
      usage: emptyPart(),
    },
    doSql: {
      execs: 0,
      statements: 0,
      sql: {},
      rowsRead: 0,
      rowsWritten: 0,
      sqlRowsWritten: {},
      sqlRowsRead: {},
    },
    doCalls: {},
    doRequests: { total: 0, byMethod: {} },
    doWall: { callsMs: 0, activeMs: 0, timersSet: 0, timersByDelay: {}, waitUntils: 0 },
    instances: 0,
    alarmAt: null,
  };
}

/** Every session's tally, by key. */
const bySession = new Map<string, SessionTally>();

function sessionTally(key: string): SessionTally {
  let s = bySession.get(key);
  if (!s) {
    s = emptySession();
    bySession.set(key, s);
  }
  return s;
}

/** Adds every count of `from` into `into` (nested records included; the pending alarm aside). */
function addCounts(into: Record<string, unknown>, from: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(from)) {
    if (k === "alarmAt") continue;
    if (typeof v === "number") into[k] = ((into[k] as number | undefined) ?? 0) + v;
    else if (v !== null && typeof v === "object") {
      let t = into[k];
      if (t === null || typeof t !== "object") {
        t = {};
        into[k] = t;
      }
      addCounts(t as Record<string, unknown>, v as Record<string, unknown>);
    }
  }
}

/** Actor instances whose key is not known yet. */
let unkeyed = 0;

/**
 * One actor instance: the session key it serves once known, and what it counted before (added
 * to the key's tally when the key is learned, then left empty).
 */
class Owner {
  key: string | undefined;
  early: SessionTally = emptySession();
  /** Whether `early` saw the alarm set or cleared (its `alarmAt` then replaces the key's). */
  alarmSeen = false;

  constructor() {
    unkeyed++;
  }

  get session(): SessionTally {
    return this.key === undefined ? this.early : sessionTally(this.key);
  }

  learn(key: unknown): void {
    if (this.key !== undefined || typeof key !== "string" || key === "") return;
    this.key = key;
    unkeyed--;
    const s = sessionTally(key);
    addCounts(s as unknown as Record<string, unknown>, this.early as unknown as Record<string, unknown>);
    if (this.alarmSeen) s.alarmAt = this.early.alarmAt;
    this.early = emptySession();
  }

  alarm(at: number | null): void {
    if (this.key === undefined) this.alarmSeen = true;
    this.session.alarmAt = at;
  }
}

/** The key a call into an actor carries: its first argument, or that argument's `sessionKey`. */
function keyOfArgs(args: readonly unknown[]): unknown {
  const first = args[0];
  if (typeof first === "string") return first;
  if (first !== null && typeof first === "object") return (first as { sessionKey?: unknown }).sessionKey;
  return undefined;
}

function sessionsBrief(): SessionsBrief {
  let pendingAlarms = 0;
  let firstAlarmAt: number | null = null;
  let lastAlarmAt: number | null = null;
  for (const s of bySession.values()) {
    if (s.alarmAt === null) continue;
    pendingAlarms++;
    if (firstAlarmAt === null || s.alarmAt < firstAlarmAt) firstAlarmAt = s.alarmAt;
    if (lastAlarmAt === null || s.alarmAt > lastAlarmAt) lastAlarmAt = s.alarmAt;
  }
  return { keys: bySession.size, pendingAlarms, firstAlarmAt, lastAlarmAt, unkeyed };
}

function sessionBinding(s: SessionTally, binding: string): BindingTally {
  let t = s.d1.byBinding[binding];
  if (!t) {
    t = { statements: 0, roundTrips: 0, busyMs: 0, rowsRead: 0, rowsWritten: 0 };
    s.d1.byBinding[binding] = t;
  }
  return t;
}

/**
 * A delivery outcome's upsert (delivery/outbox.ts's outcomes, db/runs.ts): an insert into
 * `deliveries` that updates the row's state on conflict. A batch of these alone is an outcome
 * written by itself; beside a run's statements, outcomes carried by its finalize.
 */
const isOutcome = (sql: string): boolean =>
  /^\s*insert\s+into\s+"deliveries"/i.test(sql) &&
  /on\s+conflict\s*\("delivery_id"\)\s*do\s+update/i.test(sql);

/**
 * The usage rollup's additions of a run (db/usage.ts `usageRollupStatements`): upserts into
 * `usage_daily` and `usage_agents`, made in the run's finalize.
 */
const isUsageRollup = (sql: string): boolean =>
  /^\s*insert\s+into\s+"?usage_(daily|agents)"?[\s(]/i.test(sql);

/** Where a counted call goes: its origin, the D1 binding it was made on, and the actor making it. */
interface Route {
  origin: Origin;
  binding: string;
  /** The actor instance whose env made the call (none: the Worker's). */
  owner?: Owner;
}

function bindingTally(binding: string): BindingTally {
  let t = tally.d1.byBinding[binding];
  if (!t) {
    t = { statements: 0, roundTrips: 0, busyMs: 0, rowsRead: 0, rowsWritten: 0 };
    tally.d1.byBinding[binding] = t;
  }
  return t;
}

/** Calls waiting for an answer, and since when, by binding (for `busyMs`). */
const waiting = new Map<string, { calls: number; since: number }>();

/** What D1 answers of one statement (`D1Result.meta`): the rows it read and wrote, as billed. */
interface D1Meta {
  rows_read?: number;
  rows_written?: number;
}

const metaOf = (result: unknown): D1Meta | undefined =>
  result !== null && typeof result === "object" ? (result as { meta?: D1Meta }).meta : undefined;

/**
 * The metas of the call being sent, while it is being sent: `trip` sets this around its
 * synchronous send, and the runtime's D1 client, whose `first`/`all`/`run`/`raw`/`batch`/`exec`
 * each call its session's `_send` (or `_queryOrThrow`) synchronously before their first await,
 * hands that call's answer to it (see `meterSession`). The answer itself is what the product
 * gets, unchanged: `first` and `raw` drop D1's meta, so this is where their rows are read.
 */
let capturing: Array<Array<D1Meta | undefined>> | undefined;

/** Sessions of the runtime's D1 client whose sends report their answers' metas to `capturing`. */
const metered = new WeakSet<object>();

/** The runtime D1 client's methods that send a request and return D1's answer (with its meta). */
const SEND_METHODS = ["_send", "_queryOrThrow"] as const;

function meterSession(session: unknown): void {
  if (session === null || typeof session !== "object" || metered.has(session)) return;
  metered.add(session);
  for (const name of SEND_METHODS) {
    const original = Reflect.get(session, name);
    if (typeof original !== "function") continue;
    Object.defineProperty(session, name, {
      configurable: true,
      writable: true,
      enumerable: false,
      value: function meteredSend(this: unknown, ...args: unknown[]) {
        // Taken at once: only the call `trip` is sending now, and only its first send.
        const into = capturing;
        capturing = undefined;
        const answer = Reflect.apply(original as Method, this, args) as Promise<unknown>;
        if (!into) return answer;
        return answer.then((r) => {
          into.push(Array.isArray(r) ? r.map(metaOf) : [metaOf(r)]);
          return r;
        });
      },
    });
  }
}

/** What a round trip of an actor was, for its session: outcomes alone, outcomes carried, neither. */
type Outcomes = "alone" | "carried" | "none";

/**
 * Adds the rows of one answered round trip (one meta per statement; one for all of an exec), to
 * the global tally and to `session`'s (an actor's call), the outcome statements' apart.
 */
function countRows(
  route: Route,
  sqls: string[],
  metas: Array<D1Meta | undefined> | undefined,
  outcomes?: Outcomes,
): void {
  const { origin, binding, owner } = route;
  // The session as it is now (an actor that learned its key since the call: the key's).
  const session = owner?.session;
  if (!metas?.length || metas.some((m) => typeof m?.rows_written !== "number")) {
    tally.d1.unmetered++;
    if (session) session.d1.unmetered++;
    return;
  }
  const per = bindingTally(binding);
  const mine = session && sessionBinding(session, binding);
  metas.forEach((m, i) => {
    const read = m?.rows_read ?? 0;
    const written = m?.rows_written ?? 0;
    tally.d1.rowsRead += read;
    tally.d1.rowsWritten += written;
    tally.d1.byOrigin[origin].rowsRead += read;
    tally.d1.byOrigin[origin].rowsWritten += written;
    per.rowsRead += read;
    per.rowsWritten += written;
    const sql = sqls[Math.min(i, sqls.length - 1)] ?? "";
    const key = `${origin} ${label(sql)}`;
    if (written) bump(tally.d1.sqlRowsWritten, key, written);
    if (read) bump(tally.d1.sqlRowsRead, key, read);
    if (!session || !mine) return;
    const d1 = session.d1;
    d1.rowsRead += read;
    d1.rowsWritten += written;
    mine.rowsRead += read;
    mine.rowsWritten += written;
    if (written) bump(d1.sqlRowsWritten, key, written);
    if (read) bump(d1.sqlRowsRead, key, read);
    const part =
      outcomes === "alone" ? d1.outcomes : outcomes === "carried" && isOutcome(sql) ? d1.carried : undefined;
    if (part) {
      part.rowsRead += read;
      part.rowsWritten += written;
    }
    if (d1.usage && isUsageRollup(sql)) {
      d1.usage.rowsRead += read;
      d1.usage.rowsWritten += written;
    }
  });
}

/**
 * Counts one round trip and passes its answer on, timing the binding's busy spell, and adds the
 * rows D1 says it read and wrote: from the metas the client received (`capturing`), else from
 * the answer (`fallback`: a statement's `run`/`all` result, each of a batch's results).
 */
function trip<T>(
  route: Route,
  call: string,
  statements: number,
  sqls: string[],
  send: () => Promise<T>,
  fallback?: (answer: T) => Array<D1Meta | undefined>,
) {
  const { origin, binding } = route;
  tally.d1.roundTrips++;
  tally.d1.statements += statements;
  tally.d1.byOrigin[origin].roundTrips++;
  tally.d1.byOrigin[origin].statements += statements;
  const per = bindingTally(binding);
  per.roundTrips++;
  per.statements += statements;
  bump(tally.d1.byCall, call, 1);
  if (call === "exec") bump(tally.d1.sql, `${origin} ${label(sqls[0] ?? "")}`, statements);
  else for (const sql of sqls) bump(tally.d1.sql, `${origin} ${label(sql)}`, 1);
  // An actor's call is its session's too; a batch of outcome upserts alone is its outcomes written
  // by themselves, outcome upserts beside other statements are carried by that write.
  let outcomes: Outcomes | undefined;
  if (route.owner) {
    const s = route.owner.session;
    const outcomeStatements = call === "batch" ? sqls.filter(isOutcome).length : 0;
    outcomes = outcomeStatements === 0 ? "none" : outcomeStatements === sqls.length ? "alone" : "carried";
    s.d1.roundTrips++;
    s.d1.statements += statements;
    const b = sessionBinding(s, binding);
    b.roundTrips++;
    b.statements += statements;
    bump(s.d1.byCall, call, 1);
    if (call === "exec") bump(s.d1.sql, `${origin} ${label(sqls[0] ?? "")}`, statements);
    else for (const sql of sqls) bump(s.d1.sql, `${origin} ${label(sql)}`, 1);
    const part = outcomes === "alone" ? s.d1.outcomes : outcomes === "carried" ? s.d1.carried : undefined;
    if (part) {
      part.roundTrips++;
      part.statements += outcomes === "alone" ? statements : outcomeStatements;
    }
    // The rollup's upserts, and the round trips that are theirs alone (none while each rides
    // in its run's finalize batch).
    const usageStatements = call === "exec" ? 0 : sqls.filter(isUsageRollup).length;
    if (usageStatements && s.d1.usage) {
      s.d1.usage.statements += usageStatements;
      if (usageStatements === sqls.length) s.d1.usage.roundTrips++;
    }
  }
  let w = waiting.get(binding);
  if (!w) {
    w = { calls: 0, since: 0 };
    waiting.set(binding, w);
  }
  if (w.calls++ === 0) w.since = performance.now();
  const done = () => {
    const v = waiting.get(binding);
    if (v && --v.calls === 0) per.busyMs += performance.now() - v.since;
  };
  const captured: Array<Array<D1Meta | undefined>> = [];
  let answer: Promise<T>;
  capturing = captured;
  try {
    answer = send();
  } catch (error) {
    done();
    throw error;
  } finally {
    capturing = undefined;
  }
  return answer
    .then((r) => {
      countRows(route, call === "exec" ? [sqls[0] ?? ""] : sqls, captured[0] ?? fallback?.(r), outcomes);
      return r;
    })
    .finally(done);
}

// ---------------------------------------------------------------------------------------------
// D1: a wrapper of the binding (and of its sessions) whose statements remember their SQL

const INNER = Symbol("the real statement");

class CountedStatement {
  readonly [INNER]: D1PreparedStatement;
  readonly sql: string;
  readonly route: Route;

  constructor(inner: D1PreparedStatement, sql: string, route: Route) {
    this[INNER] = inner;
    this.sql = sql;
    this.route = route;
  }

  bind(...values: unknown[]): CountedStatement {
    return new CountedStatement(this[INNER].bind(...values), this.sql, this.route);
  }

  first(...args: unknown[]): Promise<unknown> {
    return this.send("first", args);
  }

  run(...args: unknown[]): Promise<unknown> {
    return this.send("run", args);
  }

  all(...args: unknown[]): Promise<unknown> {
    return this.send("all", args);
  }

  raw(...args: unknown[]): Promise<unknown> {
    return this.send("raw", args);
  }

  private send(call: "first" | "run" | "all" | "raw", args: unknown[]): Promise<unknown> {
    const inner = this[INNER];
    return trip(
      this.route,
      call,
      1,
      [this.sql],
      () => Reflect.apply(inner[call] as unknown as (...a: unknown[]) => Promise<unknown>, inner, args),
      // `run` and `all` answer with D1's meta; `first` and `raw` drop it (then only the capture has it).
      (r) => (call === "run" || call === "all" ? [metaOf(r)] : []),
    );
  }
}

const innerOf = (s: D1PreparedStatement): D1PreparedStatement =>
  s instanceof CountedStatement ? s[INNER] : s;
const sqlOf = (s: D1PreparedStatement): string =>
  s instanceof CountedStatement ? s.sql : "(a statement not made by this wrapper)";

interface Preparer {
  prepare(query: string): D1PreparedStatement;
  batch(statements: D1PreparedStatement[]): Promise<unknown>;
}

function countedPreparer(inner: Preparer, route: Route) {
  return {
    prepare: (query: string) =>
      new CountedStatement(inner.prepare(query), query, route) as unknown as D1PreparedStatement,
    batch: (statements: D1PreparedStatement[]) =>
      trip(
        route,
        "batch",
        statements.length,
        statements.map(sqlOf),
        () => inner.batch(statements.map(innerOf)),
        (r) => (Array.isArray(r) ? r.map(metaOf) : []),
      ),
  };
}

function countedDb(db: D1Database, route: Route): D1Database {
  meterSession(Reflect.get(db, "alwaysPrimarySession"));
  return {
    ...countedPreparer(db, route),
    exec: (query: string) => trip(route, "exec", statementCount(query), [query], () => db.exec(query)),
    dump: () => trip(route, "dump", 0, [], () => db.dump()),
    withSession: (constraint?: D1SessionBookmark | D1SessionConstraint) => {
      const session = db.withSession(constraint);
      meterSession(session);
      return {
        ...countedPreparer(session, route),
        getBookmark: () => session.getBookmark(),
      } as unknown as D1DatabaseSession;
    },
  } as unknown as D1Database;
}

// ---------------------------------------------------------------------------------------------
// Durable Object requests: stubs whose method calls are counted

/** A request to an actor: globally, and to its session (`session`: the one it addresses). */
function countRequest(method: string, session?: SessionTally): void {
  tally.doRequests.total++;
  bump(tally.doRequests.byMethod, method, 1);
  if (!session) return;
  session.doRequests.total++;
  bump(session.doRequests.byMethod, method, 1);
}

/** Properties of a stub that are not requests to the object. */
const STUB_FIELDS = new Set<string | symbol>(["id", "name", "then"]);

/** A stub whose calls are counted, to the session `key` names (the name the stub addresses). */
function countedStub<T extends object>(stub: T, key: string | undefined): T {
  return new Proxy(stub, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (typeof value !== "function" || typeof prop !== "string" || STUB_FIELDS.has(prop)) return value;
      return (...args: unknown[]) => {
        countRequest(prop, key === undefined ? undefined : sessionTally(key));
        return Reflect.apply(value as Method, target, args);
      };
    },
  });
}

/** The name of an id made from one (`idFromName`), if the runtime tells it. */
function nameOf(id: unknown): string | undefined {
  const name = id !== null && typeof id === "object" ? Reflect.get(id, "name") : undefined;
  return typeof name === "string" && name !== "" ? name : undefined;
}

function countedNamespace(ns: DurableObjectNamespace): DurableObjectNamespace {
  return new Proxy(ns, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (typeof value !== "function") return value;
      if (prop === "get" || prop === "getByName")
        return (...args: unknown[]) =>
          countedStub(
            Reflect.apply(value as Method, target, args) as object,
            prop === "getByName" ? (typeof args[0] === "string" ? args[0] : undefined) : nameOf(args[0]),
          );
      return (value as Method).bind(target);
    },
  });
}

const dbs = new WeakMap<D1Database, Partial<Record<Origin, D1Database>>>();
const envs = new WeakMap<Env, Partial<Record<Origin, Env>>>();
const namespaces = new WeakMap<DurableObjectNamespace, DurableObjectNamespace>();

function memo<K extends object, V>(
  map: WeakMap<K, Partial<Record<Origin, V>>>,
  key: K,
  origin: Origin,
  make: () => V,
): V {
  let byOrigin = map.get(key);
  if (!byOrigin) {
    byOrigin = {};
    map.set(key, byOrigin);
  }
  let value = byOrigin[origin];
  if (value === undefined) {
    value = make();
    byOrigin[origin] = value;
  }
  return value;
}

const names = new WeakMap<Env, readonly string[]>();

/** The D1 binding names of `storage.d1` (the gateway reads the same config). */
function storageNames(env: Env): readonly string[] {
  let list = names.get(env);
  if (!list) {
    list = loadConfig(env).storage.d1;
    names.set(env, list);
  }
  return list;
}

/** Each actor instance's own env and D1 wrappers (its calls are its session's). */
const ownerEnvs = new WeakMap<Owner, Env>();
const ownerDbs = new WeakMap<Owner, Map<string, D1Database>>();

function ownerDb(owner: Owner, binding: string, db: D1Database): D1Database {
  let m = ownerDbs.get(owner);
  if (!m) {
    m = new Map();
    ownerDbs.set(owner, m);
  }
  let counted = m.get(binding);
  if (!counted) {
    counted = countedDb(db, { origin: "actor", binding, owner });
    m.set(binding, counted);
  }
  return counted;
}

/**
 * The runtime's env, except that each D1 binding of `storage.d1` is its counting wrapper and
 * `SESSION_ACTOR` hands out counting stubs (the same wrappers for the same bindings). An actor's
 * (`owner`) is its own, so its D1 calls are tallied under its session too.
 */
function countedEnv(env: Env, origin: Origin, owner?: Owner): Env {
  if (owner) {
    let e = ownerEnvs.get(owner);
    if (!e) {
      e = proxiedEnv(env, origin, owner);
      ownerEnvs.set(owner, e);
    }
    return e;
  }
  return memo(envs, env, origin, () => proxiedEnv(env, origin));
}

function proxiedEnv(env: Env, origin: Origin, owner?: Owner): Env {
  return new Proxy(env, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof prop !== "string") return value;
      if (prop === "SESSION_ACTOR") {
        const ns = value as DurableObjectNamespace;
        let counted = namespaces.get(ns);
        if (!counted) {
          counted = countedNamespace(ns);
          namespaces.set(ns, counted);
        }
        return counted;
      }
      if (!storageNames(target).includes(prop) || !isD1(value)) return value;
      if (owner) return ownerDb(owner, prop, value);
      return memo(dbs, value, origin, () => countedDb(value, { origin, binding: prop }));
    },
  });
}

function isD1(value: unknown): value is D1Database {
  const v = value as { prepare?: unknown; batch?: unknown } | null | undefined;
  return typeof v?.prepare === "function" && typeof v.batch === "function";
}

// ---------------------------------------------------------------------------------------------
// Durable Object storage: the actor's own SqlStorage and its other methods, counted

type Method = (...args: unknown[]) => unknown;

/** The storage methods besides `sql` (a transaction's own get/put are not seen). */
const STORAGE_METHODS = [
  "getAlarm",
  "setAlarm",
  "deleteAlarm",
  "get",
  "put",
  "delete",
  "list",
  "deleteAll",
  "transaction",
  "transactionSync",
  "sync",
] as const;

function replace(target: object, name: string, wrap: (original: Method) => Method): void {
  const original = Reflect.get(target, name) as Method;
  Object.defineProperty(target, name, {
    value: wrap(original),
    configurable: true,
    writable: true,
    enumerable: false,
  });
  if (Reflect.get(target, name) === original) tally.patchedOk = false;
}

/** Properties of a SqlStorageCursor read for its rows (final once it is consumed). */
interface Metered {
  rowsRead: number;
  rowsWritten: number;
}

/** The cursor methods that consume rows: after each, the rows added since are counted. */
const CURSOR_METHODS = ["toArray", "one", "next", "raw", Symbol.iterator] as const;

/**
 * Counts a cursor's rows once: what it read and wrote at `exec` (a statement without results
 * runs to completion there), then what each consuming call adds (a query reads as it is
 * iterated). Only the increase since the last look is added, so a cursor consumed in parts, or
 * iterated through an iterator that is the cursor itself, is counted once.
 */
function meterCursor(cursor: object, key: string, owner: Owner): void {
  const seen: Metered = { rowsRead: 0, rowsWritten: 0 };
  const look = () => {
    const read = Number(Reflect.get(cursor, "rowsRead"));
    const written = Number(Reflect.get(cursor, "rowsWritten"));
    if (!Number.isFinite(read) || !Number.isFinite(written)) return;
    const dr = read - seen.rowsRead;
    const dw = written - seen.rowsWritten;
    seen.rowsRead = read;
    seen.rowsWritten = written;
    tally.doSql.rowsRead += dr;
    tally.doSql.rowsWritten += dw;
    if (dw) bump(tally.doSql.sqlRowsWritten, key, dw);
    if (dr) bump(tally.doSql.sqlRowsRead, key, dr);
    const mine = owner.session.doSql;
    mine.rowsRead += dr;
    mine.rowsWritten += dw;
    if (dw) bump(mine.sqlRowsWritten, key, dw);
    if (dr) bump(mine.sqlRowsRead, key, dr);
  };
  /** An iterator handed out (by `raw()` or `[Symbol.iterator]()`): its `next` looks too. */
  const iterated = (it: unknown) => {
    if (it === cursor || it === null || typeof it !== "object") return it;
    const next = Reflect.get(it, "next");
    if (typeof next === "function")
      Object.defineProperty(it, "next", {
        configurable: true,
        writable: true,
        enumerable: false,
        value: (...args: unknown[]) => {
          try {
            return Reflect.apply(next as Method, it, args);
          } finally {
            look();
          }
        },
      });
    return it;
  };
  look();
  for (const name of CURSOR_METHODS) {
    const original = Reflect.get(cursor, name);
    if (typeof original !== "function") continue;
    Object.defineProperty(cursor, name, {
      configurable: true,
      writable: true,
      enumerable: false,
      value: (...args: unknown[]) => {
        try {
          return iterated(Reflect.apply(original as Method, cursor, args));
        } finally {
          look();
        }
      },
    });
  }
}

/** Counts `storage`'s SQL and other calls, globally and as `owner`'s session's. */
function countStorage(storage: DurableObjectStorage, owner: Owner): void {
  const sql = storage.sql;
  replace(
    sql,
    "exec",
    (exec) =>
      function countedExec(...args: unknown[]) {
        const query = String(args[0]);
        const n = statementCount(query);
        // Under `wrangler dev`, miniflare's wrapper of the class records the object's name in the
        // same database (absent in production): kept apart from the gateway's statements.
        if (query.includes("__miniflare_")) {
          tally.doSql.platform += n;
          return Reflect.apply(exec, sql, args);
        }
        tally.doSql.execs++;
        tally.doSql.statements += n;
        const key = label(query);
        bump(tally.doSql.sql, key, n);
        const mine = owner.session.doSql;
        mine.execs++;
        mine.statements += n;
        bump(mine.sql, key, n);
        const cursor = Reflect.apply(exec, sql, args);
        if (cursor !== null && typeof cursor === "object") meterCursor(cursor, key, owner);
        return cursor;
      },
  );
  for (const name of STORAGE_METHODS) {
    if (typeof Reflect.get(storage, name) !== "function") continue;
    replace(
      storage,
      name,
      (original) =>
        function countedCall(...args: unknown[]) {
          bump(tally.doCalls, name, 1);
          bump(owner.session.doCalls, name, 1);
          // The alarm pending, as the actor sets and clears it (its firing clears it too: `alarm`).
          if (name === "setAlarm") {
            const at = args[0] instanceof Date ? args[0].getTime() : Number(args[0]);
            owner.alarm(Number.isFinite(at) ? at : Date.now());
          } else if (name === "deleteAlarm") owner.alarm(null);
          return Reflect.apply(original, storage, args);
        },
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Durable Object wall time: while each actor handles a call or an alarm, and while it cannot
// hibernate (a waitUntil promise or a timer of its own pending)

/**
 * Cloudflare bills a Durable Object's duration "while the Durable Object is actively running or
 * is idle in memory but unable to hibernate"; it cannot hibernate while a setTimeout/setInterval
 * callback is scheduled, an awaited fetch() is in progress or a request/event is still being
 * processed (https://developers.cloudflare.com/durable-objects/platform/pricing/,
 * https://developers.cloudflare.com/durable-objects/concepts/durable-object-lifecycle/). One
 * actor instance's intervals: its calls and alarms (`callsMs`), and those with its waitUntil
 * promises (a run goes on there after `enqueue` answers: the model call, the delivery) and its
 * pending timers (`activeMs`), each the union of its own intervals.
 */
class Activity {
  private calls = 0;
  private callsSince = 0;
  private open = 0;
  private since = 0;

  constructor(readonly owner: Owner) {}

  enterCall(): void {
    if (this.calls++ === 0) this.callsSince = performance.now();
    this.enter();
  }

  exitCall(): void {
    if (--this.calls === 0) {
      const ms = performance.now() - this.callsSince;
      tally.doWall.callsMs += ms;
      this.owner.session.doWall.callsMs += ms;
    }
    this.exit();
  }

  enter(): void {
    tally.doWall.open++;
    if (this.open++ === 0) this.since = performance.now();
  }

  exit(): void {
    tally.doWall.open--;
    if (--this.open === 0) {
      const ms = performance.now() - this.since;
      tally.doWall.activeMs += ms;
      this.owner.session.doWall.activeMs += ms;
    }
  }

  /** Open until `promise` settles (either way). */
  until(promise: unknown): void {
    this.enter();
    const exit = () => this.exit();
    Promise.resolve(promise).then(exit, exit);
  }
}

/** The actor whose work is running (a call, an alarm, what they started): timers it sets are its own. */
const working = new AsyncLocalStorage<Activity>();
const activities = new WeakMap<object, Activity>();

/** Runs `fn`, a call into `actor`, as one of its intervals. */
function during<T>(actor: object, fn: () => T): T {
  const activity = activities.get(actor);
  if (!activity) return fn();
  activity.enterCall();
  let out: T;
  try {
    out = working.run(activity, fn);
  } catch (error) {
    activity.exitCall();
    throw error;
  }
  if (out instanceof Promise) return out.finally(() => activity.exitCall()) as T;
  activity.exitCall();
  return out;
}

// Timers: set inside an actor's work, each is one of its intervals until it fires or is cleared
// (a setInterval until cleared). Set elsewhere (the Worker), they are only counted.
type TimerSet = (handler: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => unknown;
/** The runtime's own setTimeout, for the entry's own waits (`stillFor`), which are not counted. */
const runtimeSetTimeout = globalThis.setTimeout as unknown as TimerSet;
type TimerClear = (id?: unknown) => void;
const pendingTimers = new Map<unknown, Activity>();

function timerOpen(id: unknown, activity: Activity): void {
  pendingTimers.set(id, activity);
  tally.doWall.timersPending++;
  activity.enter();
}

function timerDone(id: unknown): void {
  const activity = pendingTimers.get(id);
  if (!activity) return;
  pendingTimers.delete(id);
  tally.doWall.timersPending--;
  activity.exit();
}

function countTimers(): void {
  const g = globalThis as unknown as Record<string, unknown>;
  const set = (name: "setTimeout" | "setInterval", once: boolean) => {
    const original = g[name] as TimerSet;
    g[name] = function countedTimer(handler: unknown, ms?: number, ...args: unknown[]) {
      const activity = working.getStore();
      if (!activity || typeof handler !== "function") {
        tally.doWall.timersOutside++;
        return Reflect.apply(original, globalThis, [handler, ms, ...args]);
      }
      tally.doWall.timersSet++;
      const delay = `${name} ${Math.round(Number(ms) || 0)} ms`;
      bump(tally.doWall.timersByDelay, delay, 1);
      const mine = activity.owner.session.doWall;
      mine.timersSet++;
      bump(mine.timersByDelay, delay, 1);
      let id: unknown;
      const fire = (...a: unknown[]) => {
        if (once) timerDone(id);
        return Reflect.apply(handler as Method, globalThis, a);
      };
      id = Reflect.apply(original, globalThis, [fire, ms, ...args]);
      timerOpen(id, activity);
      return id;
    } as TimerSet;
  };
  const clear = (name: "clearTimeout" | "clearInterval") => {
    const original = g[name] as TimerClear;
    g[name] = function countedClear(id?: unknown) {
      timerDone(id);
      return Reflect.apply(original, globalThis, [id]);
    } as TimerClear;
  };
  set("setTimeout", true);
  set("setInterval", false);
  clear("clearTimeout");
  clear("clearInterval");
}
countTimers();

/** Each actor instance's owner (its session, once known). */
const owners = new WeakMap<object, Owner>();

/** The session key an actor's storage holds (ActorStore's kv), read uncounted; none for a new actor. */
function storedKey(sql: SqlStorage, exec: Method): string | undefined {
  try {
    const cursor = Reflect.apply(exec, sql, ["SELECT v FROM kv WHERE k = 'key'"]) as { toArray(): unknown[] };
    const v = (cursor.toArray()[0] as { v?: unknown } | undefined)?.v;
    return typeof v === "string" ? v : undefined;
  } catch {
    return undefined;
  }
}

export class SessionActor extends GatewaySessionActor {
  constructor(ctx: DurableObjectState, env: Env) {
    const storage = ctx.storage;
    const sql = storage.sql;
    const uncountedExec = sql.exec as unknown as Method;
    const owner = new Owner();
    // The name it is reached by (getByName), when the runtime tells it.
    owner.learn(nameOf(ctx.id));
    countStorage(storage, owner);
    const activity = new Activity(owner);
    replace(
      ctx,
      "waitUntil",
      (original) =>
        function countedWaitUntil(promise: unknown) {
          tally.doWall.waitUntils++;
          owner.session.doWall.waitUntils++;
          activity.until(promise);
          return Reflect.apply(original, ctx, [promise]);
        },
    );
    super(ctx, countedEnv(env, "actor", owner));
    activities.set(this, activity);
    owners.set(this, owner);
    tally.isolate ||= crypto.randomUUID();
    tally.actors++;
    owner.session.instances++;
    // Else the key its storage holds (an actor bound before); else its first call's (below).
    if (owner.key === undefined) owner.learn(storedKey(sql, uncountedExec));
    // The patch is on these objects: the actor must meet the same ones on every read.
    const again = ctx.storage;
    if (again !== storage || again.sql !== sql) tally.patchedOk = false;
  }

  override alarm(): Promise<void> {
    const owner = owners.get(this);
    // The alarm that fires is no longer pending; one its handler sets is.
    owner?.alarm(null);
    countRequest("alarm", owner?.session);
    return during(this, () => super.alarm());
  }
}

// Every other method of the actor's class (what the Worker and other actors call over RPC) is
// one of the actor's intervals: a wrapper on this class's prototype (Workers RPC calls
// prototype methods) that calls the gateway's.
for (const name of Object.getOwnPropertyNames(GatewaySessionActor.prototype)) {
  if (name === "constructor" || Object.hasOwn(SessionActor.prototype, name)) continue;
  const d = Object.getOwnPropertyDescriptor(GatewaySessionActor.prototype, name);
  if (!d || typeof d.value !== "function") continue;
  const method = d.value as Method;
  Object.defineProperty(SessionActor.prototype, name, {
    ...d,
    value: function timed(this: object, ...args: unknown[]) {
      // Every RPC method takes the session key first (enqueue: in its request).
      owners.get(this)?.learn(keyOfArgs(args));
      return during(this, () => Reflect.apply(method, this, args));
    },
  });
}

/** How often `stillFor` looks at the counts. */
const STILL_TICK_MS = 50;

/**
 * Waits, inside this isolate, until the counts have not changed for `stillMs` and (with
 * `actors`) no actor has a call, alarm, waitUntil promise or timer open; at most `capMs`. One
 * request instead of a poll every 100 ms: each request into `wrangler dev` costs workerd several
 * ms of CPU, which would swamp a message's own.
 */
async function stillFor(stillMs: number, capMs: number, actors: boolean) {
  const start = performance.now();
  let last = briefOf(tally).changes;
  let since = start;
  while (performance.now() - start < capMs) {
    await new Promise((r) => runtimeSetTimeout(r, STILL_TICK_MS));
    const now = briefOf(tally);
    if (now.changes !== last) {
      last = now.changes;
      since = performance.now();
      continue;
    }
    if (performance.now() - since >= stillMs && (!actors || now.open === 0))
      return { ...now, still: true, quiet: true };
  }
  return { ...briefOf(tally), still: false, quiet: performance.now() - since >= stillMs };
}

/**
 * Waits, inside this isolate, until no session's actor has an alarm pending (every write an
 * actor deferred has landed), the counts have not changed for `stillMs` and no actor has
 * anything open; at most `capMs`.
 */
async function deferredFor(stillMs: number, capMs: number): Promise<DeferredAnswer> {
  const start = performance.now();
  let last = briefOf(tally).changes;
  let since = start;
  for (;;) {
    const now = briefOf(tally);
    if (now.changes !== last) {
      last = now.changes;
      since = performance.now();
    }
    const sessions = sessionsBrief();
    const waited = performance.now() - start;
    const done = sessions.pendingAlarms === 0 && now.open === 0 && performance.now() - since >= stillMs;
    if (done || waited >= capMs) {
      const pending = [...bySession]
        .flatMap(([key, s]): Array<[string, number]> => (s.alarmAt === null ? [] : [[key, s.alarmAt]]))
        .slice(0, 20);
      return { ...now, done, waitedMs: waited, sessions, pending };
    }
    await new Promise((r) => runtimeSetTimeout(r, STILL_TICK_MS * 4));
  }
}

/** The tally as served: the sessions' brief brought up to date, and the sessions `keys` name. */
function countsOf(keys: string[]): Tally & Partial<SessionTallies> {
  tally.sessions = sessionsBrief();
  if (keys.length === 0) return tally;
  const sessions: Record<string, SessionTally> = {};
  for (const key of keys) {
    const s = bySession.get(key);
    if (s) sessions[key] = s;
  }
  return { ...tally, bySession: sessions };
}

/** What the bench polls while it waits for a window to settle: a few numbers, cheap to serve. */
function briefOf(t: Tally): BriefTally {
  return {
    isolate: t.isolate,
    changes: [
      t.d1.roundTrips,
      t.d1.rowsWritten,
      t.d1.rowsRead,
      t.doSql.execs,
      t.doSql.rowsWritten,
      t.doSql.rowsRead,
      Object.values(t.doCalls).reduce((a, b) => a + b, 0),
      t.doRequests.total,
      t.actors,
      t.doWall.open,
      t.doWall.activeMs,
      t.workerRequests.fetch + t.workerRequests.scheduled,
    ].join("/"),
    open: t.doWall.open,
    timersPending: t.doWall.timersPending,
  };
}

const STATE_FIELDS = [
  "runs",
  "activeRuns",
  "deliveries",
  "openDeliveries",
  "sessions",
  "indexed",
  "sizeBytes",
] as const;

async function databaseState(db: D1Database): Promise<DatabaseState> {
  const { results, meta } = await db
    .prepare(
      `select (select count(*) from runs) as runs,
  (select count(*) from runs where status in ('queued', 'running')) as activeRuns,
  (select count(*) from deliveries) as deliveries,
  (select count(*) from deliveries where status in ('pending', 'retrying')) as openDeliveries,
  (select count(*) from sessions) as sessions,
  (select count(*) from messages_fts_docsize) as indexed`,
    )
    .all<Omit<DatabaseState, "sizeBytes">>();
  const row = results[0];
  if (!row) throw new Error("the state query returned no row");
  return { ...row, sizeBytes: meta.size_after };
}

/** Every database of `storage.d1`, read through the real bindings (not counted), and their sums. */
async function d1State(env: Env): Promise<D1State> {
  const names = storageNames(env);
  const states = await Promise.all(names.map((name) => databaseState(Reflect.get(env, name) as D1Database)));
  const sum = Object.fromEntries(
    STATE_FIELDS.map((f) => [f, states.reduce((a, s) => a + s[f], 0)]),
  ) as unknown as DatabaseState;
  return { ...sum, byBinding: Object.fromEntries(names.map((n, i) => [n, states[i] as DatabaseState])) };
}

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const { pathname } = url;
    tally.isolate ||= crypto.randomUUID();
    const number = (name: string, fallback: number) => {
      const v = Number(url.searchParams.get(name));
      return Number.isFinite(v) && v >= 0 ? Math.min(v, 600_000) : fallback;
    };
    if (pathname === "/__bench/db-still")
      return Response.json(
        await stillFor(number("still", 2_000), number("cap", 30_000), url.searchParams.get("actors") !== "0"),
      );
    if (pathname === "/__bench/db-deferred")
      return Response.json(await deferredFor(number("still", 2_000), number("cap", 75_000)));
    if (pathname === "/__bench/db-counts")
      return Response.json(
        url.searchParams.has("brief") ? briefOf(tally) : countsOf(url.searchParams.getAll("key")),
      );
    if (pathname === "/__bench/d1-state") return Response.json(await d1State(env));
    tally.workerRequests.fetch++;
    return gateway.fetch(request, countedEnv(env, "worker"), ctx);
  },
  async scheduled(controller, env) {
    tally.workerRequests.scheduled++;
    await gateway.scheduled(controller, countedEnv(env, "worker"));
  },
} satisfies ExportedHandler<Env>;
