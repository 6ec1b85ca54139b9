/**
 * A SessionActor's storage schema: a new actor creates its tables in their current shape at
 * once, and an actor of an earlier schema version migrates to exactly the same shape.
 */
import { runInDurableObject } from "cloudflare:test";
import { expect, it } from "vitest";
import { ActorStore } from "../../src/session/storage/store";
import { actor } from "./support";

const TABLES = ["kv", "queue", "run_steps", "run_ids", "outbox", "context", "d1_pending", "signals"];

/** Each table's columns, whether it has a rowid, and its indexes (what a write of a row costs). */
function shapeOf(sql: SqlStorage): Record<string, unknown> {
  const shape: Record<string, unknown> = {};
  for (const table of TABLES) {
    const ddl = sql
      .exec<{ sql: string }>(`SELECT sql FROM sqlite_master WHERE name = ?`, table)
      .toArray()[0]?.sql;
    shape[table] = {
      columns: sql.exec(`PRAGMA table_info(${table})`).toArray(),
      withoutRowid: /WITHOUT ROWID\s*$/i.test(ddl ?? ""),
      indexes: sql
        .exec<{ unique: number; origin: string; partial: number }>(`PRAGMA index_list(${table})`)
        .toArray()
        .map((i) => `${i.origin} unique=${i.unique} partial=${i.partial}`)
        .sort(),
    };
  }
  // SQLite's and the platform's own tables aside (an empty sqlite_sequence outlives AUTOINCREMENT).
  shape.tables = sql
    .exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
    .toArray()
    .map((t) => t.name)
    .filter((name) => !name.startsWith("_") && name !== "sqlite_sequence");
  return shape;
}

it("creates a new actor's tables in their current shape, the shape an actor of version 1 migrates to", async () => {
  await runInDurableObject(actor("agent:main:schema-check"), (_instance, state) => {
    const sql = state.storage.sql;
    const fresh = shapeOf(sql);
    expect(fresh.queue).toMatchObject({ withoutRowid: false, indexes: [] });
    expect(fresh.run_ids).toMatchObject({ withoutRowid: true });
    expect(sql.exec(`SELECT v FROM kv WHERE k = 'schema_version'`).one().v).toBe("9");

    // The same storage as version 1 left it, then opened by this version.
    for (const table of [...TABLES, "received", "finished"]) sql.exec(`DROP TABLE IF EXISTS ${table}`);
    sql.exec(`CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)`);
    sql.exec(`INSERT INTO kv (k, v) VALUES ('schema_version', '1')`);
    sql.exec(`CREATE TABLE queue (
      pos INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, state TEXT NOT NULL,
      spec TEXT NOT NULL, checkpoint TEXT, enqueued_at INTEGER NOT NULL)`);
    sql.exec(`CREATE TABLE received (run_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL)`);
    sql.exec(`CREATE TABLE finished (run_id TEXT PRIMARY KEY, outcome TEXT NOT NULL, at INTEGER NOT NULL)`);
    sql.exec(`CREATE TABLE outbox (
      delivery_id TEXT PRIMARY KEY, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_at INTEGER NOT NULL)`);
    sql.exec(`INSERT INTO received (run_id, result, at) VALUES ('r-1', '{"a":1}', 1), ('r-2', '{"a":2}', 2)`);
    sql.exec(`INSERT INTO finished (run_id, outcome, at) VALUES ('r-1', '{"o":1}', 5)`);
    sql.exec(`INSERT INTO queue (run_id, state, spec, enqueued_at) VALUES ('q-1', 'queued', '{}', 3)`);
    new ActorStore(sql);
    expect(shapeOf(sql)).toEqual(fresh);
    expect(sql.exec(`SELECT v FROM kv WHERE k = 'schema_version'`).one().v).toBe("9");
    // The rows came along: accepts and outcomes in one row per run id, the queue as it was.
    expect(sql.exec(`SELECT run_id, result, outcome, at FROM run_ids ORDER BY run_id`).toArray()).toEqual([
      { run_id: "r-1", result: '{"a":1}', outcome: '{"o":1}', at: 5 },
      { run_id: "r-2", result: '{"a":2}', outcome: null, at: 2 },
    ]);
    expect(sql.exec(`SELECT pos, run_id FROM queue`).toArray()).toEqual([{ pos: 1, run_id: "q-1" }]);
  });
});
