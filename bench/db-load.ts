/**
 * Bench row 14: the storage load of a message, counted from outside. Per message, the D1
 * statements and D1 round trips (requests sent to D1: a statement's first/all/run/raw, a batch,
 * an exec), per run the D1 round trips, and the Durable Object SQL statements, for:
 *  (a)  a message to a new session, one at a time;
 *  (b)  a sustained burst to one existing session (messages sent back to back, one ack after
 *       another, replies not awaited in between), averaged over the burst;
 *  (b2) the same burst to a session whose model answers over HTTP in SLOW_MODEL_MS (as real
 *       models do, not at once: the session is busy while messages arrive);
 *  (b1) a message to an existing session, one at a time;
 *  (c)  a message whose turn makes one tool call (the echo model calls `current_time` for the
 *       text `call:current_time {}`), to an existing session, one at a time;
 *  (spread-new, spread-existing) a message to each of many new sessions, then one more to each,
 *       8 acks in flight (many keys: how the databases share the load, what a session stores);
 * and per read, for the operator's `sessions.list` (limit 50), `runs.list` (limit 50) and
 * `runs.get`, one at a time. Each workload also shows each D1 database's share of its statements
 * (with `--databases 4` the gateway spreads sessions over 4: `storage.d1` DB, DB_1, DB_2, DB_3),
 * the requests to Durable Objects, and what the databases grew by (D1's `size_after`). The burst
 * also shows the workerd CPU per message (the bench's own polls of the counts taken out).
 *
 * Method: the gateway runs under its own `wrangler dev` (echo model, a bridge connector whose
 * replies go to a fake on 127.0.0.1) from a copy of wrangler.toml in which only `main` differs:
 * bench/floor/db-load-worker.ts, a test-only entry around the unchanged src/index.ts. It hands the
 * Worker and each SessionActor the runtime's own env with each D1 binding of `storage.d1` wrapped
 * (every call is counted, by binding, and passed on as made: same SQL, same batches, same order)
 * and `SESSION_ACTOR`'s stubs counting their calls, and replaces each actor's own
 * `storage.sql.exec` (and its other storage methods) by a counting pass-through before the actor
 * is built. Nothing in src/ changes and no product code path is skipped or added: the counts are
 * what the gateway asked of D1 and of its Durable Object SQLite. (Statements that miniflare's own
 * wrapper runs on an actor's database, on its `__miniflare_*` tables, absent in production, are
 * left out. Miniflare's D1 simulator exposes no counters, and the persisted .sqlite files show
 * rows changed, not statements or round trips.) The counts are read with
 * `GET /__bench/db-counts`, served by that entry without touching any storage. Nothing here
 * measures remote D1: the statements are the product's, their cost is local SQLite's.
 *
 * A message's window runs from its send until nothing changes: its reply reached the fake
 * connector, then the counts stayed still for QUIET_MS (twice the write-behind journal's ~1 s
 * timer) and D1 (read through the unwrapped binding, not counted) shows every run ended and no
 * delivery pending or retrying; bounded by SETTLE_CAP_MS. A warm-up (two new sessions, one tool
 * call) runs first, so isolate-wide first-use work is not charged to a workload; after the last
 * window the counts are watched for another IDLE_WATCH_MS and any change is reported.
 *
 * Part of `npm run bench`; alone:
 * `node bench/db-load.ts [isolated=10] [burst=60] [spread=100] [--databases 4]` (isolated: messages
 * of (a), (b1) and (c) each, and calls of each read; burst: messages of (b); spread: sessions of
 * the spread workloads, 0 to leave them out).
 * Both write the result to bench/results/db-load.json (RESULT_FILE), the input of
 * `npm run capacity`. Everything on 127.0.0.1.
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
import type { LocalServer, LocalServerOptions } from "../scripts/lib/local-server.ts";
import { groupCpuSeconds } from "../scripts/lib/proc-cpu.ts";
import { SIGNATURE_HEADER, signBody } from "../src/auth/signature.ts";
import type { BindingTally, D1State, Tally } from "./floor/db-load-tally.ts";
import { startModel } from "./workload.ts";

const TOKEN = "bench-db-load-token";
const SECRET = "bench-db-load-bridge-secret";
/** Counts still for this long (twice the journal's ~1 s timer) end a message's window. */
const QUIET_MS = 2_000;
const POLL_MS = 100;
const SETTLE_CAP_MS = 30_000;
const REPLY_CAP_MS = 30_000;
const BURST_REPLY_CAP_MS = 120_000;
const IDLE_WATCH_MS = 3_000;
/** No message is sent after this long (every wait above has its own cap too). */
const TOTAL_CAP_MS = 10 * 60_000;
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
/** Polls of the counts timed at rest, to take the bench's own polling out of the burst's CPU. */
const POLL_CALIBRATION = 40;
/** Where the standalone run and `npm run bench` write their result (`npm run capacity` reads it). */
export const RESULT_FILE = "bench/results/db-load.json";
/** How long the model of the (b2) burst takes to answer, and the reference that names it. */
const SLOW_MODEL_MS = 250;
const SLOW_MODEL_REF = "slow/m";
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
}

