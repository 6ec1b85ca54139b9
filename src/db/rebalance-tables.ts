/**
 * What `storage rebalance` moves between D1 databases (SPEC §19), and how one batch of rows
 * moves: the tables (a session's rows, and the deployment's own rows kept in the home
 * database), each row read with its rowid and its session key, copied to the target with
 * `INSERT OR IGNORE … SELECT … FROM json_each(?)` (one JSON parameter per chunk of rows),
 * checked there, and only then deleted at the source by rowid. A kill between any two steps
 * leaves every row in the source, the target or both, never neither; the next pass copies
 * again (the insert ignores what is there) and deletes. A row the target refuses (another row
 * holds a unique value of it: a label, an idempotency key, a message id) is found missing by the
 * check, and its session's rows stay at the source for the operator, reported as a conflict.
 */
import type { Column } from "drizzle-orm";
import { getTableColumns, getTableName } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import * as schema from "./schema";

export interface MovedTable {
  /** The SQL name, also the name progress and verify reports use. */
  name: string;
  /** SQL column names, in the schema's declaration order: a row is copied as this array. */
  columns: string[];
  /** The columns that say a copy in the target is this row: its primary key, and its owner. */
  match: string[];
  /** A stored row at least this new (sessions: updated_at) counts as the copy. */
  newerColumn?: string;
  /** The session key column (none: a deployment-wide table, moved whole with the home). */
  keyColumn?: string;
}

function moved(table: SQLiteTable, match: Column[], opts: { key?: Column; newer?: Column } = {}): MovedTable {
  return {
    name: getTableName(table),
    columns: Object.values(getTableColumns(table)).map((c) => c.name),
    match: match.map((c) => c.name),
    ...(opts.newer ? { newerColumn: opts.newer.name } : {}),
    ...(opts.key ? { keyColumn: opts.key.name } : {}),
  };
}

const s = schema;
export const SESSIONS = moved(s.sessions, [s.sessions.key], {
  key: s.sessions.key,
  newer: s.sessions.updatedAt,
});
export const TRANSCRIPTS = moved(s.transcripts, [s.transcripts.sessionId, s.transcripts.sessionKey], {
  key: s.transcripts.sessionKey,
});
/** Messages belong to their transcript's session: their key is read through `transcripts`. */
export const MESSAGES = moved(s.messages, [s.messages.sessionId, s.messages.seq, s.messages.id]);
export const RUNS = moved(s.runs, [s.runs.runId, s.runs.sessionKey], { key: s.runs.sessionKey });
export const DELIVERIES = moved(s.deliveries, [s.deliveries.deliveryId, s.deliveries.sessionKey], {
  key: s.deliveries.sessionKey,
});
export const RUN_PREFIXES = moved(s.runPrefixes, [s.runPrefixes.prefix, s.runPrefixes.sessionKey], {
  key: s.runPrefixes.sessionKey,
});
export const DEAD_RECORDS = moved(s.deadRecords, [s.deadRecords.runId, s.deadRecords.sessionKey], {
  key: s.deadRecords.sessionKey,
});

/**
 * The tables moved session by session, found by their key through an index on it, in the order
 * a session's rows leave its source: its transcripts only once their messages are gone (a
 * message finds its session through them), its entry last (the entry, a transcript, a run or a
 * delivery left at the source is how a resumed pass finds the session again).
 */
export const BY_KEY = [MESSAGES, RUNS, DELIVERIES, TRANSCRIPTS, SESSIONS] as const;

/**
 * Session rows with no index on their key (run-id prefixes, dead records): moved by
 * a scan of each table in rowid order, which also finds the rows of sessions deleted since.
 */
export const SCANNED = [RUN_PREFIXES, DEAD_RECORDS] as const;

/** Every table holding a session's rows. */
export const SESSION_TABLES = [SESSIONS, TRANSCRIPTS, MESSAGES, RUNS, DELIVERIES, RUN_PREFIXES, DEAD_RECORDS];

/** The deployment's own rows: all in the home database (the first of storage.d1). */
export const HOME_TABLES = [
  moved(s.maintenance, [s.maintenance.task]),
  moved(s.jobRuns, [s.jobRuns.jobId, s.jobRuns.scheduledFor]),
  moved(s.memories, [s.memories.id]),
  moved(s.pairingCodes, [s.pairingCodes.channel, s.pairingCodes.code]),
  moved(s.pairedSenders, [s.pairedSenders.channel, s.pairedSenders.peerId]),
  moved(s.accessRefusals, [s.accessRefusals.channel, s.accessRefusals.reason]),
];

