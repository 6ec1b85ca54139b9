/**
 * The capacity model of `npm run capacity` (docs/capacity.md): from the measured storage load of
 * a message and of a read (bench/results/db-load.json, written by bench/db-load.ts) and
 * Cloudflare's published limits, the ceilings of a deployment whose sessions are spread over N
 * D1 databases, and what binds first. Pure: no I/O; every input carries its source.
 *
 *   S        = 1000 / t                   statements per second one database runs (t: ms per statement)
 *   M_w(N)   = N · S / s_w                messages per second, workload w (s_w: D1 statements per message)
 *   B        = B_new + (T − 1) · B_turn   bytes a session stores in D1 (T turns)
 *   C(N)     = min(N · D, A) / B          stored sessions (D: bytes per database, A: per account)
 *   F(N)     = min(N · D, A) / (M_b(N) · B_turn)   seconds until full at the sustained ceiling
 *   K(N)     = min(N · D, A) / (B_turn · R)        messages per second the databases hold for good
 *                                         when retention keeps R seconds of them (session.retention.days)
 *   L        = S / k_list                 listings per second (each reads every database: not × N)
 *   G(N)     = N · S / k_get              runs.get per second (one database each)
 *   P        = min(R / r, 1000 / c)       messages per second one session takes (R: requests per
 *                                         second an object takes, r per message; c: CPU ms per message)
 */

export type Source = "measured" | "published" | "assumed";

export interface Input {
  label: string;
  value: number;
  unit: string;
  source: Source;
  /** Where it comes from: the file and run, the page, or why it is assumed. */
  from: string;
}

/** Cloudflare's published figures for Workers Paid (checked against the pages named, 2026). */
export const PAGES = {
  d1Limits: "https://developers.cloudflare.com/d1/platform/limits/",
  doLimits: "https://developers.cloudflare.com/durable-objects/platform/limits/",
  workersLimits: "https://developers.cloudflare.com/workers/platform/limits/",
} as const;

export interface Published {
  /** ms per statement: "If your average query takes 1 ms, you can run approximately 1,000 queries per second." */
  d1StatementMs: Input;
  d1DatabaseBytes: Input;
  d1AccountBytes: Input;
  d1DatabasesPerAccount: Input;
  d1QueriesPerInvocation: Input;
  d1ConnectionsPerInvocation: Input;
  doRequestsPerSecond: Input;
  workerCpuMsPerInvocation: Input;
}

export function published(): Published {
  const p = (label: string, value: number, unit: string, from: string): Input => ({
    label,
    value,
    unit,
    source: "published",
    from,
  });
  return {
    d1StatementMs: p(
      "D1 time per statement (one database runs one at a time)",
      1,
      "ms",
      `${PAGES.d1Limits} ("inherently single-threaded, and processes queries one at a time"; "If your average query takes 1 ms, you can run approximately 1,000 queries per second")`,
    ),
    d1DatabaseBytes: p(
      "D1 maximum database size",
      10e9,
      "bytes",
      `${PAGES.d1Limits} (10 GB on Workers Paid; cannot be increased)`,
    ),
    d1AccountBytes: p(
      "D1 maximum storage per account",
      1e12,
      "bytes",
      `${PAGES.d1Limits} (1 TB on Workers Paid; raised on request)`,
    ),
    d1DatabasesPerAccount: p(
      "D1 databases per account",
      50_000,
      "databases",
      `${PAGES.d1Limits} (Workers Paid)`,
    ),
    d1QueriesPerInvocation: p(
      "D1 queries per Worker invocation",
      1_000,
      "queries",
      `${PAGES.d1Limits} (Workers Paid)`,
    ),
    d1ConnectionsPerInvocation: p(
      "D1 connections open at once per Worker invocation",
      6,
      "connections",
      `${PAGES.d1Limits} (FAQ)`,
    ),
    doRequestsPerSecond: p(
      "Requests per second one Durable Object takes (soft limit)",
      1_000,
      "req/s",
      `${PAGES.doLimits} ("An individual Object has a soft limit of 1,000 requests per second")`,
    ),
    workerCpuMsPerInvocation: p(
      "Worker CPU time per invocation",
      30_000,
      "ms",
      `${PAGES.workersLimits} (Workers Paid: 30 s by default, up to 5 min with limits.cpu_ms)`,
    ),
  };
}

