/**
 * Helpers for workerd integration tests: signed webhooks, RPC calls, a fake connector, and the
 * D1 databases of the project's storage.d1 (a test's config keeps them, faults and counts wrap
 * each, reads span them).
 */
import {
  createExecutionContext,
  runDurableObjectAlarm,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { vi } from "vitest";
import { SIGNATURE_HEADER, signBody } from "../../src/auth/signature";
import { allDatabases, bindingOf, databaseNames, databaseOfKey } from "../../src/db/placement";
import { app } from "../../src/http/app";
import { setActorEnv } from "./actor-env";

export const SECRET = "test-connector-secret";
export const TOKEN = "test-token";

/** The `storage` section of the config this project runs with: the D1 databases sessions live in. */
const PROJECT_STORAGE = (JSON.parse(env.SWITCHBOARD_CONFIG) as { storage?: unknown }).storage;

/**
 * A test's own config as SWITCHBOARD_CONFIG text, with the project's `storage` unless the config
 * sets its own: an env rewired without it would place every session in the first database and
 * look for the others' rows there, and the start check would refuse it (SPEC §19).
 */
export function configText(config: unknown): string {
  const plain = typeof config === "object" && config !== null && !Array.isArray(config);
  return JSON.stringify(
    !plain || "storage" in config || PROJECT_STORAGE === undefined
      ? config
      : { ...config, storage: PROJECT_STORAGE },
  );
}

/**
 * `source` with each D1 database of its storage.d1 (by binding name) replaced by `wrap(db)`: a
 * fault injected or a call counted this way holds whichever database a session lives in.
 * Counters kept in `wrap`'s closure count over all of them.
 */
export function wrapDatabases(source: Env, wrap: (db: D1Database, name: string) => D1Database): Env {
  const rewired: Record<string, unknown> = { ...source };
  for (const name of databaseNames(source)) rewired[name] = wrap(bindingOf(source, name), name);
  return rewired as unknown as Env;
}

/**
 * The rows `sql` selects in each database of storage.d1, in that order: for what a test checks
 * across sessions, or wherever a row might have been written.
 */
export async function selectEach<T = Record<string, unknown>>(
  sql: string,
  ...params: unknown[]
): Promise<T[]> {
  const answers = await Promise.all(
    allDatabases(env).map((db) =>
      db
        .prepare(sql)
        .bind(...params)
        .all<T>(),
    ),
  );
  return answers.flatMap((a) => a.results);
}

/**
 * `prefix`0, `prefix`1, …: the first key that lives in each database of storage.d1, in that
 * order, so a test can put rows in every database (one key with a single database).
 */
export function keysInEachDatabase(prefix: string): string[] {
  const databases = allDatabases(env);
  const found = new Map<D1Database, string>();
  for (let i = 0; found.size < databases.length; i++) {
    if (i > 10_000) throw new Error(`no key ${prefix}<n> lives in some database of storage.d1`);
    const db = databaseOfKey(env, `${prefix}${i}`);
    if (!found.has(db)) found.set(db, `${prefix}${i}`);
  }
  return databases.map((db) => found.get(db) as string);
}

export async function inbound(channel: string, body: unknown, opts: { secret?: string; at?: number } = {}) {
  const raw = typeof body === "string" ? body : JSON.stringify(body);
  return exports.default.fetch(`http://gw.test/hooks/inbound/${channel}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      [SIGNATURE_HEADER]: await signBody(opts.secret ?? SECRET, raw, opts.at),
    },
    body: raw,
  });
}

/** A request to the gateway's app with `env` (a test's own config), its waitUntil work awaited. */
export async function callApp(env: Env, path: string, init: RequestInit = {}): Promise<Response> {
  const ctx = createExecutionContext();
  const res = await app.fetch(new Request(`http://gw.test${path}`, init), env, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

/** A signed inbound POST's init (for a test that sends it to an app with its own env). */
export async function signedInbound(raw: string, secret = SECRET): Promise<RequestInit> {
  return {
    method: "POST",
    headers: { "content-type": "application/json", [SIGNATURE_HEADER]: await signBody(secret, raw) },
    body: raw,
  };
}

/** `target`, each call of its methods recorded (by name) before it is made. */
export function recorded<T extends object>(target: T, record: (method: string, args: unknown[]) => void): T {
  return new Proxy(target, {
    get(t, prop, receiver) {
      const value = Reflect.get(t, prop, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        record(String(prop), args);
        return (value as (...a: unknown[]) => unknown).apply(t, args);
      };
    },
  });
}

export async function rpc<T = Record<string, unknown>>(method: string, params: unknown = {}) {
  const res = await exports.default.fetch(`http://gw.test/rpc/${method}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  const body = (await res.json()) as { ok: boolean; payload: T; error?: { code: string; message: string } };
  return { status: res.status, ...body };
}

export interface Delivered {
  url: string;
  signature: string | null;
  body: Record<string, unknown>;
}

/**
 * Intercepts outbound fetches to https://connector.test/* (the DOs run in this isolate).
 * `respond` decides the status per call; deliveries are recorded in order.
 */
export function fakeConnector(respond: (n: number) => number = () => 200) {
  const delivered: Delivered[] = [];
  const real = globalThis.fetch;
  let n = 0;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith("https://connector.test/")) return real(input, init);
    const status = respond(n++);
    const text = typeof init?.body === "string" ? init.body : "";
    if (status >= 200 && status < 300) {
      delivered.push({
        url,
        signature: new Headers(init?.headers).get(SIGNATURE_HEADER),
        body: JSON.parse(text) as Record<string, unknown>,
      });
    }
    return new Response(status < 300 ? "ok" : "down", { status });
  });
  return { delivered, attempts: () => n, restore: () => spy.mockRestore() };
}

export function actor(sessionKey: string) {
  return env.SESSION_ACTOR.getByName(sessionKey);
}

/**
 * Gives the session's actor instance (made now if there is none) another env from its next read
 * on, through the test entry (entry.ts, actor-env.ts): `config` as its SWITCHBOARD_CONFIG (with
 * the project's storage, see configText), `vars` set (undefined removes one), and each D1
 * database of storage.d1 as `databases` wraps it. It replaces an earlier change, and lasts as
 * long as the instance: the next one (after abortAllDurableObjects) has the runtime's env again.
 */
export async function changeActorEnv(
  sessionKey: string,
  change: {
    config?: unknown;
    vars?: Record<string, unknown>;
    databases?: (db: D1Database, name: string) => D1Database;
  },
): Promise<void> {
  await runInDurableObject(actor(sessionKey), (instance) => {
    setActorEnv(instance, {
      ...change,
      config: change.config === undefined ? undefined : configText(change.config),
    });
  });
}

/**
 * Polls until `check` returns a value (bounded: throws after `timeoutMs`). For waits on what
 * must happen; to show that something does not, drain the actors (`drain`) and look then.
 * The deadline is kept with performance.now(), which a faked Date (`holdClock`) leaves running.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 5000,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (performance.now() > deadline) throw new Error(`condition not met within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits server-side (agent.wait) for a run to end and returns the wait result. */
export async function waitRun(runId: string, timeoutMs = 10_000) {
  const res = await rpc<{ status: string; runStatus: string; error?: string }>("agent.wait", {
    runId,
    timeoutMs,
  });
  return res.payload;
}

/**
 * Waits until the session's actor has nothing left to do or to write: no queued or running
 * run, no delivery owed, then has it record its deliveries' outcomes (they wait for the
 * session's next write, see session/d1/records.ts).
 */
export async function actorSettled(sessionKey: string) {
  await eventually(() =>
    runInDurableObject(actor(sessionKey), (_instance, state) => {
      const count = (table: string, where = "") =>
        state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${table} ${where}`).one().n;
      return count("queue") === 0 && count("d1_pending") === 0 && count("outbox", "WHERE done = 0") === 0;
    }),
  );
  await actor(sessionKey).recordOutcomes(sessionKey);
}

/** Runs a pending alarm of the actor right away, if one is set. */
export function fireAlarm(sessionKey: string) {
  return runDurableObjectAlarm(actor(sessionKey));
}

/** What a session's actor holds, read from its storage. */
export interface ActorBacklog {
  /** Runs queued or running (`queue`). */
  runs: number;
  /** Deliveries owed (`outbox`): a row stays owed until its attempt in flight has settled. */
  deliveries: number;
  /** Outcomes of attempts D1 does not show yet (`outbox` rows with a state). */
  outcomes: number;
  /** D1 records deferred in its journal (`d1_pending`). */
  records: number;
  /** When its alarm is set to go off, or null. */
  alarm: number | null;
  /** Runs ended and run ids or announcements received: counts that only grow as work is done. */
  finished: number;
  received: number;
}

export function backlogOf(sessionKey: string): Promise<ActorBacklog> {
  return runInDurableObject(actor(sessionKey), async (_instance, state) => {
    const count = (table: string, where = "") =>
      state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${table} ${where}`).one().n;
    return {
      runs: count("queue"),
      deliveries: count("outbox", "WHERE done = 0"),
      outcomes: count("outbox", "WHERE state IS NOT NULL"),
      records: count("d1_pending"),
      alarm: await state.storage.getAlarm(),
      finished: count("run_ids", "WHERE outcome IS NOT NULL"),
      received: count("run_ids"),
    };
  });
}

/** The deliveries the actor still owes: its `outbox` rows, and when each is attempted next. */
export function outboxOf(sessionKey: string) {
  return runInDurableObject(actor(sessionKey), (_instance, state) =>
    state.storage.sql
      .exec<{ deliveryId: string; attempts: number; nextAt: number }>(
        `SELECT delivery_id AS deliveryId, attempts, next_at AS nextAt FROM outbox WHERE done = 0 ORDER BY next_at`,
      )
      .toArray(),
  );
}

const DRAIN_TIMEOUT_MS = 5000;
const idle = (b: ActorBacklog) => !b.runs && !b.deliveries && !b.outcomes && !b.records && b.alarm === null;

/**
 * Lets the actors of `sessionKeys` finish everything they have to do, so that a test can then
 * assert that nothing more happened (no second delivery, no new run) without sleeping: a due
 * alarm is run at once, work under way (a run, an attempt in flight) is waited for, and it
 * returns once two reads in a row find every actor without runs, deliveries owed or outcomes
 * not recorded (it has them written), deferred records or an alarm, and with no run ended or
 * message received in between (so work one of
 * them handed to another after it was read is seen). Throws, naming what is left, when that
 * does not happen within DRAIN_TIMEOUT_MS: work left for later (a backoff's alarm) is a
 * failure here, not something to wait out; with a held clock, move it on (`advanceToAlarm`).
 */
export async function drain(...sessionKeys: string[]): Promise<void> {
  const deadline = performance.now() + DRAIN_TIMEOUT_MS;
  let previous: string | undefined;
  for (;;) {
    const backlogs: Record<string, ActorBacklog> = {};
    for (const key of sessionKeys) {
      let backlog = await backlogOf(key);
      if (backlog.alarm !== null && backlog.alarm <= Date.now()) await runDurableObjectAlarm(actor(key));
      // Outcomes wait for the session's next write: a read of its deliveries writes them.
      if (backlog.outcomes && !backlog.runs && !backlog.deliveries) {
        await actor(key).recordOutcomes(key);
        backlog = await backlogOf(key);
      }
      backlogs[key] = backlog;
    }
    const seen = JSON.stringify(backlogs);
    if (Object.values(backlogs).every(idle)) {
      if (seen === previous) return;
      previous = seen;
      continue;
    }
    previous = undefined;
    if (performance.now() > deadline) {
      throw new Error(`actors not drained within ${DRAIN_TIMEOUT_MS}ms: ${seen}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Holds the clock for this test: Date is faked (the actors run in this isolate and read it
 * too), set `aheadMs` ahead and standing still. The alarms actors set from it are then that far
 * off for workerd, so none goes off by itself: the test moves the clock and runs them
 * (`advanceToAlarm`). Returns the held time; undo with vi.useRealTimers() (in an afterEach).
 */
export function holdClock(aheadMs = 3_600_000): number {
  const now = Date.now() + aheadMs;
  vi.useFakeTimers({ toFake: ["Date"] });
  vi.setSystemTime(now);
  return now;
}

/**
 * Moves a held clock (`holdClock`) to the actor's alarm and runs it. Returns the alarm's time,
 * or null when none was set (nothing ran).
 */
export async function advanceToAlarm(sessionKey: string): Promise<number | null> {
  const { alarm } = await backlogOf(sessionKey);
  if (alarm === null) return null;
  if (alarm > Date.now()) vi.setSystemTime(alarm);
  await runDurableObjectAlarm(actor(sessionKey));
  return alarm;
}

/**
 * The next attempt of the delivery the actor owes first, under a held clock (`holdClock`): the
 * clock moves to the actor's alarms (an earlier one records an outcome) until the one that
 * makes it. Returns once that attempt has settled (its
 * outbox row counts one attempt more, or is gone: delivered or dead), with the row before it,
 * the alarm's time and the row after it.
 */
export async function nextAttempt(sessionKey: string) {
  const [before] = await outboxOf(sessionKey);
  if (!before) throw new Error(`${sessionKey} owes no delivery`);
  const attempted = async () => {
    const row = (await outboxOf(sessionKey)).find((r) => r.deliveryId === before.deliveryId);
    return (!row || row.attempts > before.attempts) && { row };
  };
  // An alarm before the attempt's (an outcome to record) is run on the way.
  for (let alarms = 0; alarms < 5; alarms++) {
    const at = await advanceToAlarm(sessionKey);
    if (at === null) break;
    if (at < before.nextAt) continue;
    const settled = await eventually(attempted);
    return { before, at, after: settled.row };
  }
  throw new Error(`${sessionKey}: no alarm made the attempt due at ${before.nextAt}`);
}

let counter = 0;
export function dm(text: string, extra: Record<string, unknown> = {}) {
  counter++;
  return { messageId: `m-${Date.now()}-${counter}`, chatType: "direct", from: "user-1", text, ...extra };
}