export const ALL_TABLES = [...SESSION_TABLES, ...HOME_TABLES];

const q = (name: string) => `"${name}"`;

/** A row as read for a move: its columns, its rowid and its key (for a home table: its primary key). */
export type SourceRow = Record<string, unknown> & { rowid_: number; key_: string };

/** The select list of a read for a move: rowid, key, every column (`alias.` prefixed). */
export function readColumns(t: MovedTable, alias: string, key: string): string {
  return [`${alias}.rowid AS rowid_`, `${key} AS key_`, ...t.columns.map((c) => `${alias}.${q(c)}`)].join(
    ", ",
  );
}

/** A home table's row key: its primary key values, as text (what a conflict report names). */
export function homeKeyOf(t: MovedTable): string {
  return t.match.length === 1
    ? `CAST(x.${q(t.match[0] as string)} AS TEXT)`
    : `json_array(${t.match.map((c) => `x.${q(c)}`).join(", ")})`;
}

/** Bound JSON text per statement: D1 takes up to 2 MB per value; a char is at most 3 bytes. */
const CHUNK_CHARS = 500_000;
/** Parameter text per batch (a batch is one request to D1). */
const BATCH_CHARS = 4_000_000;

/** `items` as JSON arrays of at most CHUNK_CHARS each (one item alone may be longer: see copyRows). */
function chunks(items: string[]): string[] {
  const out: string[] = [];
  let current: string[] = [];
  let size = 0;
  for (const item of items) {
    if (current.length > 0 && size + item.length + 1 > CHUNK_CHARS) {
      out.push(`[${current.join(",")}]`);
      current = [];
      size = 0;
    }
    current.push(item);
    size += item.length + 1;
  }
  if (current.length > 0) out.push(`[${current.join(",")}]`);
  return out;
}

const at = (i: number) => `j.value ->> ${i}`;

function insertSql(t: MovedTable): string {
  const values = t.columns.map((_, i) => at(i)).join(", ");
  return `INSERT OR IGNORE INTO ${q(t.name)} (${t.columns.map(q).join(", ")}) SELECT ${values} FROM json_each(?1) AS j`;
}

/** A copy newer than the stored row replaces it (the stored one wins when as new or newer). */
function refreshSql(t: MovedTable, newer: string): string {
  const sets = t.columns.map((c, i) => `${q(c)} = ${at(i)}`).join(", ");
  const [first] = t.match as [string];
  return (
    `UPDATE OR IGNORE ${q(t.name)} SET ${sets} FROM json_each(?1) AS j ` +
    `WHERE ${q(t.name)}.${q(first)} = ${at(t.columns.indexOf(first))} ` +
    `AND ${q(t.name)}.${q(newer)} < ${at(t.columns.indexOf(newer))}`
  );
}

/**
 * The rows of `t` not (or not as new) in this database: a `[key, …match, newer?]` entry of the
 * bound list for each, as `(table index, key)`.
 */
function missingSql(t: MovedTable, index: number, param: number): string {
  const conditions = t.match.map((c, i) => `x.${q(c)} = ${at(i + 1)}`);
  if (t.newerColumn) conditions.push(`x.${q(t.newerColumn)} >= ${at(t.match.length + 1)}`);
  return (
    `SELECT ${index} AS t, ${at(0)} AS k FROM json_each(?${param}) AS j ` +
    `WHERE NOT EXISTS (SELECT 1 FROM ${q(t.name)} AS x WHERE ${conditions.join(" AND ")})`
  );
}

/** A row too large for a JSON chunk, its values bound one by one (D1 takes up to 2 MB per value). */
function insertOneSql(t: MovedTable): string {
  const values = t.columns.map((_, i) => `?${i + 1}`).join(", ");
  return `INSERT OR IGNORE INTO ${q(t.name)} (${t.columns.map(q).join(", ")}) VALUES (${values})`;
}

function refreshOneSql(t: MovedTable, newer: string): string {
  const [first] = t.match as [string];
  const param = (c: string) => `?${t.columns.indexOf(c) + 1}`;
  return (
    `UPDATE OR IGNORE ${q(t.name)} SET ${t.columns.map((c, i) => `${q(c)} = ?${i + 1}`).join(", ")} ` +
    `WHERE ${q(first)} = ${param(first)} AND ${q(newer)} < ${param(newer)}`
  );
}

