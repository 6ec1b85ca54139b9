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
  // Where a session's queued runs share batches (a revision whose journal held a backlog's
  // records), a burst's count (b) depends on timing; the ceiling takes the larger of it and the
  // one-at-a-time count (b1): a bound that holds however the load arrives.
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
    `| D1 databases | D1 statements/s | msg/s, existing sessions (max of b1 and a burst's b) | new sessions/s (a) | tool-call turns/s (c) | stored sessions (D1 size) | ${a.retentionDays ? `msg/s whose ${fmt(a.retentionDays.value)} days fit (D1 size)` : "full after, at (b1)"} | binds first |`,
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

// ---------------------------------------------------------------------------------------------
// Cost: what a message costs at Cloudflare's published prices (docs/capacity.md, "Cost")
//
//   $/M messages = Σ_u  units_u per message × price_u × 10^6
//
// Marginal prices on Workers Paid, the included monthly allowances left out (what they cover is
// printed beside them); storage shown apart (it is paid per month kept, not per message).

/** The pricing pages, as read on PRICES_READ from the stored copy of Cloudflare's docs. */
export const PRICE_PAGES = {
  workers: "https://developers.cloudflare.com/workers/platform/pricing/",
  durableObjects: "https://developers.cloudflare.com/durable-objects/platform/pricing/",
  d1: "https://developers.cloudflare.com/d1/platform/pricing/",
  doLifecycle: "https://developers.cloudflare.com/durable-objects/concepts/durable-object-lifecycle/",
} as const;
export const PRICES_READ = "2026-11-28";

/** R2 (Standard storage), for the files people send (SPEC §22): developers.cloudflare.com/r2/pricing/. */
export const R2_PRICES = {
  page: "https://developers.cloudflare.com/r2/pricing/",
  classA: { usdPerMillion: 4.5, text: "$4.50 / million", includedPerMonth: 1e6 },
  classB: { usdPerMillion: 0.36, text: "$0.36 / million", includedPerMonth: 10e6 },
  storage: { usdPerGbMonth: 0.015, text: "$0.015 / GB-month", includedGb: 10 },
} as const;

/**
 * R2 operations per file, as test/integration/media.test.ts counts them on the binding: the run
 * that carries it puts it once, and reads it once if its model is given it (an image to a model
 * that sees, a text file of 100 KB or less); deleting it with its transcript is a list (Class A,
 * per 1,000 files of a transcript) and a delete (free). No D1 row and no Durable Object row is
 * added: the file's part is in its message's row and in its run's checkpoint.
 */
export const R2_OPS_PER_FILE = {
  given: { classA: 1, classB: 1 },
  named: { classA: 1, classB: 0 },
} as const;

/** The billed units of a message, in the order the cost table lists them. */
export const UNITS = [
  "workerRequests",
  "workerCpuMs",
  "doRequests",
  "doGbSeconds",
  "doRowsWritten",
  "doRowsRead",
  "d1RowsWritten",
  "d1RowsRead",
] as const;
export type Unit = (typeof UNITS)[number];
export type Units = Record<Unit, number>;

export interface Price {
  label: string;
  /** US dollars per unit, past the included allowance. */
  usd: number;
  /** The price as the page states it. */
  text: string;
  /** Units included per month on Workers Paid. */
  includedPerMonth: number;
  page: string;
}

