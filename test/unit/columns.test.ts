/**
 * src/db/columns.ts writes out by hand, for the plain SQL of reads.ts and writes.ts, what the
 * drizzle schema (src/db/schema.ts) already says about seven tables. Each case holds one table's
 * list against drizzle's own columns (`getTableColumns`): the same properties in the same order,
 * the same column names, the storage each property's codec stands for, and what an insert
 * without the value stores. A difference fails naming the table and the property.
 */
import { getTableColumns, getTableName, is, SQL } from "drizzle-orm";
import { type SQLiteColumn, SQLiteSyncDialect, type SQLiteTable } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import type { AnyTableDef, Codec, ColumnDef, Fallback } from "../../src/db/columns";
import * as columns from "../../src/db/columns";
import * as schema from "../../src/db/schema";

const TABLES: [SQLiteTable, AnyTableDef][] = [
  [schema.sessions, columns.sessions],
  [schema.transcripts, columns.transcripts],
  [schema.messages, columns.messages],
  [schema.runs, columns.runs],
  [schema.deliveries, columns.deliveries],
  [schema.deadRecords, columns.deadRecords],
];

/**
 * The codec a drizzle column's storage calls for, by its column type (which carries the mode:
 * `integer(…, { mode: "boolean" })` is SQLiteBoolean, `text(…, { mode: "json" })` SQLiteTextJson)
 * and the data type that goes with it. Any other column type has no codec in columns.ts.
 */
const CODECS: Record<string, { codec: Codec; dataType: string }> = {
  SQLiteText: { codec: "text", dataType: "string" },
  SQLiteInteger: { codec: "integer", dataType: "number" },
  SQLiteBoolean: { codec: "boolean", dataType: "boolean" },
  SQLiteTextJson: { codec: "json", dataType: "json" },
};

const dialect = new SQLiteSyncDialect();

/** A fallback as text for a message: `none`, the bound value, or the inlined SQL. */
function show(fallback: Fallback | undefined): string {
  if (fallback === undefined) return "none";
  return "value" in fallback ? `value ${JSON.stringify(fallback.value)}` : `sql ${fallback.sql}`;
}

/**
 * What columns.ts should hold as the fallback of a drizzle column: its `.default(value)` bound,
 * or its SQL default inlined as the dialect renders it (one with bound params has no inlined form
 * and matches nothing); undefined when it has no default.
 */
function expectedFallback(column: SQLiteColumn): Fallback | undefined {
  if (!column.hasDefault) return undefined;
  const value = column.default;
  if (is(value, SQL)) {
    const query = dialect.sqlToQuery(value);
    return query.params.length === 0 ? { sql: query.sql } : { sql: `${query.sql} with params` };
  }
  return { value: value as string | number | boolean };
}

/** Every difference between a table's hand-written columns and drizzle's, one line each. */
function drift(table: SQLiteTable, def: AnyTableDef): string[] {
  const tableName = getTableName(table);
  const problems: string[] = [];
  const at = (property: string) => `${tableName}.${property}`;
  if (def.name !== tableName) problems.push(`${tableName}: table name is "${def.name}" in columns.ts`);

  const drizzleColumns = getTableColumns(table) as Record<string, SQLiteColumn>;
  const expected = Object.keys(drizzleColumns);
  const actual = Object.keys(def.columns);
  for (const property of expected) {
    if (!(property in def.columns)) problems.push(`${at(property)}: in the schema, missing from columns.ts`);
  }
  for (const property of actual) {
    if (!(property in drizzleColumns)) problems.push(`${at(property)}: in columns.ts, not in the schema`);
  }
  const shared = expected.filter((property) => property in def.columns);
  const sharedActual = actual.filter((property) => property in drizzleColumns);
  const misplaced = shared.findIndex((property, i) => sharedActual[i] !== property);
  if (misplaced >= 0) {
    problems.push(
      `${at(shared[misplaced] as string)}: out of order, columns.ts has ${sharedActual.join(", ")}; ` +
        `the schema has ${shared.join(", ")}`,
    );
  }

  for (const property of shared) {
    const column = drizzleColumns[property] as SQLiteColumn;
    const written = def.columns[property] as ColumnDef;
    if (written.name !== column.name) {
      problems.push(
        `${at(property)}: column name is "${written.name}" in columns.ts, "${column.name}" in the schema`,
      );
    }
    const storage = CODECS[column.columnType];
    if (!storage) {
      problems.push(`${at(property)}: column type ${column.columnType} has no codec in columns.ts`);
    } else {
      if (storage.dataType !== column.dataType) {
        problems.push(
          `${at(property)}: ${column.columnType} with data type ${column.dataType} is not supported`,
        );
      }
      if (written.codec !== storage.codec) {
        problems.push(
          `${at(property)}: codec is "${written.codec}" in columns.ts, the schema's ` +
            `${column.columnType} stores "${storage.codec}"`,
        );
      }
    }
    if (column.defaultFn || column.onUpdateFn || column.generated) {
      problems.push(
        `${at(property)}: a $defaultFn, $onUpdateFn or generated column has no fallback in columns.ts`,
      );
      continue;
    }
    const fallback = expectedFallback(column);
    if (show(written.fallback) !== show(fallback)) {
      problems.push(
        `${at(property)}: insert default is ${show(written.fallback)} in columns.ts, ` +
          `${show(fallback)} in the schema`,
      );
    }
  }
  return problems;
}

describe("src/db/columns.ts matches the drizzle schema", () => {
  it.each(TABLES.map(([table, def]) => [getTableName(table), table, def] as const))(
    "%s",
    (_name, table, def) => {
      expect(drift(table, def)).toEqual([]);
      expect(columns.tableDef(table)).toBe(def);
    },
  );

  it("a drifted copy fails naming the table and the property", () => {
    const { deliver: _deliver, ...kept } = columns.runs.columns;
    const altered: AnyTableDef = {
      name: "runs",
      columns: {
        ...kept,
        status: { name: "status", codec: "integer" },
        error: { name: "err", codec: "text" },
        usage: { name: "usage", codec: "text", fallback: { value: "{}" } },
      },
    };
    expect(drift(schema.runs, altered)).toEqual([
      "runs.deliver: in the schema, missing from columns.ts",
      'runs.status: codec is "integer" in columns.ts, the schema\'s SQLiteText stores "text"',
      'runs.error: column name is "err" in columns.ts, "error" in the schema',
      'runs.usage: codec is "text" in columns.ts, the schema\'s SQLiteTextJson stores "json"',
      'runs.usage: insert default is value "{}" in columns.ts, none in the schema',
    ]);

    const { runId, sessionKey, ...rest } = columns.runs.columns;
    const reordered: AnyTableDef = { name: "runs", columns: { sessionKey, runId, ...rest } };
    expect(drift(schema.runs, reordered)).toEqual([
      expect.stringMatching(/^runs\.runId: out of order, columns\.ts has sessionKey, runId, /),
    ]);
  });
});
