/**
 * The verify step of `storage rebalance` (SPEC §19): every row of a session sits in the
 * database its key places it in under `storage.d1` (a message with its transcript), so no
 * session has rows in two databases; the deployment's own rows are all in the home database;
 * and no table holds fewer rows over all databases than when the rebalance began. Only when all
 * of that holds is the new list recorded in every database, and the gateway serves again.
 * Reads every database involved page by page (rowid order), so its memory stays bounded.
 */
import {
  countRows,
  listText,
  planRebalance,
  type RebalancePlan,
  recordDone,
  sumCounts,
} from "./rebalance-plan";
import { HOME_TABLES, MESSAGES, type MovedTable, SESSION_TABLES, TRANSCRIPTS } from "./rebalance-tables";

export interface VerifyProblem {
  /**
   * misplaced: rows of a session in a database its key does not place it in; doubled: so, and
   * some in the right one too; lost: fewer rows than at the start; left: the deployment's own
   * rows outside the home database.
   */
  problem: "misplaced" | "doubled" | "lost" | "left";
  table: string;
  key?: string;
  database?: string;
  belongsIn?: string;
  message: string;
}

export interface VerifyReport {
  ok: boolean;
  to: string[];
  /** The databases read: those of storage.d1 and of the list the rows were placed with. */
  databases: string[];
  /** Rows per table over all of them, and as many when the rebalance began (when one did). */
  rows: Record<string, { found: number; atStart?: number }>;
  /** The first problems found (at most MAX_REPORTED), and how many there are in all. */
  problems: VerifyProblem[];
  problemCount: number;
  notes: string[];
  /** The new list is recorded in every database: the gateway serves with it. */
  recorded: boolean;
}

const KEY_PAGE = 10_000;
const MAX_REPORTED = 100;
const IDS_PER_STATEMENT = 5_000;

/** Session tables with a key column (messages are placed with their transcript). */
const KEYED = SESSION_TABLES.filter((t) => t.keyColumn);

interface Misplaced {
  table: MovedTable;
  key: string;
  database: string;
  belongsIn: string;
}

/** Rows of `name` whose key places them elsewhere, one entry per (table, key). */
async function misplacedIn(plan: RebalancePlan, db: D1Database, name: string): Promise<Misplaced[]> {
  const found: Misplaced[] = [];
  let pending = KEYED.map((table) => ({ table, after: 0 }));
  while (pending.length > 0) {
    const results = await db.batch(
      pending.map(({ table, after }) =>
        db
          .prepare(
            `SELECT rowid AS r, "${table.keyColumn}" AS k FROM "${table.name}" WHERE rowid > ?1 ORDER BY rowid LIMIT ?2`,
          )
          .bind(after, KEY_PAGE),
      ),
    );
    const next: typeof pending = [];
    for (const [i, { table }] of pending.entries()) {
      const rows = (results[i]?.results ?? []) as Array<{ r: number; k: string }>;
      const seen = new Set<string>();
      for (const { k } of rows) {
        if (seen.has(k)) continue;
        seen.add(k);
        const belongsIn = plan.to[plan.place(k)] as string;
        if (belongsIn !== name) found.push({ table, key: k, database: name, belongsIn });
      }
      const last = rows[rows.length - 1];
      if (rows.length === KEY_PAGE && last) next.push({ table, after: last.r });
    }
    pending = next;
  }
  return found;
}

/** Transcript ids of messages in `db` whose transcript is not in `db`. */
async function strayMessages(db: D1Database): Promise<string[]> {
  const ids: string[] = [];
  let after = "";
  for (;;) {
    const { results } = await db
      .prepare(
        `SELECT DISTINCT x.session_id AS s FROM messages AS x WHERE x.session_id > ?1
         AND NOT EXISTS (SELECT 1 FROM transcripts AS t WHERE t.session_id = x.session_id) ORDER BY 1 LIMIT ?2`,
      )
      .bind(after, KEY_PAGE)
      .all<{ s: string }>();
    ids.push(...results.map((r) => r.s));
    const last = results[results.length - 1];
    if (results.length < KEY_PAGE || !last) return ids;
    after = last.s;
  }
}

/** `query` over `values` bound as JSON lists of at most IDS_PER_STATEMENT, in one batch. */
async function inLists<T>(db: D1Database, sql: string, values: readonly string[]): Promise<T[]> {
  if (values.length === 0) return [];
  const statements: D1PreparedStatement[] = [];
  for (let i = 0; i < values.length; i += IDS_PER_STATEMENT)
    statements.push(db.prepare(sql).bind(JSON.stringify(values.slice(i, i + IDS_PER_STATEMENT))));
  return (await db.batch(statements)).flatMap((r) => r.results as T[]);
}