export function prices(): Record<Unit, Price> {
  const perMillion = (usd: number) => usd / 1e6;
  return {
    workerRequests: {
      label: "Workers requests",
      usd: perMillion(0.3),
      text: "$0.30 / million",
      includedPerMonth: 10e6,
      page: PRICE_PAGES.workers,
    },
    workerCpuMs: {
      label: "Workers CPU ms",
      usd: perMillion(0.02),
      text: "$0.02 / million CPU ms",
      includedPerMonth: 30e6,
      page: PRICE_PAGES.workers,
    },
    doRequests: {
      label: "Durable Objects requests",
      usd: perMillion(0.15),
      text: "$0.15 / million",
      includedPerMonth: 1e6,
      page: PRICE_PAGES.durableObjects,
    },
    doGbSeconds: {
      label: "Durable Objects duration (GB-s)",
      usd: perMillion(12.5),
      text: "$12.50 / million GB-s",
      includedPerMonth: 400_000,
      page: PRICE_PAGES.durableObjects,
    },
    doRowsWritten: {
      label: "Durable Objects rows written",
      usd: perMillion(1),
      text: "$1.00 / million rows",
      includedPerMonth: 50e6,
      page: PRICE_PAGES.durableObjects,
    },
    doRowsRead: {
      label: "Durable Objects rows read",
      usd: perMillion(0.001),
      text: "$0.001 / million rows",
      includedPerMonth: 25e9,
      page: PRICE_PAGES.durableObjects,
    },
    d1RowsWritten: {
      label: "D1 rows written",
      usd: perMillion(1),
      text: "$1.00 / million rows",
      includedPerMonth: 50e6,
      page: PRICE_PAGES.d1,
    },
    d1RowsRead: {
      label: "D1 rows read",
      usd: perMillion(0.001),
      text: "$0.001 / million rows",
      includedPerMonth: 25e9,
      page: PRICE_PAGES.d1,
    },
  };
}

/** Storage, paid per GB-month kept (shown apart from the per-message cost). */
export const STORAGE_PRICES = {
  d1: { usdPerGbMonth: 0.75, includedGb: 5, text: "$0.75 / GB-month (5 GB included)", page: PRICE_PAGES.d1 },
  doSql: {
    usdPerGbMonth: 0.2,
    includedGb: 5,
    text: "$0.20 / GB-month (5 GB-month included)",
    page: PRICE_PAGES.durableObjects,
  },
} as const;

/** The memory a Durable Object's duration is billed for: "128 MB … regardless of actual usage". */
export const DO_BILLED_GB = 0.128;

export interface CostLine {
  unit: Unit;
  perMessage: number;
  /** US dollars per million messages. */
  usdPerMillion: number;
  /** Share of the message's total. */
  share: number;
  /** Messages a month the included allowance of this unit covers. */
  coveredPerMonth: number;
}

export interface Cost {
  lines: CostLine[];
  usdPerMillion: number;
}

export function costOf(units: Units, p = prices()): Cost {
  const raw = UNITS.map((unit) => ({
    unit,
    perMessage: units[unit],
    usdPerMillion: units[unit] * p[unit].usd * 1e6,
  }));
  const total = raw.reduce((a, l) => a + l.usdPerMillion, 0);
  return {
    usdPerMillion: total,
    lines: raw.map((l) => ({
      ...l,
      share: total > 0 ? l.usdPerMillion / total : Number.NaN,
      coveredPerMonth:
        l.perMessage > 0 ? p[l.unit].includedPerMonth / l.perMessage : Number.POSITIVE_INFINITY,
    })),
  };
}

/** One workload whose cost the report prints (its units per message measured). */
export interface CostedWorkload {
  label: string;
  units: Units;
  /** How long its model took to answer each call (ms). */
  modelMs: number;
  /** Model calls per message (a tool-call turn makes two). */
  modelCalls: number;
  /** Of `units.d1RowsWritten`, the rows the transcript search index writes (undefined when not measured). */
  searchIndexRows?: number | undefined;
  /**
   * The usage rollup (`usage_daily`) per message: of `units.d1RowsWritten`, the rows it writes,
   * and the D1 round trips of its own it adds (undefined when not measured).
   */
  usageRollup?: { rowsWritten: number; roundTrips: number } | undefined;
}

/** SPEC §21: usage recording adds no D1 round trip and at most this many rows written per message. */
export const USAGE_ROLLUP_MAX_ROWS = 2;

/**
 * The check of SPEC §21's bar on the measured workloads: every one's rollup adds no round trip
 * of its own and at most USAGE_ROLLUP_MAX_ROWS D1 rows written per message (undefined when none
 * was measured).
 */