/** The measured inputs the model takes (from bench/results/db-load.json). */
export interface Measured {
  /** D1 statements per message: sustained burst to an existing session (b), new session (a), one tool call (c). */
  statementsBurst: Input;
  statementsNew: Input;
  statementsTool: Input;
  /** One at a time to an existing session (b1): shown beside the burst, checked by the simulation. */
  statementsExisting: Input;
  /** D1 statements a read makes on each database it reads. */
  listPerDatabase: Input;
  runsListPerDatabase: Input;
  runsGet: Input;
  doRequestsPerMessage: Input;
  /** workerd CPU per message under `wrangler dev` (Worker, actor, local D1 and DO SQLite together). */
  cpuMsPerMessage: Input;
  bytesNewSession: Input;
  bytesPerTurn: Input;
  /** The local D1's busy time per statement (for comparison with the published cost). */
  localStatementMs: Input;
}

export interface Assumed {
  turnsPerSession: Input;
  /** `session.retention.days`, when the deployment sets it (the product's default keeps everything). */
  retentionDays?: Input;
}

export interface ModelInputs {
  published: Published;
  measured: Measured;
  assumed: Assumed;
  /** The cost per statement the ceilings use: the published one unless told otherwise. */
  statementMs: Input;
}

export interface Row {
  databases: number;
  /** Statements per second over every database. */
  statementsPerSecond: number;
  burst: number;
  newSessions: number;
  toolTurns: number;
  sessions: number;
  /** Days until the databases are full at the sustained (burst) ceiling. */
  fillDays: number;
  /** With retention: the sustained rate whose kept rows fit in the databases (msg/s). */
  sizeRate?: number;
  listings: number;
  runsLists: number;
  runsGets: number;
  /** D1 queries one listing makes in its invocation, and whether that is within the limit. */
  listingQueries: number;
  listingWithinLimit: boolean;
  /** Waves of parallel reads one listing takes at the connection limit. */
  listingWaves: number;
  /** Whether an account may have that many D1 databases. */
  allowed: boolean;
  bindsFirst: string;
}

export interface PerSession {
  byRequests: number;
  byCpu: number;
  ceiling: number;
  cpuWithinLimit: boolean;
}

export const DATABASES = [1, 4, 16, 64] as const;

export function bytesPerSession(m: Measured, a: Assumed): number {
  return m.bytesNewSession.value + (a.turnsPerSession.value - 1) * m.bytesPerTurn.value;
}

export function perSession(i: ModelInputs): PerSession {
  const byRequests = i.published.doRequestsPerSecond.value / i.measured.doRequestsPerMessage.value;
  const byCpu = 1000 / i.measured.cpuMsPerMessage.value;
  return {
    byRequests,
    byCpu,
    ceiling: Math.min(byRequests, byCpu),
    cpuWithinLimit: i.measured.cpuMsPerMessage.value <= i.published.workerCpuMsPerInvocation.value,
  };
}