export interface Workload {
  id: "a" | "b" | "b2" | "b1" | "c" | "spread-new" | "spread-existing";
  name: string;
  messages: number;
  runs: number;
  /** Sums over the workload's windows. */
  load: Load;
  /** One per window: a message each for the one-at-a-time workloads, the whole burst for (b). */
  windows: Load[];
  settled: boolean;
  /** What the databases grew by over the workload's windows (bytes, D1's `size_after`). */
  storedBytes: number;
  /** Sessions the workload created. */
  sessionsCreated: number;
  /** workerd CPU per message in ms (the burst only; the bench's polls taken out). */
  cpuMsPerMessage?: number;
  /** Bytes of a message's text and its reply's (the burst and the spread workloads; echo model). */
  textBytesPerMessage?: number;
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

const storageCalls = (t: Tally) => Object.values(t.doCalls).reduce((a, b) => a + b, 0);

function diffBindings(after: Tally, before: Tally): Record<string, BindingTally> {
  const out: Record<string, BindingTally> = {};
  for (const [name, a] of Object.entries(after.d1.byBinding)) {
    const b = before.d1.byBinding[name] ?? { statements: 0, roundTrips: 0, busyMs: 0 };
    out[name] = {
      statements: a.statements - b.statements,
      roundTrips: a.roundTrips - b.roundTrips,
      busyMs: a.busyMs - b.busyMs,
    };
  }
  return out;
}

/** Thrown when the counts of a window come from two isolates (workerd started the Worker again). */
export class IsolateRestartError extends Error {
  override name = "IsolateRestartError";
}

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
  };
}

function addMap(into: Record<string, number>, from: Record<string, number>): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
}

function sum(loads: Load[]): Load {
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
      const into = out.byBinding[name] ?? { statements: 0, roundTrips: 0, busyMs: 0 };
      out.byBinding[name] = into;
      into.statements += b.statements;
      into.roundTrips += b.roundTrips;
      into.busyMs += b.busyMs;
    }
    out.actors += l.actors;
    addMap(out.byCall, l.byCall);
    addMap(out.d1Sql, l.d1Sql);
    addMap(out.doSql, l.doSql);
  }
  return out;
}

