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
 *
 * The counts live in this isolate (under `wrangler dev` the Worker and its Durable Objects share
 * one) and are read from outside with `GET /__bench/db-counts` (`?brief`: the few numbers that
 * change when anything does); `GET /__bench/db-still` waits here until they stop changing (one
 * request instead of many polls, each of which costs workerd CPU); `GET /__bench/d1-state`
 * reads the runs, deliveries, sessions and size of every database through the real bindings
 * (not counted) so the bench knows when a message's work has settled and what it stored. Every
 * other request goes to the gateway.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { loadConfig } from "../../src/config/load";
import gateway, { SessionActor as GatewaySessionActor } from "../../src/index";
import type { BindingTally, BriefTally, D1State, DatabaseState, Origin, Tally } from "./db-load-tally";

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

/** Where a counted call goes: its origin and the D1 binding it was made on. */
interface Route {
  origin: Origin;
  binding: string;
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

/** Adds the rows of one answered round trip (one meta per statement; one for all of an exec). */
function countRows(route: Route, sqls: string[], metas: Array<D1Meta | undefined> | undefined): void {
  const { origin, binding } = route;
  if (!metas?.length || metas.some((m) => typeof m?.rows_written !== "number")) {
    tally.d1.unmetered++;
    return;
  }
  const per = bindingTally(binding);
  metas.forEach((m, i) => {
    const read = m?.rows_read ?? 0;
    const written = m?.rows_written ?? 0;
    tally.d1.rowsRead += read;
    tally.d1.rowsWritten += written;
    tally.d1.byOrigin[origin].rowsRead += read;
    tally.d1.byOrigin[origin].rowsWritten += written;
    per.rowsRead += read;
    per.rowsWritten += written;
    const key = `${origin} ${label(sqls[Math.min(i, sqls.length - 1)] ?? "")}`;
    if (written) bump(tally.d1.sqlRowsWritten, key, written);
    if (read) bump(tally.d1.sqlRowsRead, key, read);
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
      countRows(route, call === "exec" ? [sqls[0] ?? ""] : sqls, captured[0] ?? fallback?.(r));
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

function countRequest(method: string): void {
  tally.doRequests.total++;
  bump(tally.doRequests.byMethod, method, 1);
}

/** Properties of a stub that are not requests to the object. */
const STUB_FIELDS = new Set<string | symbol>(["id", "name", "then"]);

function countedStub<T extends object>(stub: T): T {
  return new Proxy(stub, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (typeof value !== "function" || typeof prop !== "string" || STUB_FIELDS.has(prop)) return value;
      return (...args: unknown[]) => {
        countRequest(prop);
        return Reflect.apply(value as Method, target, args);
      };
    },
  });
}

function countedNamespace(ns: DurableObjectNamespace): DurableObjectNamespace {
  return new Proxy(ns, {
    get(target, prop) {
      const value = Reflect.get(target, prop);
      if (typeof value !== "function") return value;
      if (prop === "get" || prop === "getByName")
        return (...args: unknown[]) => countedStub(Reflect.apply(value as Method, target, args) as object);
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

/**
 * The runtime's env, except that each D1 binding of `storage.d1` is its counting wrapper and
 * `SESSION_ACTOR` hands out counting stubs (the same wrappers for the same bindings).
 */
function countedEnv(env: Env, origin: Origin): Env {
  return memo(envs, env, origin, () => {
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
        return memo(dbs, value, origin, () => countedDb(value, { origin, binding: prop }));
      },
    });
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
function meterCursor(cursor: object, key: string): void {
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

function countStorage(storage: DurableObjectStorage): void {
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
        const cursor = Reflect.apply(exec, sql, args);
        if (cursor !== null && typeof cursor === "object") meterCursor(cursor, key);
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

  enterCall(): void {
    if (this.calls++ === 0) this.callsSince = performance.now();
    this.enter();
  }

  exitCall(): void {
    if (--this.calls === 0) tally.doWall.callsMs += performance.now() - this.callsSince;
    this.exit();
  }

  enter(): void {
    tally.doWall.open++;
    if (this.open++ === 0) this.since = performance.now();
  }

  exit(): void {
    tally.doWall.open--;
    if (--this.open === 0) tally.doWall.activeMs += performance.now() - this.since;
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
      bump(tally.doWall.timersByDelay, `${name} ${Math.round(Number(ms) || 0)} ms`, 1);
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

export class SessionActor extends GatewaySessionActor {
  constructor(ctx: DurableObjectState, env: Env) {
    const storage = ctx.storage;
    const sql = storage.sql;
    countStorage(storage);
    const activity = new Activity();
    replace(
      ctx,
      "waitUntil",
      (original) =>
        function countedWaitUntil(promise: unknown) {
          tally.doWall.waitUntils++;
          activity.until(promise);
          return Reflect.apply(original, ctx, [promise]);
        },
    );
    super(ctx, countedEnv(env, "actor"));
    activities.set(this, activity);
    tally.isolate ||= crypto.randomUUID();
    tally.actors++;
    // The patch is on these objects: the actor must meet the same ones on every read.
    const again = ctx.storage;
    if (again !== storage || again.sql !== sql) tally.patchedOk = false;
  }

  override alarm(): Promise<void> {
    countRequest("alarm");
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

const STATE_FIELDS = ["runs", "activeRuns", "deliveries", "openDeliveries", "sessions", "sizeBytes"] as const;

async function databaseState(db: D1Database): Promise<DatabaseState> {
  const { results, meta } = await db
    .prepare(
      `select (select count(*) from runs) as runs,
  (select count(*) from runs where status in ('queued', 'running')) as activeRuns,
  (select count(*) from deliveries) as deliveries,
  (select count(*) from deliveries where status in ('pending', 'retrying')) as openDeliveries,
  (select count(*) from sessions) as sessions`,
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
    if (pathname === "/__bench/db-still") {
      const number = (name: string, fallback: number) => {
        const v = Number(url.searchParams.get(name));
        return Number.isFinite(v) && v >= 0 ? Math.min(v, 600_000) : fallback;
      };
      return Response.json(
        await stillFor(number("still", 2_000), number("cap", 30_000), url.searchParams.get("actors") !== "0"),
      );
    }
    if (pathname === "/__bench/db-counts")
      return Response.json(url.searchParams.has("brief") ? briefOf(tally) : tally);
    if (pathname === "/__bench/d1-state") return Response.json(await d1State(env));
    tally.workerRequests.fetch++;
    return gateway.fetch(request, countedEnv(env, "worker"), ctx);
  },
  async scheduled(controller, env) {
    tally.workerRequests.scheduled++;
    await gateway.scheduled(controller, countedEnv(env, "worker"));
  },
} satisfies ExportedHandler<Env>;