export function row(i: ModelInputs, databases: number): Row {
  const { measured: m, published: p } = i;
  const perDatabase = 1000 / i.statementMs.value;
  const total = databases * perDatabase;
  // A session's runs share batches only while they queue (its backlog), so the burst's count
  // (b) depends on timing; the ceiling takes the one-at-a-time count (b1), which no message
  // exceeds: a bound that holds however the load arrives.
  const burst = total / Math.max(m.statementsBurst.value, m.statementsExisting.value);
  const space = Math.min(databases * p.d1DatabaseBytes.value, p.d1AccountBytes.value);
  const sessions = space / bytesPerSession(m, i.assumed);
  const fillDays = space / (burst * m.bytesPerTurn.value) / 86_400;
  const retention = i.assumed.retentionDays?.value;
  const sizeRate = retention ? space / (m.bytesPerTurn.value * retention * 86_400) : undefined;
  const listingQueries = databases * m.listPerDatabase.value;
  const listingWithinLimit = listingQueries <= p.d1QueriesPerInvocation.value;
  const allowed = databases <= p.d1DatabasesPerAccount.value;
  const s = perSession(i);
  let bindsFirst: string;
  if (!allowed) bindsFirst = `the account (at most ${p.d1DatabasesPerAccount.value} D1 databases)`;
  else if (!s.cpuWithinLimit)
    bindsFirst = `Worker CPU per invocation (a message's ${fmt(m.cpuMsPerMessage.value)} ms against ${fmt(p.workerCpuMsPerInvocation.value)} ms)`;
  else if (sizeRate !== undefined && sizeRate < burst)
    bindsFirst = `D1 size (${fmt(sizeRate)} msg/s keep ${fmt(retention ?? 0)} days of turns in ${bytes(space)}), before D1 queries (${fmt(burst)} msg/s)`;
  else if (sizeRate !== undefined)
    bindsFirst = `D1 queries (${fmt(burst)} msg/s); ${fmt(retention ?? 0)} days of turns at that rate fit in ${bytes(space)}`;
  else
    bindsFirst = `D1 queries (${fmt(burst)} msg/s); then D1 size: full after ${duration(fillDays)} at that rate${
      space < databases * p.d1DatabaseBytes.value ? " (the account's storage, not the databases')" : ""
    }`;
  return {
    databases,
    statementsPerSecond: total,
    burst,
    newSessions: total / m.statementsNew.value,
    toolTurns: total / m.statementsTool.value,
    sessions,
    fillDays,
    ...(sizeRate !== undefined ? { sizeRate } : {}),
    listings: perDatabase / m.listPerDatabase.value,
    runsLists: perDatabase / m.runsListPerDatabase.value,
    runsGets: total / m.runsGet.value,
    listingQueries,
    listingWithinLimit,
    listingWaves: Math.ceil(databases / p.d1ConnectionsPerInvocation.value),
    allowed,
    bindsFirst,
  };
}

/** A number for a table: thousands separated, 3 significant digits below 100, ∞ for infinity. */
export function fmt(v: number): string {
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "n/a" : "∞";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  return Number(v.toPrecision(3)).toLocaleString("en-US", { maximumFractionDigits: 3 });
}

/** A span of days, in hours below two days and in minutes below one hour. */
export function duration(days: number): string {
  if (days < 1 / 24) return `${fmt(days * 24 * 60)} minutes`;
  return days < 2 ? `${fmt(days * 24)} hours` : `${fmt(days)} days`;
}