export function usageRollupCheck(workloads: CostedWorkload[]): { pass: boolean; line: string } | undefined {
  const measured = workloads.flatMap((w) => (w.usageRollup ? [{ label: w.label, ...w.usageRollup }] : []));
  if (!measured.length) return undefined;
  const pass = measured.every((w) => w.roundTrips === 0 && w.rowsWritten <= USAGE_ROLLUP_MAX_ROWS);
  return {
    pass,
    line: `usage recording (SPEC §21): no D1 round trip of its own and ≤ ${USAGE_ROLLUP_MAX_ROWS} D1 rows written per message: ${measured
      .map(
        (w) =>
          `${w.label} ${fmt(w.rowsWritten)} row${w.rowsWritten === 1 ? "" : "s"}, ${fmt(w.roundTrips)} round trip${w.roundTrips === 1 ? "" : "s"}`,
      )
      .join("; ")}`,
  };
}

/** Dollars: whole from $100, cents from 10 cents, two significant digits below. */
export function usd(v: number): string {
  if (!Number.isFinite(v)) return "n/a";
  if (v >= 100) return `$${Math.round(v).toLocaleString("en-US")}`;
  if (v >= 0.1) return `$${v.toFixed(2)}`;
  return `$${Number(v.toPrecision(2))}`;
}

/**
 * The cost report: each unit's price, units and dollars per million messages and share, per
 * workload; what the included allowances cover; the Durable Object duration of waiting on the
 * model inside the object, and what the same call costs from a Worker invocation.
 */