/** Changes whenever anything counted changes. */
const fingerprint = (t: Tally) =>
  [
    t.d1.statements,
    t.d1.roundTrips,
    t.doSql.statements,
    t.doSql.execs,
    storageCalls(t),
    t.doRequests.total,
    t.actors,
  ].join("/");

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
}): Promise<DbLoadResult> {
  const isolated = Math.max(1, Math.min(MAX_ISOLATED, Math.floor(opts.isolated ?? 10)));
  const burst = Math.max(1, Math.min(MAX_BURST, Math.floor(opts.burst ?? 60)));
  const spread = Math.max(0, Math.min(MAX_SPREAD, Math.floor(opts.spread ?? 100)));
  const databases = [...(opts.d1 ?? ["DB"])];
  const problems: string[] = [];
  const bridge = await startBridge();
  const slowModel = await startModel(SLOW_MODEL_MS);
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
        // The echo model answers every workload; (b2)'s session picks this one with `/new`.
        models: { providers: { slow: { api: "openai-compatible", baseUrl: slowModel.url } } },
        connectors: { bridge: { deliverUrl: bridge.url, secretEnv: "BRIDGE_SECRET" } },
        ...(databases.length > 1 || databases[0] !== "DB" ? { storage: { d1: databases } } : {}),
      },
    });
    const url = server.url;
    const pid = server.pid;
    opts.log(
      `db load: gateway (counting entry ${ENTRY}, D1 ${databases.join(", ")}) on ${url} (pid ${pid}), bridge ${bridge.url}`,
    );

    const getJson = async <T>(p: string): Promise<T> => {
      const res = await fetch(`${url}${p}`, { signal: AbortSignal.timeout(10_000) });
      if (!res.ok) throw new Error(`${p} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
      return (await res.json()) as T;
    };
    /** The bench's own requests to workerd, so their CPU can be taken out of a window's. */
    const polls = { counts: 0, state: 0 };
    const counts = () => {
      polls.counts++;
      return getJson<Tally>("/__bench/db-counts");
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
    let n = 0;
    const send = async (from: string, text: string): Promise<string> => {
      overCap();
      const messageId = `db-load-${++n}`;
      const body = JSON.stringify({ messageId, chatType: "direct", from, text });
      const res = await fetch(`${url}/hooks/inbound/bridge`, {
        method: "POST",
        headers: { "content-type": "application/json", [SIGNATURE_HEADER]: await signBody(SECRET, body) },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      const answer = await res.text();
      if (res.status !== 200 && res.status !== 202)
        throw new Error(`inbound ${messageId} answered ${res.status}: ${answer.slice(0, 300)}`);
      return messageId;
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

    /** Waits until nothing changes (see the header); returns the counts and D1's state then. */
    const settle = async (
      expectRuns: number,
    ): Promise<{ tally: Tally; state: D1State; settled: boolean }> => {
      const deadline = performance.now() + SETTLE_CAP_MS;
      let last = await counts();
      let quietSince = performance.now();
      while (performance.now() < deadline) {
        await sleep(POLL_MS);
        const now = await counts();
        if (fingerprint(now) !== fingerprint(last)) {
          last = now;
          quietSince = performance.now();
          continue;
        }
        if (performance.now() - quietSince < QUIET_MS) continue;
        const state = await d1State();
        if (state.runs >= expectRuns && state.activeRuns === 0 && state.openDeliveries === 0) {
          const after = await counts();
          if (fingerprint(after) === fingerprint(last)) return { tally: after, state, settled: true };
          last = after;
        }
        // Not there yet: look again after a shorter quiet spell.
        quietSince = performance.now() - QUIET_MS + 250;
      }
      return { tally: await counts(), state: await d1State(), settled: false };
    };

    const first = await counts();
    if (!first.patchedOk)
      problems.push("db load: the storage patch did not take (DO SQL counts are not complete)");
    let state = await d1State();

    /** One message and its window: send, reply, settle. */
    const oneMessage = async (from: string, text: string, expectReply?: (t: string) => boolean) => {
      const before = await counts();
      const stateBefore = state;
      const id = await send(from, text);
      if (!(await replies([id], REPLY_CAP_MS)))
        problems.push(`db load: no reply to ${id} (${from}) within the cap`);
      const reply = bridge.replies.get(id);
      if (reply !== undefined && expectReply && !expectReply(reply))
        problems.push(`db load: reply to ${id} was ${JSON.stringify(reply.slice(0, 120))}`);
      const s = await settle(state.runs + 1);
      const runs = s.state.runs - state.runs;
      state = s.state;
      if (!s.settled) problems.push(`db load: ${id} did not settle within ${SETTLE_CAP_MS / 1000} s`);
      return {
        load: delta(before, s.tally),
        runs,
        settled: s.settled,
        bytes: s.state.sizeBytes - stateBefore.sizeBytes,
        sessions: s.state.sessions - stateBefore.sessions,
      };
    };
    const toolReply = (t: string) => t.startsWith("echo: current_time -> ");

    opts.log("db load: warm-up (two new sessions, one tool call)");
    await oneMessage("warm-0", "warm-up 0");
    await oneMessage("warm-1", "warm-up 1");
    await oneMessage("warm-1", "call:current_time {}", toolReply);

    const workloads: Workload[] = [];
    const oneAtATime = async (
      id: Workload["id"],
      name: string,
      count: number,
      message: (i: number) => { from: string; text: string },
      expectReply?: (t: string) => boolean,
    ) => {
      opts.log(`db load: (${id}) ${name}, ${count} messages one at a time`);
      const windows: Load[] = [];
      let runs = 0;
      let settled = true;
      let storedBytes = 0;
      let sessionsCreated = 0;
      for (let i = 0; i < count; i++) {
        const m = message(i);
        const r = await oneMessage(m.from, m.text, expectReply);
        windows.push(r.load);
        runs += r.runs;
        settled &&= r.settled;
        storedBytes += r.bytes;
        sessionsCreated += r.sessions;
      }
      workloads.push({
        id,
        name,
        messages: count,
        runs,
        load: sum(windows),
        windows,
        settled,
        storedBytes,
        sessionsCreated,
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
    const burstWorkload = async (id: Workload["id"], name: string, from: string, first: string) => {
      opts.log(`db load: (${id}) creating the burst session, then ${burst} messages back to back`);
      await oneMessage(from, first);
      // What one poll of the counts and of D1's state costs workerd, timed at rest.
      const calibrate = async (poll: () => Promise<unknown>) => {
        const c0 = cpuMs();
        for (let i = 0; i < POLL_CALIBRATION; i++) await poll();
        return (cpuMs() - c0) / POLL_CALIBRATION;
      };
      const perCountsPoll = await calibrate(counts);
      const perStatePoll = await calibrate(d1State);
      const before = await counts();
      const stateBefore = state;
      const polls0 = { ...polls };
      const cpu0 = cpuMs();
      const runs0 = state.runs;
      const ids: string[] = [];
      let textBytes = 0;
      for (let i = 0; i < burst; i++) {
        const text = `burst message ${i}`;
        textBytes += Buffer.byteLength(text);
        ids.push(await send(from, text));
      }
      if (!(await replies(ids, BURST_REPLY_CAP_MS)))
        problems.push(`db load: burst: ${ids.filter((x) => bridge.replies.has(x)).length}/${burst} replies`);
      const s = await settle(runs0 + burst);
      const cpu =
        cpuMs() -
        cpu0 -
        (polls.counts - polls0.counts) * perCountsPoll -
        (polls.state - polls0.state) * perStatePoll;
      state = s.state;
      if (!s.settled) problems.push(`db load: burst did not settle within ${SETTLE_CAP_MS / 1000} s`);
      const load = delta(before, s.tally);
      workloads.push({
        id,
        name,
        messages: burst,
        runs: s.state.runs - runs0,
        load,
        windows: [load],
        settled: s.settled,
        storedBytes: s.state.sizeBytes - stateBefore.sizeBytes,
        sessionsCreated: s.state.sessions - stateBefore.sessions,
        ...(Number.isFinite(cpu) ? { cpuMsPerMessage: cpu / burst } : {}),
        textBytesPerMessage:
          (textBytes + ids.reduce((a, x) => a + Buffer.byteLength(bridge.replies.get(x) ?? ""), 0)) / burst,
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
    );

    await oneMessage("existing", "first message");
    await oneAtATime("b1", "message to an existing session, one at a time", isolated, (i) => ({
      from: "existing",
      text: `again ${i}`,
    }));

    await oneMessage("tool", "first message");
    await oneAtATime(
      "c",
      "message whose turn makes one tool call (current_time), existing session",
      isolated,
      () => ({ from: "tool", text: "call:current_time {}" }),
      toolReply,
    );

    /**
     * Many distinct sessions at once: one message to each of `spread` new sessions, then one more
     * to each, SPREAD_CONCURRENCY acks in flight; one window each (replies, then settle). Many
     * keys show how the databases share the load, and many rows what a session stores.
     */
    const spreadWorkload = async (id: Workload["id"], name: string, text: (i: number) => string) => {
      opts.log(`db load: (${id}) ${name}`);
      const before = await counts();
      const stateBefore = state;
      const ids: string[] = [];
      let textBytes = 0;
      let next = 0;
      const lane = async () => {
        while (next < spread) {
          const i = next++;
          const t = text(i);
          textBytes += Buffer.byteLength(t);
          ids.push(await send(`spread-${i}`, t));
        }
      };
      await Promise.all(Array.from({ length: SPREAD_CONCURRENCY }, lane));
      if (!(await replies(ids, SPREAD_REPLY_CAP_MS)))
        problems.push(
          `db load (${id}): ${ids.filter((x) => bridge.replies.has(x)).length}/${spread} replies`,
        );
      const s = await settle(stateBefore.runs + spread);
      state = s.state;
      if (!s.settled) problems.push(`db load (${id}) did not settle within ${SETTLE_CAP_MS / 1000} s`);
      const load = delta(before, s.tally);
      workloads.push({
        id,
        name,
        messages: spread,
        runs: s.state.runs - stateBefore.runs,
        load,
        windows: [load],
        settled: s.settled,
        storedBytes: s.state.sizeBytes - stateBefore.sizeBytes,
        sessionsCreated: s.state.sessions - stateBefore.sessions,
        textBytesPerMessage:
          (textBytes + ids.reduce((a, x) => a + Buffer.byteLength(bridge.replies.get(x) ?? ""), 0)) / spread,
      });
    };
    if (spread > 0) {
      await spreadWorkload(
        "spread-new",
        `message to a new session, ${spread} sessions, ${SPREAD_CONCURRENCY} at a time`,
        (i) => `hello ${i}`,
      );
      await spreadWorkload(
        "spread-existing",
        `one more message (${SPREAD_TEXT_BYTES} bytes) to each of those ${spread} sessions, ${SPREAD_CONCURRENCY} at a time`,
        (i) => textOf(`again ${i}:`, SPREAD_TEXT_BYTES),
      );
    }

    // Reads: each call's window closes once the counts stayed still for READ_QUIET_MS.
    const reads: ReadLoad[] = [];
    const readQuiet = async (): Promise<Tally> => {
      const deadline = performance.now() + SETTLE_CAP_MS;
      let last = await counts();
      let quietSince = performance.now();
      while (performance.now() < deadline) {
        await sleep(POLL_MS);
        const now = await counts();
        if (fingerprint(now) !== fingerprint(last)) {
          last = now;
          quietSince = performance.now();
        } else if (performance.now() - quietSince >= READ_QUIET_MS) return now;
      }
      problems.push(`db load: a read's counts did not stay still within ${SETTLE_CAP_MS / 1000} s`);
      return last;
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
      `${w.messages} messages, ${w.runs} runs`,
      `D1 round trips per message: Worker ${fixed(per(w.load.workerRoundTrips))}, actors ${fixed(per(w.load.actorRoundTrips))}`,
      `calls ${Object.entries(w.load.byCall)
        .map(([k, v]) => `${k} ${fixed(per(v))}`)
        .join(", ")}`,
      spread ? `statements by database: ${spread}` : "",
      w.windows.length > 1
        ? `per message: D1 statements ${range((l) => l.d1Statements)}, round trips ${range((l) => l.d1RoundTrips)}, DO SQL ${range((l) => l.doStatements)}`
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
      w.settled ? "" : "NOT SETTLED within the cap",
    ]
      .filter(Boolean)
      .join("; "),
  };
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
      const top = (m: Record<string, number>) =>
        Object.entries(m)
          .sort((a, b) => b[1] - a[1])
          .map(([sql, v]) => `    ${fixed(v / w.messages).padStart(6)}  ${sql}`);
      out.push("  D1 (origin, SQL):", ...top(w.load.d1Sql), "  Durable Object SQL:", ...top(w.load.doSql));
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
  sessionsCreated: number;
  /** Bytes of a message's text and its reply's, where known. */
  textBytesPerMessage?: number;
  cpuMsPerMessage?: number;
  settled: boolean;
}