const deleteSql = (t: MovedTable) =>
  `DELETE FROM ${q(t.name)} WHERE rowid IN (SELECT value FROM json_each(?1))`;

export interface Part {
  table: MovedTable;
  rows: SourceRow[];
}

export interface Conflict {
  table: string;
  key: string;
}

export interface Copied {
  /** Rows deleted at the source after their copy was found in the target, by table. */
  rows: Record<string, number>;
  /** Keys whose rows stay at the source: a row of theirs is not in the target after the copy. */
  conflicts: Conflict[];
}

/** Runs `statements` as few batches as their bound text allows (each batch is atomic). */
async function runBatches(db: D1Database, statements: Array<[D1PreparedStatement, number]>) {
  const results: D1Result[] = [];
  let batch: D1PreparedStatement[] = [];
  let size = 0;
  for (const [statement, chars] of statements) {
    if (batch.length > 0 && size + chars > BATCH_CHARS) {
      results.push(...(await db.batch(batch)));
      batch = [];
      size = 0;
    }
    batch.push(statement);
    size += chars;
  }
  if (batch.length > 0) results.push(...(await db.batch(batch)));
  return results;
}

/** D1 binds at most 100 parameters per statement: a check statement takes up to this many lists. */
const CHECKS_PER_STATEMENT = 100;

/**
 * Moves `parts` from `source` to `target`: the copies and the check in the target, then the
 * deletes at the source, leaving out every row of a key with a row the check found missing.
 */
export async function copyRows(
  source: D1Database,
  target: D1Database,
  parts: readonly Part[],
): Promise<Copied> {
  const live = parts.filter((p) => p.rows.length > 0);
  if (live.length === 0) return { rows: {}, conflicts: [] };
  const statements: Array<[D1PreparedStatement, number]> = [];
  const checks: Array<{ index: number; list: string }> = [];
  for (const [index, { table, rows }] of live.entries()) {
    const newer = table.newerColumn;
    const values = rows.map((r) => table.columns.map((c) => r[c] ?? null));
    const texts = values.map((v) => JSON.stringify(v));
    const small = texts.filter((t) => t.length <= CHUNK_CHARS);
    for (const chunk of chunks(small)) {
      statements.push([target.prepare(insertSql(table)).bind(chunk), chunk.length]);
      if (newer) statements.push([target.prepare(refreshSql(table, newer)).bind(chunk), chunk.length]);
    }
    for (const [i, text] of texts.entries()) {
      if (text.length <= CHUNK_CHARS) continue;
      const row = values[i] as unknown[];
      statements.push([target.prepare(insertOneSql(table)).bind(...row), text.length]);
      if (newer) statements.push([target.prepare(refreshOneSql(table, newer)).bind(...row), text.length]);
    }
    const entries = rows.map((r) =>
      JSON.stringify([r.key_, ...table.match.map((c) => r[c]), ...(newer ? [r[newer]] : [])]),
    );
    for (const list of chunks(entries)) checks.push({ index, list });
  }
  for (let i = 0; i < checks.length; i += CHECKS_PER_STATEMENT) {
    const group = checks.slice(i, i + CHECKS_PER_STATEMENT);
    const sql = group
      .map((c, n) => missingSql((live[c.index] as Part).table, c.index, n + 1))
      .join(" UNION ALL ");
    const params = group.map((c) => c.list);
    statements.push([target.prepare(sql).bind(...params), params.reduce((n, p) => n + p.length, 0)]);
  }
  const results = await runBatches(target, statements);
  const checkStatements = Math.ceil(checks.length / CHECKS_PER_STATEMENT);
  const conflicts: Conflict[] = [];
  const held = new Set<string>();
  for (const result of results.slice(results.length - checkStatements)) {
    for (const row of result.results as Array<{ t: number; k: string }>) {
      conflicts.push({ table: (live[row.t] as Part).table.name, key: row.k });
      held.add(row.k);
    }
  }
  const deletes: Array<[D1PreparedStatement, number]> = [];
  const rows: Record<string, number> = {};
  for (const { table, rows: read } of live) {
    const gone = read.filter((r) => !held.has(r.key_));
    if (gone.length === 0) continue;
    rows[table.name] = gone.length;
    for (const chunk of chunks(gone.map((r) => String(r.rowid_))))
      deletes.push([source.prepare(deleteSql(table)).bind(chunk), chunk.length]);
  }
  await runBatches(source, deletes);
  return { rows, conflicts };
}
