/**
 * Write statements for the hot path (a run, its session entry, deliveries) and the rows a
 * rebalance copies: plain SQL through D1, built from the schema's columns (columns.ts), with
 * no drizzle query builder on the way (docs/decisions.md, "CPU per message and per read").
 * A call stores what drizzle's insert/upsert/update of the same values
 * stores, in the same SQL text with the same params (test/integration/writes.test.ts compares
 * them): an undefined value inserts the column's default and leaves the column alone in an
 * update. Each call builds its text and prepares its statement: keeping either per table or per
 * binding saved no measurable CPU (docs/decisions.md, "CPU per message and per read").
 */
import type { Column } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import { type ColumnDef, encode, tableDef } from "./columns";

export interface Query {
  sql: string;
  params: unknown[];
}

/**
 * `"nothing"`: drizzle's `onConflictDoNothing()`; otherwise its `onConflictDoUpdate({ target,
 * set })`, with `where` (SQL text, e.g. comparing with `excluded`) its `setWhere`.
 */
export type OnConflict<T extends SQLiteTable> =
  | "nothing"
  | { target: Column; set: Partial<T["$inferInsert"]>; where?: string };

/** What an insert stores for a column whose value is undefined. */
interface Fallback {
  sql: string;
  params: unknown[];
}

interface TablePlan {
  /** `"t"` */
  quoted: string;
  /** All columns in declaration order: insert order, and the order of `set` clauses. */
  keys: string[];
  columns: ColumnDef[];
  /** By column name: a conflict target's and an update key's column. */
  byName: Map<string, ColumnDef>;
  fallbacks: Fallback[];
  /** `insert into "t" ("a", "b") values (`, the part that never varies. */
  insertHead: string;
}

const plans = new WeakMap<SQLiteTable, TablePlan>();

function plan(table: SQLiteTable): TablePlan {
  let p = plans.get(table);
  if (p) return p;
  const def = tableDef(table);
  const columns = Object.values(def.columns);
  const fallbacks = columns.map((column): Fallback => {
    const f = column.fallback;
    if (!f) return { sql: "null", params: [] };
    if ("sql" in f) return { sql: f.sql, params: [] };
    return { sql: "?", params: [encode(column.codec, f.value)] };
  });
  const quoted = `"${def.name}"`;
  p = {
    quoted,
    keys: Object.keys(def.columns),
    columns,
    byName: new Map(columns.map((column) => [column.name, column])),
    fallbacks,
    insertHead: `insert into ${quoted} (${columns.map((c) => `"${c.name}"`).join(", ")}) values (`,
  };
  plans.set(table, p);
  return p;
}

/** The column named like `column` (a drizzle column of the table), qualified: `"t"."c"`. */
function qualified(p: TablePlan, column: Column): [ColumnDef, string] {
  const def = p.byName.get(column.name);
  if (!def) throw new Error(`${p.quoted} has no column ${column.name}`);
  return [def, `${p.quoted}."${def.name}"`];
}

/**
 * Binds the defined values of `set` in column order (as drizzle's update sets) and returns the
 * indexes of the columns set, which are all the text depends on.
 */
function bindSet(p: TablePlan, set: Record<string, unknown>, params: unknown[]): number[] {
  const present: number[] = [];
  for (let i = 0; i < p.keys.length; i++) {
    const value = set[p.keys[i] as string];
    if (value === undefined) continue;
    present.push(i);
    params.push(encode((p.columns[i] as ColumnDef).codec, value));
  }
  if (present.length === 0) throw new Error("No values to set");
  return present;
}

function setText(p: TablePlan, present: number[]): string {
  return present.map((i) => `"${(p.columns[i] as ColumnDef).name}" = ?`).join(", ");
}

/** `insert into … values (…)` plus the conflict clause; undefined values get the column's default. */
export function insertQuery<T extends SQLiteTable>(
  table: T,
  row: T["$inferInsert"],
  onConflict: OnConflict<T>,
): Query {
  const p = plan(table);
  const params: unknown[] = [];
  const values: Record<string, unknown> = row;
  let shape = "";
  for (let i = 0; i < p.keys.length; i++) {
    const value = values[p.keys[i] as string];
    if (value === undefined) {
      shape += "0";
      params.push(...(p.fallbacks[i] as Fallback).params);
    } else {
      shape += "1";
      params.push(encode((p.columns[i] as ColumnDef).codec, value));
    }
  }
  const update =
    onConflict === "nothing"
      ? undefined
      : {
          target: onConflict.target,
          present: bindSet(p, onConflict.set, params),
          where: onConflict.where,
        };
  const slots = p.fallbacks.map((f, i) => (shape[i] === "1" ? "?" : f.sql)).join(", ");
  const conflict = update
    ? ` on conflict (${qualified(p, update.target)[1]}) do update set ${setText(p, update.present)}${
        update.where ? ` where ${update.where}` : ""
      }`
    : " on conflict do nothing";
  return { sql: `${p.insertHead}${slots})${conflict}`, params };
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
  const [key, quoted] = qualified(p, where.column);
  params.push(encode(key.codec, where.value));
  return { sql: `update ${p.quoted} set ${setText(p, present)} where ${quoted} = ?`, params };
}

/** D1's bound parameters per statement: up to this many, rows are bound as values. */
const MAX_PARAMS = 100;

/**
 * Several rows in one statement, then `conflict` (SQL text; default: do nothing). Rows that fit
 * D1's 100 bound parameters are bound as `values (…), (…)`; more go as one JSON parameter
 * (`select value ->> 0, … from json_each(?)`, arrays of encoded values in column order). An
 * undefined value stores the column's default, as `insertQuery` does.
 */
export function insertManyQuery<T extends SQLiteTable>(
  table: T,
  rows: ReadonlyArray<T["$inferInsert"]>,
  conflict = "on conflict do nothing",
): Query {
  const p = plan(table);
  const encoded = rows.map((row) => {
    const values = row as Record<string, unknown>;
    return p.keys.map((key, i) => {
      const value = values[key];
      if (value !== undefined) return encode((p.columns[i] as ColumnDef).codec, value);
      const fallback = (p.columns[i] as ColumnDef).fallback;
      if (fallback && "sql" in fallback)
        throw new Error(`${p.quoted}: no value for ${key} (its default is SQL)`);
      return fallback ? encode((p.columns[i] as ColumnDef).codec, fallback.value) : null;
    });
  });
  const columns = p.columns.map((c) => `"${c.name}"`).join(", ");
  if (rows.length * p.columns.length <= MAX_PARAMS) {
    const row = `(${p.columns.map(() => "?").join(", ")})`;
    const sql = `insert into ${p.quoted} (${columns}) values ${Array.from({ length: rows.length }, () => row).join(", ")} ${conflict}`;
    return { sql, params: encoded.flat() };
  }
  const sql = `insert into ${p.quoted} (${columns}) select ${p.columns
    .map((_, i) => `value ->> ${i}`)
    .join(", ")} from json_each(?) where true ${conflict}`;
  return { sql, params: [JSON.stringify(encoded)] };
}

/** `query` as a D1 statement. */
export function boundStatement(db: D1Database, query: Query): D1PreparedStatement {
  return db.prepare(query.sql).bind(...query.params);
}
