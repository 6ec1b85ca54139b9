/**
 * `storage rebalance` (SPEC §19): moves the rows whose database changes when `storage.d1`
 * changes, a bounded amount per call, resumably. The caller passes back the cursor each call
 * returns; starting again without it is as correct, only slower. Each call:
 *
 * - the first records the start (rebalance-plan.ts): the gateway refuses to serve until the end;
 * - walks the steps: per database of the earlier list that can lose sessions, its session keys in
 *   key order (each key whose database changes has its rows moved: messages, runs, deliveries,
 *   transcripts, its entry last), then the tables with no index on their key in rowid order;
 *   then, when the home database changes, the deployment's own rows. Rows move in batches that
 *   copy, check and only then delete (rebalance-tables.ts), so a kill anywhere loses and doubles
 *   nothing: the next pass redoes what was half done;
 * - once no step is left, verifies (rebalance-verify.ts), which records the new list.
 *
 * A database that stays in the list loses sessions only if a database was added: placement is
 * rendezvous hashing, so a key leaves its database only for a new one that outscores it.
 */
import { z } from "zod";
import {
  type DatabaseState,
  listText,
  planRebalance,
  type RebalancePlan,
  RebalanceRefusedError,
  recordStart,
  sameList,
} from "./rebalance-plan";
import {
  BY_KEY,
  type Conflict,
  copyRows,
  DELIVERIES,
  HOME_TABLES,
  homeKeyOf,
  MESSAGES,
  type MovedTable,
  type Part,
  RUNS,
  readColumns,
  SCANNED,
  SESSIONS,
  type SourceRow,
  TRANSCRIPTS,
} from "./rebalance-tables";
import { type VerifyReport, verifyPlacement } from "./rebalance-verify";

export const DEFAULT_LIMIT = 200;
export const MAX_LIMIT = 1000;
/** Rows of one table read per round of a session batch, and per page of a table scan. */
const PAGE = 500;
/** Rows read or moved per call past which it stops at the next boundary (one round always runs). */
const ROW_BUDGET = 20_000;

type Step =
  | { kind: "keys"; db: string }
  | { kind: "scan"; db: string; table: MovedTable }
  | { kind: "home"; db: string; table: MovedTable };

const CursorSchema = z.strictObject({
  v: z.literal(1),
  from: z.array(z.string()),
  to: z.array(z.string()),
  dryRun: z.boolean(),
  step: z.number().int().min(0),
  after: z.union([z.string(), z.number(), z.null()]),
});
type Cursor = z.output<typeof CursorSchema>;

