/**
 * The schema's columns as SQL sees them, for the plain statements of reads.ts and writes.ts:
 * per table, each row property's column name, how its value is stored (text, integer and real
 * as they are, booleans as 0/1, JSON as its text, read back through the column's schema:
 * json-columns.ts) and what an insert without the value stores, in the schema's declaration
 * order. Derived from the drizzle tables of schema.ts (`getTableColumns`), every one of them
 * when this module loads, so a column type or default these statements cannot store fails at
 * startup. test/integration/columns.test.ts holds what they say against the tables the
 * migrations build.
 */
import { getTableColumns, getTableName, is, SQL } from "drizzle-orm";
import { type SQLiteColumn, SQLiteSyncDialect, SQLiteTable } from "drizzle-orm/sqlite-core";
import * as schema from "./schema";

export type Codec = "text" | "integer" | "real" | "boolean" | "json";

/** How a stored value becomes a row's value; null when it is the value (text, integer). */
export type Decode = ((value: unknown) => unknown) | null;

/** What an insert without the value stores: the `.default(value)` (bound) or SQL default (inlined). */
export type Fallback = { value: string | number | boolean } | { sql: string };

export interface ColumnDef {
  /** The column name, unquoted. */
  name: string;
  codec: Codec;
  /** How a stored value (not null) becomes the row's value; null when it is the value. */
  decode: Decode;
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
 * `integer(…, { mode: "boolean" })` is SQLiteBoolean); a JSON column is json-columns.ts's
 * `json()`, a custom text column that decodes through its schema. A `text(…, { mode: "json" })`
 * column, which would be read unchecked, is refused.
 */
const CODECS: Record<string, Codec> = {
  SQLiteText: "text",
  SQLiteInteger: "integer",
  SQLiteReal: "real",
  SQLiteBoolean: "boolean",
  SQLiteCustomColumn: "json",
};

const decodeBoolean = (value: unknown): boolean => Number(value) === 1;

const dialect = new SQLiteSyncDialect();

function columnDef(table: string, property: string, column: SQLiteColumn): ColumnDef {
  const at = `${table}.${property}`;
  const codec = CODECS[column.columnType];
  if (!codec || (codec === "json" && column.getSQLType() !== "text")) {
    throw new Error(`${at}: a ${column.columnType} column is not supported by src/db/columns.ts`);
  }
  // Drizzle computes these per statement; a statement text built once cannot.
  if (column.defaultFn || column.onUpdateFn || column.generated) {
    throw new Error(
      `${at}: a $defaultFn, $onUpdateFn or generated column is not supported by src/db/columns.ts`,
    );
  }
  const decode: Decode =
    codec === "boolean"
      ? decodeBoolean
      : codec === "json"
        ? (value) => column.mapFromDriverValue(value)
        : null;
  const def: ColumnDef = { name: column.name, codec, decode };
  // An integer primary key has a default (its rowid) but no value: drizzle inserts null.
  const value: unknown = column.default;
  if (value === undefined || value === null) return def;
  if (is(value, SQL)) {
    const query = dialect.sqlToQuery(value);
    if (query.params.length > 0) throw new Error(`${at}: a SQL default with params is not supported`);
    return { ...def, fallback: { sql: query.sql } };
  }
  return { ...def, fallback: { value: value as string | number | boolean } };
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
