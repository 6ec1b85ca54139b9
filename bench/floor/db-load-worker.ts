/**
 * The gateway as the bench's D1/DO load row (bench/db-load.ts, row 14 of `npm run bench`) runs it
 * under `wrangler dev`: src/index.ts unchanged, behind this entry, which counts what the gateway
 * asks of its storage. Never deployed; bench/db-load.ts points a copy of wrangler.toml (only
 * `main` differs) at it. It lives in bench/floor/ because that is the part of bench/ that
 * type-checks as Worker code (tsconfig.json includes it, tsconfig.node.json leaves it out).
 *
 * - D1: the Worker's `env` and each SessionActor's `env` are the runtime's own, seen through a
 *   Proxy whose `DB` is a counting wrapper of the real binding (one per origin, so the bench
 *   can tell the Worker's requests from the actors'). A round trip is a call that sends one
 *   request to D1: a statement's `first`, `all`, `run` or `raw`, a `batch`, an `exec`. Its
 *   statements: 1, the batch's length, or the statements of the `exec` text. `prepare` and
 *   `bind` send nothing. Every call is passed on to the real binding as made (a batch with the
 *   real statements the wrapped ones stand for), so the product's code paths and its SQL are
 *   unchanged.
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
 * runs and deliveries through the real binding (not counted) so the bench knows when a message's
 * work has settled. Every other request goes to the gateway.
 */
import gateway, { SessionActor as GatewaySessionActor } from "../../src/index";
import type { Origin, Tally } from "./db-load-tally";

const tally: Tally = {
  d1: {
    statements: 0,
    roundTrips: 0,
    byOrigin: { worker: { statements: 0, roundTrips: 0 }, actor: { statements: 0, roundTrips: 0 } },
    byCall: {},
    sql: {},
  },
  doSql: { execs: 0, statements: 0, platform: 0, sql: {} },
  doCalls: {},
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

function trip(origin: Origin, call: string, statements: number, sqls: string[]): void {
  tally.d1.roundTrips++;
  tally.d1.statements += statements;
  tally.d1.byOrigin[origin].roundTrips++;
  tally.d1.byOrigin[origin].statements += statements;
  bump(tally.d1.byCall, call, 1);
  if (call === "exec") bump(tally.d1.sql, `${origin} ${label(sqls[0] ?? "")}`, statements);
  else for (const sql of sqls) bump(tally.d1.sql, `${origin} ${label(sql)}`, 1);
}

// ---------------------------------------------------------------------------------------------
// D1: a wrapper of the binding (and of its sessions) whose statements remember their SQL

const INNER = Symbol("the real statement");

class CountedStatement {
  readonly [INNER]: D1PreparedStatement;
  readonly sql: string;
  readonly origin: Origin;

  constructor(inner: D1PreparedStatement, sql: string, origin: Origin) {
    this[INNER] = inner;
    this.sql = sql;
    this.origin = origin;
  }

  bind(...values: unknown[]): CountedStatement {
    return new CountedStatement(this[INNER].bind(...values), this.sql, this.origin);
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
    trip(this.origin, call, 1, [this.sql]);
    const inner = this[INNER];
    return Reflect.apply(inner[call] as unknown as (...a: unknown[]) => Promise<unknown>, inner, args);
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

function countedPreparer(inner: Preparer, origin: Origin) {
  return {
    prepare: (query: string) =>
      new CountedStatement(inner.prepare(query), query, origin) as unknown as D1PreparedStatement,
    batch: (statements: D1PreparedStatement[]) => {
      trip(origin, "batch", statements.length, statements.map(sqlOf));
      return inner.batch(statements.map(innerOf));
    },
  };
}

function countedDb(db: D1Database, origin: Origin): D1Database {
  return {
    ...countedPreparer(db, origin),
    exec: (query: string) => {
      trip(origin, "exec", statementCount(query), [query]);
      return db.exec(query);
    },
    dump: () => {
      trip(origin, "dump", 0, []);
      return db.dump();
    },
    withSession: (constraint?: D1SessionBookmark | D1SessionConstraint) => {
      const session = db.withSession(constraint);
      return {
        ...countedPreparer(session, origin),
        getBookmark: () => session.getBookmark(),
      } as unknown as D1DatabaseSession;
    },
  } as unknown as D1Database;
}

const dbs = new WeakMap<D1Database, Partial<Record<Origin, D1Database>>>();
const envs = new WeakMap<Env, Partial<Record<Origin, Env>>>();

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

/** The runtime's env, except that `DB` is the counting wrapper (the same one for the same binding). */
function countedEnv(env: Env, origin: Origin): Env {
  return memo(envs, env, origin, () => {
    return new Proxy(env, {
      get(target, prop) {
        if (prop === "DB") return memo(dbs, target.DB, origin, () => countedDb(target.DB, origin));
        return Reflect.get(target, prop, target);
      },
    });
  });
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
    tally.actors++;
    // The patch is on these objects: the actor must meet the same ones on every read.
    const again = ctx.storage;
    if (again !== storage || again.sql !== sql) tally.patchedOk = false;
  }
}

async function d1State(db: D1Database) {
  return db
    .prepare(
      `select (select count(*) from runs) as runs,
  (select count(*) from runs where status in ('queued', 'running')) as activeRuns,
  (select count(*) from deliveries) as deliveries,
  (select count(*) from deliveries where status in ('pending', 'retrying')) as openDeliveries`,
    )
    .first<{ runs: number; activeRuns: number; deliveries: number; openDeliveries: number }>();
}

export default {
  async fetch(request, env, ctx) {
    const { pathname } = new URL(request.url);
    if (pathname === "/__bench/db-counts") return Response.json(tally);
    if (pathname === "/__bench/d1-state") return Response.json(await d1State(env.DB));
    return gateway.fetch(request, countedEnv(env, "worker"), ctx);
  },
  async scheduled(controller, env) {
    await gateway.scheduled(controller, countedEnv(env, "worker"));
  },
} satisfies ExportedHandler<Env>;
