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
 * - Durable Object requests: `SESSION_ACTOR` is seen through a Proxy whose stubs count each
 *   method call (RPC, `fetch`) made through them, and the actor's `alarm` counts its own
 *   invocations: what Cloudflare bills and limits as requests to an object.
 * - Durable Object SQL: each SessionActor's `ctx.storage.sql.exec` (and its storage's other
 *   methods: alarms, the key-value API, transactions) is replaced, on that actor's own storage
 *   objects before the actor's constructor runs, by a function that counts and calls the
 *   original. A statement is one SQL statement of the text passed to `exec` (a multi-statement
 *   text counts each); the other methods are counted as calls, by name. Statements on
 *   miniflare's own `__miniflare_*` tables (its wrapper records each object's name there under
 *   `wrangler dev`; production has none) are counted apart and left out.
 *
 * The counts live in this isolate (under `wrangler dev` the Worker and its Durable Objects share
 * one) and are read from outside with `GET /__bench/db-counts`; `GET /__bench/d1-state` reads the
 * runs, deliveries, sessions and size of every database through the real bindings (not counted)
 * so the bench knows when a message's work has settled and what it stored. Every other request
 * goes to the gateway.
 */
import { loadConfig } from "../../src/config/load";
import gateway, { SessionActor as GatewaySessionActor } from "../../src/index";
import type { BindingTally, D1State, DatabaseState, Origin, Tally } from "./db-load-tally";

const tally: Tally = {
  // Set on the first request: random values are not allowed in the global scope.
  isolate: "",
  d1: {
    statements: 0,
    roundTrips: 0,
    byOrigin: { worker: { statements: 0, roundTrips: 0 }, actor: { statements: 0, roundTrips: 0 } },
    byBinding: {},
    byCall: {},
    sql: {},
  },
  doSql: { execs: 0, statements: 0, platform: 0, sql: {} },
  doCalls: {},
  doRequests: { total: 0, byMethod: {} },
  actors: 0,
  patchedOk: true,
};

/** Distinct SQL texts kept per histogram; the rest are summed under "(other)". */
const MAX_KEYS = 400;

function bump(map: Record<string, number>, key: string, by: number): void {
  const k = key in map || Object.keys(map).length < MAX_KEYS ? key : "(other)";
  map[k] = (map[k] ?? 0) + by;
}

const label = (sql: string) => sql.replace(/\s+/g, " ").trim().slice(0, 120);

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
    t = { statements: 0, roundTrips: 0, busyMs: 0 };
    tally.d1.byBinding[binding] = t;
  }
  return t;
}

/** Calls waiting for an answer, and since when, by binding (for `busyMs`). */
const waiting = new Map<string, { calls: number; since: number }>();

/** Counts one round trip and passes its answer on, timing the binding's busy spell. */
function trip<T>(route: Route, call: string, statements: number, sqls: string[], send: () => Promise<T>) {
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
  let answer: Promise<T>;
  try {
    answer = send();
  } catch (error) {
    done();
    throw error;
  }
  return answer.finally(done);
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
    return trip(this.route, call, 1, [this.sql], () =>
      Reflect.apply(inner[call] as unknown as (...a: unknown[]) => Promise<unknown>, inner, args),
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
      trip(route, "batch", statements.length, statements.map(sqlOf), () =>
        inner.batch(statements.map(innerOf)),
      ),
  };
}

function countedDb(db: D1Database, route: Route): D1Database {
  return {
    ...countedPreparer(db, route),
    exec: (query: string) => trip(route, "exec", statementCount(query), [query], () => db.exec(query)),
    dump: () => trip(route, "dump", 0, [], () => db.dump()),
    withSession: (constraint?: D1SessionBookmark | D1SessionConstraint) => {
      const session = db.withSession(constraint);
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
        bump(tally.doSql.sql, label(query), n);
        return Reflect.apply(exec, sql, args);
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

export class SessionActor extends GatewaySessionActor {
  constructor(ctx: DurableObjectState, env: Env) {
    const storage = ctx.storage;
    const sql = storage.sql;
    countStorage(storage);
    super(ctx, countedEnv(env, "actor"));
    tally.isolate ||= crypto.randomUUID();
    tally.actors++;
    // The patch is on these objects: the actor must meet the same ones on every read.
    const again = ctx.storage;
    if (again !== storage || again.sql !== sql) tally.patchedOk = false;
  }

  override alarm(): Promise<void> {
    countRequest("alarm");
    return super.alarm();
  }
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
    const { pathname } = new URL(request.url);
    tally.isolate ||= crypto.randomUUID();
    if (pathname === "/__bench/db-counts") return Response.json(tally);
    if (pathname === "/__bench/d1-state") return Response.json(await d1State(env));
    return gateway.fetch(request, countedEnv(env, "worker"), ctx);
  },
  async scheduled(controller, env) {
    await gateway.scheduled(controller, countedEnv(env, "worker"));
  },
} satisfies ExportedHandler<Env>;
