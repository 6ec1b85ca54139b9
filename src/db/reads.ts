/**
 * Read statements for the hot read paths (an entry by key, a listing page, a history page)
 * without drizzle's query builder and row mapping, whose per-call object walks were the
 * largest share of a read request's isolate time. The select list is derived from the drizzle
 * schema once per table, and rows are decoded by the schema's own columns (JSON, booleans), so
 * a row is exactly what drizzle's `.select().from(table)` returns (test/unit/reads.test.ts
 * compares them). Callers write only their WHERE/ORDER clauses, with `?` parameters.
 */
import { type Column, getTableColumns, getTableName } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";

interface ReadPlan {
  /** `select "a", "b" from "t"` */
  head: string;
  /** [property, column name, column] in declaration order. */
  columns: Array<[string, string, Column]>;
  /** [property, column name, decoder or null when the driver value is the value] for mapRow. */
  decoders: Array<[string, string, ((value: unknown) => unknown) | null]>;
  /** Column name by property, quoted. */
  names: Map<string, string>;
}

const plans = new WeakMap<SQLiteTable, ReadPlan>();

function plan(table: SQLiteTable): ReadPlan {
  let p = plans.get(table);
  if (p) return p;
  const columns = Object.entries(getTableColumns(table)).map(
    ([key, column]) => [key, column.name, column] as [string, string, Column],
  );
  const names = new Map(columns.map(([key, name]) => [key, `"${name}"`]));
  p = {
    head: `select ${columns.map(([, name]) => `"${name}"`).join(", ")} from "${getTableName(table)}"`,
    columns,
    names,
    decoders: columns.map(([key, name, column]) => [
      key,
      name,
      identityDecoded(column) ? null : (v) => column.mapFromDriverValue(v),
    ]),
  };
  plans.set(table, p);
  return p;
}

/**
 * Whether a column's driver value is already its value (plain text, integer and real columns:
 * drizzle's decoder returns its input), so mapRow can skip the call. JSON, boolean and
 * timestamp modes decode.
 */
function identityDecoded(column: Column): boolean {
  const probe =
    column.columnType === "SQLiteText" ||
    column.columnType === "SQLiteInteger" ||
    column.columnType === "SQLiteReal";
  if (!probe) return false;
  return column.mapFromDriverValue("x") === "x" && column.mapFromDriverValue(7) === 7;
}

/** The quoted column name of a property of `table`. */
export function col<T extends SQLiteTable>(table: T, key: keyof T["$inferSelect"] & string): string {
  const name = plan(table).names.get(key);
  if (!name) throw new Error(`${getTableName(table)} has no column ${key}`);
  return name;
}

/** A D1 row (keyed by column name) as the schema's row shape. */
export function mapRow<T extends SQLiteTable>(table: T, raw: Record<string, unknown>): T["$inferSelect"] {
  const row: Record<string, unknown> = {};
  for (const [key, name, decode] of plan(table).decoders) {
    const value = raw[name];
    row[key] = value === null || value === undefined ? null : decode ? decode(value) : value;
  }
  return row as T["$inferSelect"];
}

/** The statement selecting every column of `table` for the rows `rest` selects. */
export function selectStatement<T extends SQLiteTable>(
  db: D1Database,
  table: T,
  rest: string,
  params: unknown[],
): D1PreparedStatement {
  return db.prepare(`${plan(table).head} ${rest}`).bind(...params);
}

/** Every column of `table` for the rows `rest` (`where … order by … limit …`) selects. */
export async function selectRows<T extends SQLiteTable>(
  db: D1Database,
  table: T,
  rest: string,
  params: unknown[],
): Promise<T["$inferSelect"][]> {
  const { results } = await selectStatement(db, table, rest, params).all<Record<string, unknown>>();
  return results.map((r) => mapRow(table, r));
}
