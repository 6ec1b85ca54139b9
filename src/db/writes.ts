/**
 * Write statements for the hot path without drizzle's query builder, whose SQL assembly
 * (sqlToQuery) was a measurable share of each message's isolate time. The SQL is derived from
 * the drizzle schema (column names, defaults, driver encoding) and is the same text with the
 * same params as drizzle's `.toSQL()` for the same call (test/unit/writes.test.ts compares
 * them). The text depends only on which values are present, so it is cached per (table,
 * present columns, conflict clause) and a call only encodes and binds values.
 */
import { type Column, getTableColumns, getTableName, is, SQL } from "drizzle-orm";
import { SQLiteAsyncDialect, type SQLiteTable } from "drizzle-orm/sqlite-core";

export interface Query {
  sql: string;
  params: unknown[];
}

/** `"nothing"` is drizzle's `onConflictDoNothing()`; otherwise its `onConflictDoUpdate({ target, set })`. */
export type OnConflict<T extends SQLiteTable> =
  | "nothing"
  | { target: Column; set: Partial<T["$inferInsert"]> };

/** What drizzle inserts for a column whose value is undefined. */
interface Fallback {
  sql: string;
  params: unknown[];
}

interface TablePlan {
  name: string;
  /** All columns in declaration order: insert order, and the order of `set` clauses. */
  columns: [key: string, column: Column][];
  fallbacks: Fallback[];
  /** `insert into "t" ("a", "b") values (`, the part that never varies. */
  insertHead: string;
  texts: Map<string, string>;
}

const dialect = new SQLiteAsyncDialect();
/** Call sites pass a handful of row shapes; the bound only guards against unbounded growth. */
const MAX_TEXTS_PER_TABLE = 256;
const plans = new WeakMap<SQLiteTable, TablePlan>();

function plan(table: SQLiteTable): TablePlan {
  let p = plans.get(table);
  if (p) return p;
  const name = getTableName(table);
  const columns = Object.entries(getTableColumns(table)) as [string, Column][];
  for (const [key, column] of columns) {
    // Drizzle evaluates these per statement, which a cached text cannot express.
    if (column.defaultFn || column.onUpdateFn || column.generated)
      throw new Error(`${name}.${key}: $defaultFn, $onUpdateFn and generated columns are not supported`);
  }
  const fallbacks = columns.map(([, column]): Fallback => {
    const d = column.default;
    if (d === null || d === undefined) return { sql: "null", params: [] };
    if (is(d, SQL)) {
      const { sql, params } = dialect.sqlToQuery(d);
      return { sql, params };
    }
    return { sql: "?", params: [column.mapToDriverValue(d)] };
  });
  const names = columns.map(([, column]) => dialect.escapeName(column.name)).join(", ");
  p = {
    name,
    columns,
    fallbacks,
    insertHead: `insert into ${dialect.escapeName(name)} (${names}) values (`,
    texts: new Map(),
  };
  plans.set(table, p);
  return p;
}

/** Drizzle's driver encoding of a bound value: null stays null, the rest goes through the column. */
function encode(column: Column, value: unknown): unknown {
  return value === null ? null : column.mapToDriverValue(value);
}

function qualified(p: TablePlan, column: Column): string {
  return `${dialect.escapeName(p.name)}.${dialect.escapeName(column.name)}`;
}

/**
 * Binds the defined values of `set` in column order (drizzle's `buildUpdateSet`) and returns
 * the indexes of the columns set, which are all the text depends on.
 */
function bindSet(p: TablePlan, set: Record<string, unknown>, params: unknown[]): number[] {
  const present: number[] = [];
  p.columns.forEach(([key, column], i) => {
    const value = set[key];
    if (value === undefined) return;
    present.push(i);
    params.push(encode(column, value));
  });
  if (present.length === 0) throw new Error("No values to set");
  return present;
}

function setText(p: TablePlan, present: number[]): string {
  return present
    .map((i) => `${dialect.escapeName((p.columns[i] as [string, Column])[1].name)} = ?`)
    .join(", ");
}

/** `insert into … values (…)` plus the conflict clause; undefined values get the schema default. */
export function insertQuery<T extends SQLiteTable>(
  table: T,
  row: T["$inferInsert"],
  onConflict: OnConflict<T>,
): Query {
  const p = plan(table);
  const params: unknown[] = [];
  const values: Record<string, unknown> = row;
  let shape = "";
  p.columns.forEach(([key, column], i) => {
    const value = values[key];
    if (value === undefined) {
      shape += "0";
      params.push(...(p.fallbacks[i] as Fallback).params);
    } else {
      shape += "1";
      params.push(encode(column, value));
    }
  });
  const update =
    onConflict === "nothing"
      ? undefined
      : { target: onConflict.target, present: bindSet(p, onConflict.set, params) };
  const cacheKey = update ? `${shape}|${update.target.name}|${update.present.join(",")}` : shape;
  let sql = p.texts.get(cacheKey);
  if (!sql) {
    const slots = p.fallbacks.map((f, i) => (shape[i] === "1" ? "?" : f.sql)).join(", ");
    const conflict = update
      ? ` on conflict (${qualified(p, update.target)}) do update set ${setText(p, update.present)}`
      : " on conflict do nothing";
    sql = `${p.insertHead}${slots})${conflict}`;
    if (p.texts.size < MAX_TEXTS_PER_TABLE) p.texts.set(cacheKey, sql);
  }
  return { sql, params };
}

/** `update … set <defined values> where <column> = ?`. */
export function updateQuery<T extends SQLiteTable>(
  table: T,
  set: Partial<T["$inferInsert"]>,
  where: { column: Column; value: unknown },
): Query {
  const p = plan(table);
  const params: unknown[] = [];
  const present = bindSet(p, set, params);
  params.push(encode(where.column, where.value));
  const cacheKey = `update|${present.join(",")}|${where.column.name}`;
  let sql = p.texts.get(cacheKey);
  if (!sql) {
    sql = `update ${dialect.escapeName(p.name)} set ${setText(p, present)} where ${qualified(p, where.column)} = ?`;
    if (p.texts.size < MAX_TEXTS_PER_TABLE) p.texts.set(cacheKey, sql);
  }
  return { sql, params };
}