/**
 * bench/results/db-load.json: what `npm run capacity` reads when it is not told to measure. Per
 * message (and per read) figures only; the SQL breakdown stays in the printed report.
 */
export interface DbLoadMeasurement {
  version: 1;
  measuredAt: string;
  /** The commit the gateway was measured at, and whether src/, migrations/ or wrangler.toml differed from it. */
  source: { commit: string; changed: boolean };
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

/** The commit of `repo` and whether the gateway's sources differ from it (unknown outside git). */
function sourceOf(repo: string): DbLoadMeasurement["source"] {
  try {
    const git = (...args: string[]) => execFileSync("git", args, { cwd: repo, encoding: "utf8" }).trim();
    return {
      commit: git("rev-parse", "HEAD"),
      changed: git("status", "--porcelain", "--", "src", "migrations", "wrangler.toml", "bench/floor") !== "",
    };
  } catch {
    return { commit: "unknown", changed: true };
  }
}

export function measurementOf(result: DbLoadResult, repo: string): DbLoadMeasurement {
  const workloads: DbLoadMeasurement["workloads"] = {};
  let busyMs = 0;
  let statements = 0;
  for (const w of result.workloads) {
    const p = perMessage(w);
    for (const b of Object.values(w.load.byBinding)) busyMs += b.busyMs;
    statements += w.load.d1Statements;
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
      sessionsCreated: w.sessionsCreated,
      ...(w.textBytesPerMessage !== undefined ? { textBytesPerMessage: w.textBytesPerMessage } : {}),
      ...(w.cpuMsPerMessage !== undefined ? { cpuMsPerMessage: w.cpuMsPerMessage } : {}),
      settled: w.settled,
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
    source: sourceOf(repo),
    databases: result.databases,
    workloads,
    reads,
    localD1MsPerStatement: statements ? busyMs / statements : Number.NaN,
    sessionsByBinding: result.sessionsByBinding,
    problems: result.problems,
  };
}

export function writeMeasurement(repo: string, m: DbLoadMeasurement, file = RESULT_FILE): string {
  const target = path.join(repo, file);
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

/** Copies the sources a gateway runs from `repo` into `root`, and links its node_modules. */
export function copySources(repo: string, root: string): void {
  for (const entry of SNAPSHOT_ENTRIES)
    if (existsSync(path.join(repo, entry)))
      cpSync(path.join(repo, entry), path.join(root, entry), { recursive: true });
  symlinkSync(path.join(repo, "node_modules"), path.join(root, "node_modules"), "dir");
}

/** Standalone: a snapshot of the working tree (wrangler dev reloads on any change in it). */
function snapshot(repo: string): string {
  const root = mkdtempSync(path.join(tmpdir(), "switchboard-bench-db-load-src-"));
  copySources(repo, root);
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
    log: (m: string) => void;
  },
): Promise<DbLoadResult> {
  const root = snapshot(repo);
  try {
    const { scratchDir, startLocalServer } = (await import(
      pathToFileURL(path.join(root, "scripts/lib/local-server.ts")).href
    )) as typeof import("../scripts/lib/local-server.ts");
    const persistTo = scratchDir("switchboard-bench-db-load-");
    try {
      return await benchDbLoad({ start: startLocalServer, root, persistTo, ...opts });
    } finally {
      rmSync(persistTo, { recursive: true, force: true });
    }
  } finally {
    // The snapshot links node_modules: unlink that first, so nothing can ever follow it.
    rmSync(path.join(root, "node_modules"), { force: true });
    rmSync(root, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const repo = path.resolve(import.meta.dirname, "..");
  const args = process.argv.slice(2);
  const flag = args.indexOf("--databases");
  const count = flag >= 0 ? Number(args[flag + 1]) : 1;
  if (!Number.isInteger(count) || count < 1 || count > 8) {
    process.stderr.write(`--databases takes 1 to 8 (got ${args[flag + 1]})\n`);
    process.exit(2);
  }
  const [isolated, burst, spread] = args
    .filter((a, i) => !a.startsWith("--") && (flag < 0 || i !== flag + 1))
    .map(Number);
  let failed = false;
  try {
    const result = await measureDbLoad(repo, {
      log: (m) => process.stderr.write(`[bench] ${m}\n`),
      d1: databaseNames(count),
      ...(isolated ? { isolated } : {}),
      ...(burst ? { burst } : {}),
      ...(spread !== undefined && Number.isFinite(spread) ? { spread } : {}),
    });
    console.log(dbLoadReport(result, true).join("\n"));
    const file = writeMeasurement(repo, measurementOf(result, repo));
    process.stderr.write(`[bench] wrote ${path.relative(repo, file)}\n`);
  } catch (error) {
    failed = true;
    process.stderr.write(
      `[bench] db load failed: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
    );
  }
  process.exit(failed ? 1 : 0);
}