function encodeCursor(cursor: Cursor): string {
  return btoa(JSON.stringify(cursor)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function decodeCursor(text: string): Cursor | undefined {
  try {
    const json = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
    const parsed = CursorSchema.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Whether keys placed in `name` under `from` can be placed elsewhere under `to`. */
function canLose(name: string, from: readonly string[], to: readonly string[]): boolean {
  return !to.includes(name) || to.some((n) => !from.includes(n));
}

function stepsOf(plan: RebalancePlan): Step[] {
  const steps: Step[] = [];
  for (const db of plan.from) {
    if (!canLose(db, plan.from, plan.to)) continue;
    steps.push({ kind: "keys", db });
    for (const table of SCANNED) steps.push({ kind: "scan", db, table });
  }
  const [oldHome] = plan.from as [string];
  if (oldHome !== plan.to[0])
    for (const table of HOME_TABLES) steps.push({ kind: "home", db: oldHome, table });
  return steps;
}

export interface DatabaseProgress {
  /** Session keys looked at by this call. */
  scanned: number;
  /** Sessions whose rows this call moved out (dry run: would move). */
  moved: number;
  /** Sessions not looked at yet. */
  left: number;
  /** Of those, about how many will move. */
  leftToMove: number;
}

export interface RebalanceConflict extends Conflict {
  database: string;
  target: string;
}

export interface RebalanceProgress {
  from: string[];
  to: string[];
  dryRun: boolean;
  /** Per database of the earlier list that can lose sessions. */
  databases: Record<string, DatabaseProgress>;
  /** Rows this call moved (dry run: would move), by table. */
  rows: Record<string, number>;
  /** Sessions left to look at over all databases, and about how many of them will move. */
  remaining: { sessions: number; toMove: number };
  /** Rows a target database refused (another row holds a unique value of theirs): left at their source. */
  conflicts: RebalanceConflict[];
  /** Nothing left to move (or, for a dry run, to look at). */
  done: boolean;
  /** To pass to the next call, while not done. */
  cursor?: string;
  /** Once done (not for a dry run): the verify step's report. */
  verify?: VerifyReport;
}

export interface RebalanceOptions {
  limit?: number;
  cursor?: string;
  dryRun?: boolean;
  now: number;
}

/** What one call does: its budget, its counts. */
class Pass {
  keysLeft: number;
  work = 0;
  readonly progress: Record<string, DatabaseProgress> = {};
  readonly rows: Record<string, number> = {};
  readonly conflicts: RebalanceConflict[] = [];

  constructor(
    readonly plan: RebalancePlan,
    readonly dryRun: boolean,
    limit: number,
  ) {
    this.keysLeft = limit;
  }

  get spent(): boolean {
    return this.keysLeft <= 0 || this.work >= ROW_BUDGET;
  }

  of(db: string): DatabaseProgress {
    this.progress[db] ??= { scanned: 0, moved: 0, left: 0, leftToMove: 0 };
    return this.progress[db];
  }

  state(name: string): DatabaseState {
    return this.plan.involved.find((s) => s.name === name) as DatabaseState;
  }

  target(key: string): string {
    return this.plan.to[this.plan.place(key)] as string;
  }

  count(rows: Record<string, number>, conflicts: Conflict[], database: string, target: string) {
    for (const [table, n] of Object.entries(rows)) {
      this.rows[table] = (this.rows[table] ?? 0) + n;
      this.work += n;
    }
    for (const c of conflicts) this.conflicts.push({ ...c, database, target });
  }
}

const KEY_SCAN = `SELECT k FROM (SELECT "key" AS k FROM sessions WHERE "key" > ?1 ORDER BY "key" LIMIT ?2)
  UNION SELECT k FROM (SELECT DISTINCT session_key AS k FROM transcripts WHERE session_key > ?1 ORDER BY 1 LIMIT ?2)
  UNION SELECT k FROM (SELECT DISTINCT session_key AS k FROM runs WHERE session_key > ?1 ORDER BY 1 LIMIT ?2)
  UNION SELECT k FROM (SELECT DISTINCT session_key AS k FROM deliveries WHERE session_key > ?1 ORDER BY 1 LIMIT ?2)
  ORDER BY k LIMIT ?2`;

const IN_KEYS = `IN (SELECT value FROM json_each(?1))`;

/** The reads of one round of a session batch, in BY_KEY order. */
function roundReads(db: D1Database, keys: string): D1PreparedStatement[] {
  return BY_KEY.map((t) => {
    const sql =
      t === MESSAGES
        ? `SELECT ${readColumns(t, "x", "t.session_key")} FROM messages AS x JOIN transcripts AS t ON t.session_id = x.session_id WHERE t.session_key ${IN_KEYS} LIMIT ?2`
        : `SELECT ${readColumns(t, "x", `x."${t.keyColumn}"`)} FROM "${t.name}" AS x WHERE x."${t.keyColumn}" ${IN_KEYS} LIMIT ?2`;
    return db.prepare(sql).bind(keys, PAGE);
  });
}

/**
 * Moves the rows of `keys` from `source` to `target` in rounds; false when the budget ran out
 * first (the next call finds what is left through the same keys).
 */
async function moveSessions(pass: Pass, source: DatabaseState, target: DatabaseState, keys: string[]) {
  const held = new Set<string>();
  for (let round = 0; ; round++) {
    if (round > 0 && pass.work >= ROW_BUDGET) return false;
    const live = keys.filter((k) => !held.has(k));
    const pages = (await source.db.batch(roundReads(source.db, JSON.stringify(live)))).map(
      (r) => r.results as SourceRow[],
    );
    pass.work += pages.reduce((n, p) => n + p.length, 0);
    const rowsOf = (t: MovedTable) => pages[BY_KEY.indexOf(t as (typeof BY_KEY)[number])] as SourceRow[];
    const full = (t: MovedTable) => rowsOf(t).length >= PAGE;
    const parts: Part[] = [MESSAGES, RUNS, DELIVERIES].map((table) => ({ table, rows: rowsOf(table) }));
    // A transcript leaves once its messages have; the entry once everything else has.
    if (!full(MESSAGES)) parts.push({ table: TRANSCRIPTS, rows: rowsOf(TRANSCRIPTS) });
    const rest = !full(MESSAGES) && !full(RUNS) && !full(DELIVERIES) && !full(TRANSCRIPTS);
    if (rest) parts.push({ table: SESSIONS, rows: rowsOf(SESSIONS) });
    const last = rest && !full(SESSIONS);
    const copied = await copyRows(source.db, target.db, parts);
    for (const c of copied.conflicts) held.add(c.key);
    pass.count(copied.rows, copied.conflicts, source.name, target.name);
    if (last) {
      pass.of(source.name).moved += keys.length - held.size;
      return true;
    }
  }
}

/** One batch of keys of `step.db` from `after`; the next cursor position, or null past the end. */
async function keysStep(pass: Pass, name: string, after: string): Promise<string | null | "again"> {
  const source = pass.state(name);
  const asked = pass.keysLeft;
  const { results } = await source.db.prepare(KEY_SCAN).bind(after, asked).all<{ k: string }>();
  const keys = results.map((r) => r.k);
  pass.keysLeft -= keys.length;
  pass.of(name).scanned += keys.length;
  const groups = new Map<string, string[]>();
  for (const key of keys) {
    const target = pass.target(key);
    if (target === name) continue;
    const group = groups.get(target);
    if (group) group.push(key);
    else groups.set(target, [key]);
  }
  if (pass.dryRun) {
    for (const group of groups.values()) pass.of(name).moved += group.length;
  } else {
    for (const [target, group] of groups) {
      if (!(await moveSessions(pass, source, pass.state(target), group))) return "again";
    }
  }
  return keys.length < asked ? null : (keys[keys.length - 1] as string);
}

/** One page of a scanned or home table from rowid `after`; the next cursor position, or null past the end. */
async function tableStep(
  pass: Pass,
  step: Step & { table: MovedTable },
  after: number,
): Promise<number | null> {
  const source = pass.state(step.db);
  const { table } = step;
  const key = step.kind === "home" ? homeKeyOf(table) : `x."${table.keyColumn}"`;
  const { results } = await source.db
    .prepare(
      `SELECT ${readColumns(table, "x", key)} FROM "${table.name}" AS x WHERE x.rowid > ?1 ORDER BY x.rowid LIMIT ?2`,
    )
    .bind(after, PAGE)
    .all<SourceRow>();
  pass.work += results.length;
  const groups = new Map<string, SourceRow[]>();
  for (const row of results) {
    const target = step.kind === "home" ? (pass.plan.to[0] as string) : pass.target(row.key_);
    if (target === step.db) continue;
    const group = groups.get(target);
    if (group) group.push(row);
    else groups.set(target, [row]);
  }
  for (const [target, rows] of groups) {
    if (pass.dryRun) pass.count({ [table.name]: rows.length }, [], step.db, target);
    else {
      const copied = await copyRows(source.db, pass.state(target).db, [{ table, rows }]);
      pass.count(copied.rows, copied.conflicts, step.db, target);
    }
  }
  const last = results[results.length - 1];
  return results.length < PAGE || !last ? null : last.rowid_;
}

/** Sessions left to look at per database, and about how many of them will move. */
async function remaining(pass: Pass, steps: Step[], at: number, after: Cursor["after"]) {
  const { from, to } = pass.plan;
  const added = to.filter((n) => !from.includes(n)).length;
  // Rendezvous hashing: a key of a database that stays leaves for one of the `added` new ones
  // with probability added / (earlier + added); a key of a dropped database always leaves.
  const share = (name: string) => (to.includes(name) ? added / (from.length + added) : 1);
  await Promise.all(
    steps.map(async (step, i) => {
      if (step.kind !== "keys" || i < at) return;
      const start = i === at && typeof after === "string" ? after : "";
      const row = await pass
        .state(step.db)
        .db.prepare(`SELECT count(*) AS n FROM sessions WHERE "key" > ?1`)
        .bind(start)
        .first<{ n: number }>();
      const progress = pass.of(step.db);
      progress.left = row?.n ?? 0;
      progress.leftToMove = Math.round(progress.left * share(step.db));
    }),
  );
}

/** One call of `storage.rebalance`. */
export async function rebalance(env: Env, opts: RebalanceOptions): Promise<RebalanceProgress> {
  const plan = await planRebalance(env);
  const dryRun = opts.dryRun ?? false;
  let cursor: Cursor = { v: 1, from: plan.from, to: plan.to, dryRun, step: 0, after: null };
  if (opts.cursor !== undefined) {
    const given = decodeCursor(opts.cursor);
    if (!given)
      throw new RebalanceRefusedError("`cursor` is not a cursor returned by storage.rebalance", "input");
    if (!sameList(given.from, plan.from) || !sameList(given.to, plan.to) || given.dryRun !== dryRun) {
      throw new RebalanceRefusedError(
        `\`cursor\` is for a ${given.dryRun ? "dry run" : "rebalance"} from ${listText(given.from)} to ${listText(given.to)}, ` +
          `not this ${dryRun ? "dry run" : "rebalance"} from ${listText(plan.from)} to ${listText(plan.to)}: start again without it`,
        "input",
      );
    }
    cursor = given;
  }
  const steps = stepsOf(plan);
  if (!dryRun && !plan.started && steps.length > 0) plan.counts = await recordStart(plan, opts.now);
  const pass = new Pass(plan, dryRun, opts.limit ?? DEFAULT_LIMIT);
  for (const step of steps) if (step.kind === "keys") pass.of(step.db);
  let { step: at, after } = cursor;
  while (at < steps.length && !pass.spent) {
    const step = steps[at] as Step;
    const next =
      step.kind === "keys"
        ? await keysStep(pass, step.db, typeof after === "string" ? after : "")
        : await tableStep(pass, step, typeof after === "number" ? after : 0);
    if (next === "again") break;
    if (next === null) {
      at++;
      after = null;
    } else after = next;
  }
  await remaining(pass, steps, at, after);
  const done = at >= steps.length;
  const left = Object.values(pass.progress);
  const progress: RebalanceProgress = {
    from: plan.from,
    to: plan.to,
    dryRun,
    databases: pass.progress,
    rows: pass.rows,
    remaining: {
      sessions: left.reduce((n, p) => n + p.left, 0),
      toMove: left.reduce((n, p) => n + p.leftToMove, 0),
    },
    conflicts: pass.conflicts.slice(0, 50),
    done,
  };
  if (!done) progress.cursor = encodeCursor({ ...cursor, step: at, after });
  else if (!dryRun) progress.verify = await verifyPlacement(env, opts.now, plan);
  return progress;
}
