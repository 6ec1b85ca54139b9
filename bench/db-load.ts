/**
 * Bench row 14: the storage load of a message, counted from outside. Per message, the D1
 * statements and D1 round trips (requests sent to D1: a statement's first/all/run/raw, a batch,
 * an exec), per run the D1 round trips, and the Durable Object SQL statements, for:
 *  (a)  a message to a new session, one at a time;
 *  (b)  a sustained burst to one existing session (messages sent back to back, one ack after
 *       another, replies not awaited in between), averaged over the burst;
 *  (b1) a message to an existing session, one at a time;
 *  (c)  a message whose turn makes one tool call (the echo model calls `current_time` for the
 *       text `call:current_time {}`), to an existing session, one at a time.
 *
 * Method: the gateway runs under its own `wrangler dev` (echo model, a bridge connector whose
 * replies go to a fake on 127.0.0.1) from a copy of wrangler.toml in which only `main` differs:
 * bench/floor/db-load-worker.ts, a test-only entry around the unchanged src/index.ts. It hands the
 * Worker and each SessionActor the runtime's own env with `DB` wrapped (every call is counted and
 * passed on as made: same SQL, same batches, same order), and replaces each actor's own
 * `storage.sql.exec` (and its other storage methods) by a counting pass-through before the actor
 * is built. Nothing in src/ changes and no product code path is skipped or added: the counts are
 * what the gateway asked of D1 and of its Durable Object SQLite. (Statements that miniflare's own
 * wrapper runs on an actor's database, on its `__miniflare_*` tables, absent in production, are
 * left out. Miniflare's D1 simulator exposes no counters, and the persisted .sqlite files show
 * rows changed, not statements or round trips.) The counts are read with
 * `GET /__bench/db-counts`, served by that entry without touching any storage.
 *
 * A message's window runs from its send until nothing changes: its reply reached the fake
 * connector, then the counts stayed still for QUIET_MS (twice the write-behind journal's ~1 s
 * timer) and D1 (read through the unwrapped binding, not counted) shows every run ended and no
 * delivery pending or retrying; bounded by SETTLE_CAP_MS. A warm-up (two new sessions, one tool
 * call) runs first, so isolate-wide first-use work is not charged to a workload; after the last
 * window the counts are watched for another IDLE_WATCH_MS and any change is reported.
 *
 * Part of `npm run bench`; alone: `node bench/db-load.ts [isolated=10] [burst=60]` (isolated:
 * messages of (a), (b1) and (c) each; burst: messages of (b)). Everything on 127.0.0.1.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { LocalServer, LocalServerOptions } from "../scripts/lib/local-server.ts";
import { SIGNATURE_HEADER, signBody } from "../src/auth/signature.ts";
import type { Tally } from "./floor/db-load-tally.ts";

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
/** The entry the copied wrangler config points at (relative to the gateway's root). */
const ENTRY = "bench/floor/db-load-worker.ts";
const CONFIG_NAME = "wrangler.bench-db-load.toml";

interface D1State {
  runs: number;
  activeRuns: number;
  deliveries: number;
  openDeliveries: number;
}

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
  actors: number;
  byCall: Record<string, number>;
  d1Sql: Record<string, number>;
  doSql: Record<string, number>;
}

export interface Workload {
  id: "a" | "b" | "b1" | "c";
  name: string;
  messages: number;
  runs: number;
  /** Sums over the workload's windows. */
  load: Load;
  /** One per window: a message each for the one-at-a-time workloads, the whole burst for (b). */
  windows: Load[];
  settled: boolean;
}

export interface DbLoadResult {
  workloads: Workload[];
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

function delta(before: Tally, after: Tally): Load {
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
    out.actors += l.actors;
    addMap(out.byCall, l.byCall);
    addMap(out.d1Sql, l.d1Sql);
    addMap(out.doSql, l.doSql);
  }
  return out;
}

