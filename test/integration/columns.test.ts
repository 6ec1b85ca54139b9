/**
 * src/db/columns.ts derives from the drizzle schema the column names, storage and insert
 * defaults that the plain statements of reads.ts and writes.ts use. These cases hold what it
 * derives against the tables the migrations build in D1 (what a deployment really has): the
 * same tables, and per column the same name, SQL type, NOT NULL and default. A schema change
 * without its migration fails here, naming the table and the column. A JSON column reads
 * through its schema (db/json-columns.ts) on both read paths.
 */
import { env } from "cloudflare:workers";
import { getTableColumns, getTableName, is, sql } from "drizzle-orm";
import { blob, integer, type SQLiteColumn, SQLiteTable, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { type Codec, type Fallback, type TableDef, tableDef } from "../../src/db/columns";
import { json } from "../../src/db/json-columns";
import { databaseOfKey } from "../../src/db/placement";
import { getSession, getSessionBySessionId, upsertSessionStatement } from "../../src/db/queries";
import * as schema from "../../src/db/schema";
import { newSessionRow } from "../../src/session/entry/rules";

const TABLES = (Object.values(schema) as unknown[]).filter((value): value is SQLiteTable =>
  is(value, SQLiteTable),
);

interface TableInfo {
  name: string;
  type: string;
  notnull: number;
  dflt_value: string | null;
}

/** The SQL type each codec is stored as. */
const SQL_TYPES: Record<Codec, string> = {
  text: "text",
  json: "text",
  integer: "integer",
  real: "real",
  boolean: "integer",
};

/** A fallback as the migrations' DDL writes it (`DEFAULT …`), null for none. */
function ddlDefault(fallback: Fallback | undefined): string | null {
  if (fallback === undefined) return null;
  if ("sql" in fallback) return fallback.sql;
  const { value } = fallback;
  return typeof value === "string" ? `'${value.replaceAll("'", "''")}'` : String(value);
}

/** Every difference between a table's derived columns and D1's table, one line each. */
function drift(def: TableDef, notNull: Record<string, boolean>, info: TableInfo[]): string[] {
  const problems: string[] = [];
  const byName = new Map(info.map((column) => [column.name, column]));
  const derived = new Set(Object.values(def.columns).map((column) => column.name));
  for (const column of info) {
    if (!derived.has(column.name)) problems.push(`${def.name}.${column.name}: in D1, not in the schema`);
  }
  for (const [property, column] of Object.entries(def.columns)) {
    const at = `${def.name}.${property}`;
    const stored = byName.get(column.name);
    if (!stored) {
      problems.push(`${at}: column "${column.name}" is not in D1`);
      continue;
    }
    const type = stored.type.toLowerCase();
    if (type !== SQL_TYPES[column.codec]) {
      problems.push(`${at}: ${column.codec} is stored as ${SQL_TYPES[column.codec]}, D1 has ${type}`);
    }
    if (Boolean(stored.notnull) !== notNull[property]) {
      problems.push(
        `${at}: NOT NULL is ${notNull[property]} in the schema, ${Boolean(stored.notnull)} in D1`,
      );
    }
    const expected = ddlDefault(column.fallback);
    if (stored.dflt_value !== expected) {
      problems.push(
        `${at}: default is ${expected ?? "none"} in the schema, ${stored.dflt_value ?? "none"} in D1`,
      );
    }
  }
  return problems;
}

const notNullOf = (table: SQLiteTable) =>
  Object.fromEntries(
    Object.entries(getTableColumns(table) as Record<string, SQLiteColumn>).map(([k, c]) => [k, c.notNull]),
  );

async function tableInfo(name: string): Promise<TableInfo[]> {
  return (await env.DB.prepare(`PRAGMA table_info("${name}")`).all<TableInfo>()).results;
}

describe("the schema's columns (src/db/columns.ts) are the tables the migrations build", () => {
  it("the same tables", async () => {
    // The search index's own tables (migration 0010: the FTS5 table, its shadow tables and the
    // backfill's progress) are read by plain SQL (db/search.ts), not through the schema.
    const { results } = await env.DB.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '\\_%' ESCAPE '\\' AND name != 'd1_migrations' AND name NOT LIKE 'messages_fts%' AND name != 'search_backfill' ORDER BY name",
    ).all<{ name: string }>();
    expect(results.map((r) => r.name)).toEqual(TABLES.map((t) => getTableName(t)).sort());
  });

  it.each(TABLES.map((table) => [getTableName(table), table] as const))("%s", async (name, table) => {
    expect(drift(tableDef(table), notNullOf(table), await tableInfo(name))).toEqual([]);
  });

  it("a difference fails naming the table and the property", async () => {
    const def = tableDef(schema.runs);
    const { deliver: _deliver, ...kept } = def.columns;
    const altered: TableDef = {
      name: "runs",
      columns: {
        ...kept,
        status: { name: "status", codec: "integer", decode: null },
        error: { name: "err", codec: "text", decode: null },
        usage: { ...def.columns.usage!, fallback: { value: "{}" } },
      },
    };
    expect(drift(altered, notNullOf(schema.runs), await tableInfo("runs"))).toEqual([
      "runs.error: in D1, not in the schema",
      "runs.deliver: in D1, not in the schema",
      "runs.status: integer is stored as integer, D1 has text",
      'runs.error: column "err" is not in D1',
      "runs.usage: default is '{}' in the schema, none in D1",
    ]);
  });
});