/** Bytes in decimal units (as Cloudflare states its limits). */
export function bytes(v: number): string {
  const units = ["bytes", "kB", "MB", "GB", "TB"];
  let u = 0;
  while (Math.abs(v) >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return `${fmt(v)} ${units[u]}`;
}

/** Units that are counts of things (singular for one). */
const COUNTED = new Set(["statements", "requests", "turns", "days", "databases", "queries", "connections"]);

function inputValue(x: Input): string {
  if (x.unit === "bytes") return bytes(x.value);
  // "1 statement", "6.4 statements"
  const unit = x.value === 1 && COUNTED.has(x.unit) ? x.unit.slice(0, -1) : x.unit;
  return `${fmt(x.value)} ${unit}`;
}

/** The report: inputs with their sources, the ceilings for 1, 4, 16 and 64 databases, reads, per session. */
export function report(i: ModelInputs): string[] {
  const { measured: m, published: p, assumed: a } = i;
  const inputs: Input[] = [
    m.statementsBurst,
    m.statementsExisting,
    m.statementsNew,
    m.statementsTool,
    m.listPerDatabase,
    m.runsListPerDatabase,
    m.runsGet,
    m.doRequestsPerMessage,
    m.cpuMsPerMessage,
    m.bytesNewSession,
    m.bytesPerTurn,
    m.localStatementMs,
    a.turnsPerSession,
    ...(a.retentionDays ? [a.retentionDays] : []),
    i.statementMs,
    p.d1DatabaseBytes,
    p.d1AccountBytes,
    p.d1DatabasesPerAccount,
    p.d1QueriesPerInvocation,
    p.d1ConnectionsPerInvocation,
    p.doRequestsPerSecond,
    p.workerCpuMsPerInvocation,
  ];
  const out = [
    `Capacity model (docs/capacity.md): Workers Paid, ${fmt(i.statementMs.value)} ms per D1 statement (${i.statementMs.source})`,
    "",
    "| input | value | source |",
    "|---|---|---|",
    ...inputs.map((x) => `| ${x.label} | ${inputValue(x)} | ${x.source}: ${x.from} |`),
    "",
    `A session of ${fmt(a.turnsPerSession.value)} turns stores ${bytes(bytesPerSession(m, a))} in D1 (B = B_new + (T − 1) · B_turn).`,
    "",
    `| D1 databases | D1 statements/s | msg/s, existing sessions (b1; a backlog's burst (b) costs less) | new sessions/s (a) | tool-call turns/s (c) | stored sessions (D1 size) | ${a.retentionDays ? `msg/s whose ${fmt(a.retentionDays.value)} days fit (D1 size)` : "full after, at (b1)"} | binds first |`,
    "|---|---|---|---|---|---|---|---|",
  ];
  const rows = DATABASES.map((n) => row(i, n));
  for (const r of rows) {
    if (!r.allowed) {
      out.push(`| ${r.databases} | — | — | — | — | — | — | ${r.bindsFirst} |`);
      continue;
    }
    out.push(
      `| ${r.databases} | ${fmt(r.statementsPerSecond)} | ${fmt(r.burst)} | ${fmt(r.newSessions)} | ${fmt(r.toolTurns)} | ${fmt(r.sessions)} | ${r.sizeRate !== undefined ? fmt(r.sizeRate) : duration(r.fillDays)} | ${r.bindsFirst} |`,
    );
  }
  out.push(
    "",
    "Reads alone (each listing reads every database, so its ceiling does not grow with them):",
    "",
    `| D1 databases | sessions.list/s | runs.list/s | runs.get/s | D1 queries per listing (limit ${fmt(p.d1QueriesPerInvocation.value)} per invocation) | waves of ${p.d1ConnectionsPerInvocation.value} parallel reads per listing |`,
    "|---|---|---|---|---|---|",
  );
  for (const r of rows) {
    if (!r.allowed) continue;
    out.push(
      `| ${r.databases} | ${fmt(r.listings)} | ${fmt(r.runsLists)} | ${fmt(r.runsGets)} | ${fmt(r.listingQueries)}${r.listingWithinLimit ? "" : " (over the limit)"} | ${r.listingWaves} |`,
    );
  }
  const s = perSession(i);
  out.push(
    "",
    `One session (one Durable Object, one database): at most ${fmt(s.ceiling)} msg/s — ${fmt(s.byRequests)} by requests (${fmt(p.doRequestsPerSecond.value)} req/s ÷ ${fmt(m.doRequestsPerMessage.value)} per message), ${fmt(s.byCpu)} by CPU (1000 ms ÷ ${fmt(m.cpuMsPerMessage.value)} ms per message, an upper bound: the local figure includes the D1 and Durable Object simulators). A turn waits for its model: a real model's latency holds one session far below either.`,
    `Worker CPU: ${fmt(m.cpuMsPerMessage.value)} ms per message (all its invocations together) against ${fmt(p.workerCpuMsPerInvocation.value)} ms per invocation: ${s.cpuWithinLimit ? "within the limit; Workers scale out, so CPU sets no deployment-wide ceiling" : "OVER the limit"}.`,
  );
  if (i.statementMs.source !== "measured") {
    const local = { ...i, statementMs: m.localStatementMs };
    const one = row(local, 1);
    out.push(
      `At the local cost (${fmt(m.localStatementMs.value)} ms per statement under wrangler dev) one database would take ${fmt(one.burst)} msg/s (b): local SQLite on tmpfs, no network or replication; for comparison only.`,
    );
  }
  return out;
}
