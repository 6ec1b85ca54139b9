/**
 * A SessionActor's storage schema: a new actor creates its tables in their current shape at
 * once, and an actor of an earlier schema version migrates to exactly the same shape.
 */
import { runInDurableObject } from "cloudflare:test";
import { expect, it } from "vitest";
import { DeliveryOutbox } from "../../src/delivery/outbox";
import { ActorStore } from "../../src/session/actor-store";
import { RunQueue } from "../../src/session/run-queue";
import { actor } from "./support";

const TABLES = ["kv", "queue", "run_steps", "received", "finished", "outbox", "context", "d1_pending"];

function shapeOf(sql: SqlStorage): Record<string, unknown[]> {
  const shape: Record<string, unknown[]> = {};
  for (const table of TABLES) shape[table] = sql.exec(`PRAGMA table_info(${table})`).toArray();
  return shape;
}

it("creates a new actor's tables in their current shape, the shape an actor of version 1 migrates to", async () => {
  await runInDurableObject(actor("agent:main:schema-check"), (_instance, state) => {
    const sql = state.storage.sql;
    const fresh = shapeOf(sql);
    expect(fresh.queue?.length).toBeGreaterThan(0);
    expect(sql.exec(`SELECT v FROM kv WHERE k = 'schema_version'`).one().v).toBe("5");

    // The same storage as version 1 left it, then opened by this version.
    for (const table of TABLES) sql.exec(`DROP TABLE IF EXISTS ${table}`);
    sql.exec(`CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)`);
    sql.exec(`INSERT INTO kv (k, v) VALUES ('schema_version', '1')`);
    sql.exec(RunQueue.DDL);
    sql.exec(`CREATE TABLE received (run_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL)`);
    sql.exec(`CREATE TABLE finished (run_id TEXT PRIMARY KEY, outcome TEXT NOT NULL, at INTEGER NOT NULL)`);
    sql.exec(DeliveryOutbox.DDL);
    new ActorStore(sql);
    expect(shapeOf(sql)).toEqual(fresh);
    expect(sql.exec(`SELECT v FROM kv WHERE k = 'schema_version'`).one().v).toBe("5");
  });
});