describe("tableDef", () => {
  it("derives names, storage and defaults from the drizzle columns, in declaration order", () => {
    const t = sqliteTable("t", {
      id: text("id").primaryKey(),
      n: integer("n_col").notNull().default(0),
      flag: integer("flag", { mode: "boolean" }).default(false),
      body: json("body", z.array(z.string())),
      state: text("state").default("idle"),
      at: integer("at").default(sql`(unixepoch() * 1000)`),
    });
    const def = tableDef(t);
    expect(def).toEqual({
      name: "t",
      columns: {
        id: { name: "id", codec: "text", decode: null },
        n: { name: "n_col", codec: "integer", decode: null, fallback: { value: 0 } },
        flag: { name: "flag", codec: "boolean", decode: expect.any(Function), fallback: { value: false } },
        body: { name: "body", codec: "json", decode: expect.any(Function) },
        state: { name: "state", codec: "text", decode: null, fallback: { value: "idle" } },
        at: { name: "at", codec: "integer", decode: null, fallback: { sql: "(unixepoch() * 1000)" } },
      },
    });
    expect(def.columns.flag?.decode?.(1)).toBe(true);
    expect(def.columns.body?.decode?.('["a"]')).toEqual(["a"]);
    expect(() => def.columns.body?.decode?.("[1]")).toThrow("body holds JSON its schema refuses at 0:");
    expect(Object.keys(tableDef(schema.sessions).columns)).toEqual(
      Object.keys(getTableColumns(schema.sessions)),
    );
  });

  it("refuses a column its statements cannot store, naming it", () => {
    const measured = sqliteTable("measured", { id: text("id"), data: blob("data") });
    expect(() => tableDef(measured)).toThrow("measured.data: a SQLiteBlobBuffer column is not supported");
    // JSON without a schema would be read unchecked: JSON columns are json-columns.ts's json().
    const loose = sqliteTable("loose", { id: text("id"), body: text("body", { mode: "json" }) });
    expect(() => tableDef(loose)).toThrow("loose.body: a SQLiteTextJson column is not supported");
  });
});

describe("a JSON column reads through its schema", () => {
  it("a stored value its schema refuses fails naming the column, through plain reads and drizzle alike", async () => {
    const key = "agent:main:json-columns";
    const row = newSessionRow(
      key,
      { agentId: "main", kind: "main", chatType: "direct", channel: null },
      1,
      "s-json",
    );
    const db = databaseOfKey(env, key);
    await upsertSessionStatement(db, {
      ...row,
      deliveryContext: { channel: "telegram", to: "42", accountId: "bot" },
    }).run();
    expect((await getSession(env, key))?.deliveryContext).toEqual({
      channel: "telegram",
      to: "42",
      accountId: "bot",
    });

    await db
      .prepare(`UPDATE sessions SET delivery_context = '{"channel":"telegram"}' WHERE key = ?`)
      .bind(key)
      .run();
    await expect(getSession(env, key)).rejects.toThrow(
      "delivery_context holds JSON its schema refuses at to:",
    );
    await expect(getSessionBySessionId(env, "s-json")).rejects.toThrow(
      /delivery_context holds JSON its schema refuses/,
    );
  });
});