export function costReport(
  workloads: CostedWorkload[],
  source: string,
  storage?: { d1BytesPerMessage: number; from: string },
): string[] {
  const p = prices();
  const costs = workloads.map((w) => costOf(w.units, p));
  const out = [
    `Cost per million messages at Cloudflare's published prices (Workers Paid, read ${PRICES_READ}; included allowances left out): ${source}`,
    "",
    `| unit | price | ${workloads.map((w) => `${w.label}: per message → $ per million messages (share)`).join(" | ")} |`,
    `|---|---|${workloads.map(() => "---").join("|")}|`,
  ];
  for (const [i, unit] of UNITS.entries()) {
    const cells = costs.map((c) => {
      const l = c.lines[i] as CostLine;
      return `${fmt(l.perMessage)} → ${usd(l.usdPerMillion)} (${(100 * l.share).toFixed(1)}%)`;
    });
    out.push(`| ${p[unit].label} | ${p[unit].text} | ${cells.join(" | ")} |`);
  }
  out.push(`| **total** | | ${costs.map((c) => `**${usd(c.usdPerMillion)}**`).join(" | ")} |`);
  if (workloads.some((w) => w.searchIndexRows !== undefined)) {
    out.push(
      `| of the D1 rows written: the transcript search index (one row per user or assistant message indexed) | ${p.d1RowsWritten.text} | ${workloads
        .map((w) =>
          w.searchIndexRows === undefined
            ? "not measured"
            : `${fmt(w.searchIndexRows)} → ${usd(w.searchIndexRows * p.d1RowsWritten.usd * 1e6)}`,
        )
        .join(" | ")} |`,
    );
  }
  if (workloads.some((w) => w.usageRollup !== undefined)) {
    out.push(
      `| of the D1 rows written: the usage rollup (\`usage_daily\` and \`usage_agents\`: one upsert each per run, in its finalize's batch; round trips of its own) | ${p.d1RowsWritten.text} | ${workloads
        .map((w) =>
          w.usageRollup === undefined
            ? "not measured"
            : `${fmt(w.usageRollup.rowsWritten)} → ${usd(w.usageRollup.rowsWritten * p.d1RowsWritten.usd * 1e6)} (${fmt(w.usageRollup.roundTrips)} round trips)`,
        )
        .join(" | ")} |`,
    );
  }
  const fileUsd = (ops: { classA: number; classB: number }) =>
    ops.classA * R2_PRICES.classA.usdPerMillion + ops.classB * R2_PRICES.classB.usdPerMillion;
  out.push(
    `| files people send (SPEC §22), per file, apart from the message's own cost: R2 ${R2_PRICES.classA.text} Class A, ${R2_PRICES.classB.text} Class B (${R2_PRICES.page}); no D1 or Durable Object row added | | an image given to a model that sees, or a text file given inline: ${R2_OPS_PER_FILE.given.classA} put + ${R2_OPS_PER_FILE.given.classB} get → ${usd(fileUsd(R2_OPS_PER_FILE.given))} per million files; any other file: ${R2_OPS_PER_FILE.named.classA} put → ${usd(fileUsd(R2_OPS_PER_FILE.named))}; kept: ${R2_PRICES.storage.text} (a million 1 MB photos kept a month: ${usd(1e6 * 1e-3 * R2_PRICES.storage.usdPerGbMonth)}) |${workloads.length > 1 ? " |".repeat(workloads.length - 1) : ""}`,
  );
  out.push(
    `| messages a month the included allowances cover (the unit that runs out first) | | ${costs
      .map((c) => {
        const first = [...c.lines].sort((x, y) => x.coveredPerMonth - y.coveredPerMonth)[0];
        return first ? `${fmt(first.coveredPerMonth)} (${p[first.unit].label})` : "n/a";
      })
      .join(" | ")} |`,
    "",
    `Included each month on Workers Paid ($5 a month minimum): ${UNITS.map((u) => `${p[u].label} ${fmt(p[u].includedPerMonth)}`).join("; ")}. The table leaves them out: past the messages they cover, every message pays the prices above.`,
  );
  if (storage) {
    const gb = (storage.d1BytesPerMessage * 1e6) / 1e9;
    out.push(
      "",
      `Storage, apart (paid per month kept, not per message): D1 keeps ${bytes(storage.d1BytesPerMessage)} per message (${storage.from}), so a million messages kept cost ${usd(gb * STORAGE_PRICES.d1.usdPerGbMonth)} a month at ${STORAGE_PRICES.d1.text} (${PRICE_PAGES.d1}), for as long as they are kept; Durable Object SQL storage (${STORAGE_PRICES.doSql.text}) is not measured.`,
    );
  }
  const wait = workloads.find((w) => w.modelMs > 0);
  if (wait) {
    const waitGbS = (wait.modelMs / 1000) * DO_BILLED_GB;
    const waitUsd = waitGbS * p.doGbSeconds.usd * 1e6;
    const handover = (p.doRequests.usd + p.workerRequests.usd) * 1e6;
    out.push(
      "",
      `Waiting on the model inside the Durable Object: a model call of ${fmt(wait.modelMs / 1000)} s keeps the object active (an awaited fetch() blocks hibernation: ${PRICE_PAGES.doLifecycle}), ${fmt(wait.modelMs / 1000)} s × ${DO_BILLED_GB} GB = ${fmt(waitGbS)} GB-s, ${usd(waitUsd)} per million model calls (${fmt(waitGbS / (wait.modelMs / 1000))} GB-s and ${usd(waitUsd / (wait.modelMs / 1000))} per million for each second the model takes).`,
      `The same call from a Worker invocation is billed for CPU only (${PRICE_PAGES.workers}: "No charge or limit for duration"): the wait costs nothing; the call's own CPU (a few ms of request and response handling) about ${usd(2 * p.workerCpuMs.usd * 1e6)} per million calls at 2 ms; handing the turn over and its result back costs at least one more Durable Object request (${usd(p.doRequests.usd * 1e6)} per million) and, if that invocation is a request of its own rather than the inbound one or a service binding call, one more Workers request (${usd(p.workerRequests.usd * 1e6)} per million): ${usd(handover)} per million calls with both.`,
      ...workloads.flatMap((w, i) => {
        const c = costs[i] as Cost;
        if (w.modelMs <= 0) return [];
        const d = (w.modelMs / 1000) * DO_BILLED_GB * w.modelCalls * p.doGbSeconds.usd * 1e6;
        return [
          `- ${w.label}: ${w.modelCalls} model call${w.modelCalls === 1 ? "" : "s"} of ${fmt(w.modelMs / 1000)} s per message: ${usd(d)} of its ${usd(c.usdPerMillion)} per million messages is the object waiting on the model (${c.usdPerMillion > 0 ? ((100 * d) / c.usdPerMillion).toFixed(1) : "n/a"}%); its measured duration ${fmt(w.units.doGbSeconds)} GB-s per message is ${usd(w.units.doGbSeconds * p.doGbSeconds.usd * 1e6)} per million.`,
        ];
      }),
    );
  }
  return out;
}