/** Messages whose transcript is in another database: misplaced with it; in none: a note. */
async function misplacedMessages(plan: RebalancePlan, notes: string[]): Promise<Misplaced[]> {
  const strays = await Promise.all(plan.involved.map((s) => strayMessages(s.db)));
  const found: Misplaced[] = [];
  const unowned = new Set(strays.flat());
  for (const [i, ids] of strays.entries()) {
    if (ids.length === 0) continue;
    const name = (plan.involved[i] as { name: string }).name;
    for (const other of plan.involved) {
      if (other.name === name) continue;
      const owners = await inLists<{ s: string; k: string }>(
        other.db,
        `SELECT session_id AS s, session_key AS k FROM transcripts WHERE session_id IN (SELECT value FROM json_each(?1))`,
        ids,
      );
      for (const { s, k } of owners) {
        unowned.delete(s);
        found.push({ table: MESSAGES, key: k, database: name, belongsIn: plan.to[plan.place(k)] as string });
      }
    }
  }
  if (unowned.size > 0) {
    const some = [...unowned].slice(0, 5).join(", ");
    notes.push(
      `${unowned.size} transcript(s) have messages but no transcript row in any database (${some}${unowned.size > 5 ? ", …" : ""}): left where they are`,
    );
  }
  return found;
}

/** Which of `keys` also have rows of `table` in `db`. */
async function presentIn(db: D1Database, table: MovedTable, keys: string[]): Promise<Set<string>> {
  const sql =
    table === MESSAGES
      ? `SELECT DISTINCT t.session_key AS k FROM ${TRANSCRIPTS.name} AS t WHERE t.session_key IN (SELECT value FROM json_each(?1)) AND EXISTS (SELECT 1 FROM messages AS m WHERE m.session_id = t.session_id)`
      : `SELECT DISTINCT "${table.keyColumn}" AS k FROM "${table.name}" WHERE "${table.keyColumn}" IN (SELECT value FROM json_each(?1))`;
  return new Set((await inLists<{ k: string }>(db, sql, keys)).map((r) => r.k));
}

/** The problems of misplaced rows: doubled when their right database holds some of them too. */
async function placementProblems(plan: RebalancePlan, misplaced: Misplaced[]): Promise<VerifyProblem[]> {
  const byTarget = new Map<string, Misplaced[]>();
  for (const m of misplaced.slice(0, MAX_REPORTED)) {
    const id = `${m.belongsIn}\u0000${m.table.name}`;
    byTarget.set(id, [...(byTarget.get(id) ?? []), m]);
  }
  const doubled = new Set<Misplaced>();
  for (const group of byTarget.values()) {
    const { belongsIn, table } = group[0] as Misplaced;
    const target = plan.involved.find((s) => s.name === belongsIn);
    if (!target) continue;
    const present = await presentIn(
      target.db,
      table,
      group.map((m) => m.key),
    );
    for (const m of group) if (present.has(m.key)) doubled.add(m);
  }
  return misplaced.map((m) => {
    const base = { table: m.table.name, key: m.key, database: m.database, belongsIn: m.belongsIn };
    return doubled.has(m)
      ? {
          problem: "doubled",
          ...base,
          message: `${m.table.name} rows of ${m.key} are in both ${m.database} and ${m.belongsIn}; they belong in ${m.belongsIn}`,
        }
      : {
          problem: "misplaced",
          ...base,
          message: `${m.table.name} rows of ${m.key} are in ${m.database}; under ${listText(plan.to)} they belong in ${m.belongsIn}`,
        };
  });
}

/**
 * Verifies the placement under storage.d1 and, when it holds, records the list in every database
 * (`plan`: as the rebalance read it; otherwise read now).
 */
export async function verifyPlacement(env: Env, now: number, plan?: RebalancePlan): Promise<VerifyReport> {
  const p = plan ?? (await planRebalance(env));
  const notes: string[] = [];
  const [perDatabase, misplaced, messages] = await Promise.all([
    countRows(p.involved),
    Promise.all(p.involved.map((s) => misplacedIn(p, s.db, s.name))),
    misplacedMessages(p, notes),
  ]);
  const problems = await placementProblems(p, [...misplaced.flat(), ...messages]);
  const home = p.to[0] as string;
  for (const [i, counts] of perDatabase.entries()) {
    const name = (p.involved[i] as { name: string }).name;
    if (name === home) continue;
    for (const table of HOME_TABLES) {
      const n = counts[table.name] ?? 0;
      if (n > 0) {
        problems.push({
          problem: "left",
          table: table.name,
          database: name,
          belongsIn: home,
          message: `${n} ${table.name} row(s) in ${name}; the deployment's own rows belong in the home database ${home}`,
        });
      }
    }
  }
  const totals = sumCounts(perDatabase);
  const rows: VerifyReport["rows"] = {};
  for (const [table, found] of Object.entries(totals)) {
    const atStart = p.counts?.[table];
    rows[table] = atStart === undefined ? { found } : { found, atStart };
    if (atStart === undefined || found === atStart) continue;
    if (found < atStart) {
      problems.push({
        problem: "lost",
        table,
        message: `${table}: ${found} rows over all databases, ${atStart} when the rebalance began`,
      });
    } else {
      // Session actors keep working through a rebalance (their alarms): they can only add rows.
      notes.push(
        `${table}: ${found - atStart} more rows than when the rebalance began (written while it ran)`,
      );
    }
  }
  const ok = problems.length === 0;
  if (ok) await recordDone(p, now);
  return {
    ok,
    to: p.to,
    databases: p.involved.map((s) => s.name),
    rows,
    problems: problems.slice(0, MAX_REPORTED),
    problemCount: problems.length,
    notes,
    recorded: ok,
  };
}