/** Changes whenever anything counted changes. */
const fingerprint = (t: Tally) =>
  [t.d1.statements, t.d1.roundTrips, t.doSql.statements, t.doSql.execs, storageCalls(t), t.actors].join("/");

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
  /** Messages of (a), (b1) and (c) each (default 10). */
  isolated?: number;
  /** Messages of (b) (default 60). */
  burst?: number;
}): Promise<DbLoadResult> {
  const isolated = Math.max(1, Math.min(MAX_ISOLATED, Math.floor(opts.isolated ?? 10)));
  const burst = Math.max(1, Math.min(MAX_BURST, Math.floor(opts.burst ?? 60)));
  const problems: string[] = [];
  const bridge = await startBridge();
  const wranglerConfig = writeCountingConfig(opts.root);
  let server: LocalServer | undefined;
  try {
    server = await opts.start({
      persistTo: opts.persistTo,
      wranglerConfig,
      vars: { GATEWAY_TOKEN: TOKEN, BRIDGE_SECRET: SECRET },
      config: {
        session: { dmScope: "per-channel-peer", queue: { cap: QUEUE_CAP } },
        connectors: { bridge: { deliverUrl: bridge.url, secretEnv: "BRIDGE_SECRET" } },
      },
    });
    const url = server.url;
    opts.log(
      `db load: gateway (counting entry ${ENTRY}) on ${url} (pid ${server.pid}), bridge ${bridge.url}`,
    );

    const getJson = async <T>(p: string): Promise<T> => {
      const res = await fetch(`${url}${p}`, { signal: AbortSignal.timeout(10_000) });
      if (!res.ok) throw new Error(`${p} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
      return (await res.json()) as T;
    };
    const counts = () => getJson<Tally>("/__bench/db-counts");
    const d1State = () => getJson<D1State>("/__bench/d1-state");

    const stopAt = performance.now() + TOTAL_CAP_MS;
    let n = 0;
    const send = async (from: string, text: string): Promise<string> => {
      if (performance.now() > stopAt)
        throw new Error(`db load: over its ${TOTAL_CAP_MS / 60_000}-minute cap`);
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
      return { load: delta(before, s.tally), runs, settled: s.settled };
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
      for (let i = 0; i < count; i++) {
        const m = message(i);
        const r = await oneMessage(m.from, m.text, expectReply);
        windows.push(r.load);
        runs += r.runs;
        settled &&= r.settled;
      }
      workloads.push({ id, name, messages: count, runs, load: sum(windows), windows, settled });
    };

    await oneAtATime("a", "message to a new session", isolated, (i) => ({
      from: `new-${i}`,
      text: `hello ${i}`,
    }));

    opts.log(`db load: (b) creating the burst session, then ${burst} messages back to back`);
    await oneMessage("burst", "first message");
    {
      const before = await counts();
      const runs0 = state.runs;
      const ids: string[] = [];
      for (let i = 0; i < burst; i++) ids.push(await send("burst", `burst message ${i}`));
      if (!(await replies(ids, BURST_REPLY_CAP_MS)))
        problems.push(`db load: burst: ${ids.filter((x) => bridge.replies.has(x)).length}/${burst} replies`);
      const s = await settle(runs0 + burst);
      state = s.state;
      if (!s.settled) problems.push(`db load: burst did not settle within ${SETTLE_CAP_MS / 1000} s`);
      const load = delta(before, s.tally);
      workloads.push({
        id: "b",
        name: `message to an existing session, burst of ${burst}`,
        messages: burst,
        runs: s.state.runs - runs0,
        load,
        windows: [load],
        settled: s.settled,
      });
    }

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
    return { workloads, problems };
  } finally {
    await server?.stop();
    await bridge.close();
    rmSync(wranglerConfig, { force: true });
  }
}

const fixed = (v: number) => (Number.isFinite(v) ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : "n/a");

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
  return {
    d1Statements: per(w.load.d1Statements),
    d1RoundTrips: per(w.load.d1RoundTrips),
    d1RoundTripsPerRun: w.load.d1RoundTrips / w.runs,
    doStatements: per(w.load.doStatements),
    detail: [
      `${w.messages} messages, ${w.runs} runs`,
      `D1 round trips per message: Worker ${fixed(per(w.load.workerRoundTrips))}, actors ${fixed(per(w.load.actorRoundTrips))}`,
      `calls ${Object.entries(w.load.byCall)
        .map(([k, v]) => `${k} ${fixed(per(v))}`)
        .join(", ")}`,
      w.windows.length > 1
        ? `per message: D1 statements ${range((l) => l.d1Statements)}, round trips ${range((l) => l.d1RoundTrips)}, DO SQL ${range((l) => l.doStatements)}`
        : "",
      `DO SQL exec calls ${fixed(per(w.load.doExecs))}${w.load.doPlatform ? ` (and ${fixed(per(w.load.doPlatform))} statements of miniflare's own, left out)` : ""}; other DO storage calls ${
        Object.entries(w.load.storageCalls)
          .map(([k, v]) => `${k} ${fixed(per(v))}`)
          .join(", ") || "none"
      }`,
      w.settled ? "" : "NOT SETTLED within the cap",
    ]
      .filter(Boolean)
      .join("; "),
  };
}

/** The table of the standalone run (and the breakdown by SQL text, per message). */
export function dbLoadReport(result: DbLoadResult, breakdown: boolean): string[] {
  const out = [
    "| workload | D1 statements/msg | D1 round trips/msg | D1 round trips/run | DO SQL statements/msg | detail |",
    "|---|---|---|---|---|---|",
  ];
  for (const w of result.workloads) {
    const p = perMessage(w);
    out.push(
      `| (${w.id}) ${w.name} | ${fixed(p.d1Statements)} | ${fixed(p.d1RoundTrips)} | ${fixed(p.d1RoundTripsPerRun)} | ${fixed(p.doStatements)} | ${p.detail} |`,
    );
  }
  if (breakdown) {
    for (const w of result.workloads) {
      out.push("", `(${w.id}) ${w.name}: statements per message by SQL text`);
      const top = (m: Record<string, number>) =>
        Object.entries(m)
          .sort((a, b) => b[1] - a[1])
          .map(([sql, v]) => `    ${fixed(v / w.messages).padStart(6)}  ${sql}`);
      out.push("  D1 (origin, SQL):", ...top(w.load.d1Sql), "  Durable Object SQL:", ...top(w.load.doSql));
    }
  }
  if (result.problems.length) out.push("", "Problems seen:", ...result.problems.map((p) => `- ${p}`));
  return out;
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

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const repo = path.resolve(import.meta.dirname, "..");
  const [isolated, burst] = process.argv
    .slice(2)
    .filter((a) => !a.startsWith("--"))
    .map(Number);
  const root = snapshot(repo);
  const { scratchDir, startLocalServer } = (await import(
    pathToFileURL(path.join(root, "scripts/lib/local-server.ts")).href
  )) as typeof import("../scripts/lib/local-server.ts");
  const persistTo = scratchDir("switchboard-bench-db-load-");
  let failed = false;
  try {
    const result = await benchDbLoad({
      start: startLocalServer,
      root,
      persistTo,
      log: (m) => process.stderr.write(`[bench] ${m}\n`),
      ...(isolated ? { isolated } : {}),
      ...(burst ? { burst } : {}),
    });
    console.log(dbLoadReport(result, true).join("\n"));
  } catch (error) {
    failed = true;
    process.stderr.write(
      `[bench] db load failed: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
    );
  } finally {
    rmSync(persistTo, { recursive: true, force: true });
    // The snapshot links node_modules: unlink that first, so nothing can ever follow it.
    rmSync(path.join(root, "node_modules"), { force: true });
    rmSync(root, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}
