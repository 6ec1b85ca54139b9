/**
 * The schema's columns as SQL sees them, for the plain statements of reads.ts and writes.ts:
 * per table, each row property's column name, how its value is stored (text and integer as
 * they are, booleans as 0/1, JSON as its text) and what an insert without the value stores,
 * in the schema's declaration order. Derived from the drizzle tables of schema.ts
 * (`getTableColumns`), every one of them when this module loads, so a column type or default
 * these statements cannot store fails at startup. test/integration/columns.test.ts holds what
 * they say against the tables the migrations build.
 */
import { getTableColumns, getTableName, is, SQL } from "drizzle-orm";
import { type SQLiteColumn, SQLiteSyncDialect, SQLiteTable } from "drizzle-orm/sqlite-core";
import * as schema from "./schema";

export type Codec = "text" | "integer" | "boolean" | "json";

/** What an insert without the value stores: the `.default(value)` (bound) or SQL default (inlined). */
export type Fallback = { value: string | number | boolean } | { sql: string };

export interface ColumnDef {
  /** The column name, unquoted. */
  name: string;
  codec: Codec;
  /** None: the column has no default, an insert without the value stores null. */
  fallback?: Fallback;
}

/** A table's columns, by row property in declaration order. */
export interface TableDef {
  /** The table name, unquoted. */
  name: string;
  columns: Record<string, ColumnDef>;
}

/**
 * The codec of each drizzle column type these statements store (the mode is in the type:
 * `integer(…, { mode: "boolean" })` is SQLiteBoolean, `text(…, { mode: "json" })` SQLiteTextJson).
 */
const CODECS: Record<string, Codec> = {
  SQLiteText: "text",
  SQLiteInteger: "integer",
  SQLiteBoolean: "boolean",
  SQLiteTextJson: "json",
};

const dialect = new SQLiteSyncDialect();

function columnDef(table: string, property: string, column: SQLiteColumn): ColumnDef {
  const at = `${table}.${property}`;
  const codec = CODECS[column.columnType];
  if (!codec) throw new Error(`${at}: a ${column.columnType} column is not supported by src/db/columns.ts`);
  // Drizzle computes these per statement; a statement text built once cannot.
  if (column.defaultFn || column.onUpdateFn || column.generated) {
    throw new Error(
      `${at}: a $defaultFn, $onUpdateFn or generated column is not supported by src/db/columns.ts`,
    );
  }
  // An integer primary key has a default (its rowid) but no value: drizzle inserts null.
  const value: unknown = column.default;
  if (value === undefined || value === null) return { name: column.name, codec };
  if (is(value, SQL)) {
    const query = dialect.sqlToQuery(value);
    if (query.params.length > 0) throw new Error(`${at}: a SQL default with params is not supported`);
    return { name: column.name, codec, fallback: { sql: query.sql } };
  }
  return { name: column.name, codec, fallback: { value: value as string | number | boolean } };
}

function derive(table: SQLiteTable): TableDef {
  const name = getTableName(table);
  const columns = getTableColumns(table) as Record<string, SQLiteColumn>;
  return {
    name,
    columns: Object.fromEntries(
      Object.entries(columns).map(([property, column]) => [property, columnDef(name, property, column)]),
    ),
  };
}

const defs = new WeakMap<SQLiteTable, TableDef>(
  (Object.values(schema) as unknown[])
    .filter((value): value is SQLiteTable => is(value, SQLiteTable))
    .map((table) => [table, derive(table)]),
);

/** The columns of a table (of schema.ts, or another drizzle table, derived on first use). */
export function tableDef(table: SQLiteTable): TableDef {
  let def = defs.get(table);
  if (!def) {
    def = derive(table);
    defs.set(table, def);
  }
  return def;
}

/** A value as D1 stores it (null stays null). */
export function encode(codec: Codec, value: unknown): unknown {
  if (value === null) return null;
  if (codec === "boolean") return value ? 1 : 0;
  if (codec === "json") return JSON.stringify(value);
  return value;
}

/** How a stored value becomes a row's value; null when it is the value (text, integer). */
export type Decode = ((value: unknown) => unknown) | null;

const decodeBoolean = (value: unknown): boolean => Number(value) === 1;
const decodeJson = (value: unknown): unknown => JSON.parse(value as string);

/** The decoder of a codec (applied to non-null values only). */
export function decoderOf(codec: Codec): Decode {
  return codec === "boolean" ? decodeBoolean : codec === "json" ? decodeJson : null;
}
