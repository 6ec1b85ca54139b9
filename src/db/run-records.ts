/**
 * Named D1 queries behind a connector's run being recorded after its ack (SPEC §4, see
 * session/d1/records.ts): the registry that leads from a run id to its session (`run_prefixes`,
 * keys/run-id.ts) and the records D1 kept refusing (`dead_records`, RPC `records.dead`).
 */
import { and, desc, eq, lt, or } from "drizzle-orm";
import { databaseOfKey, databaseOfRun, readEach } from "./placement";
import { database, type SessionRow, statement } from "./queries";
import { mergeNewest } from "./runs";
import * as schema from "./schema";
import { insertManyQuery, insertQuery } from "./writes";

/**
 * Registers a key's run-id prefix (see schema `runPrefixes`) and reads the key's stored entry,
 * in one round trip.
 */
export async function bindSessionKey(env: Env, key: string, prefix: string): Promise<SessionRow | undefined> {
  const db = database(databaseOfKey(env, key));
  const [, rows] = await db.batch([
    db.insert(schema.runPrefixes).values({ prefix, sessionKey: key }).onConflictDoNothing(),
    db.select().from(schema.sessions).where(eq(schema.sessions.key, key)).limit(1),
  ]);
  return rows[0];
}

/**
 * The session keys whose run ids start with `prefix` (one, but for a hash collision), from the
 * database the prefix names (a key's prefix is registered in its own database).
 */
export async function keysOfRunPrefix(env: Env, prefix: string): Promise<string[]> {
  const db = databaseOfRun(env, prefix);
  if (!db) return [];
  const rows = await database(db)
    .select({ sessionKey: schema.runPrefixes.sessionKey })
    .from(schema.runPrefixes)
    .where(eq(schema.runPrefixes.prefix, prefix))
    .limit(8)
    .all();
  return rows.map((r) => r.sessionKey);
}

export type DeadRecordRow = typeof schema.deadRecords.$inferSelect;

export function insertDeadRecordStatement(db: D1Database, row: DeadRecordRow): D1PreparedStatement {
  return statement(db, insertQuery(schema.deadRecords, row, "nothing"));
}

/** Dead records, newest first, keyset-paged on (createdAt, runId). */
export async function listDeadRecords(
  env: Env,
  f: { limit: number; cursor?: { createdAt: number; runId: string } },
): Promise<DeadRecordRow[]> {
  const d = schema.deadRecords;
  const c = f.cursor;
  const pages = await readEach(env, (db) =>
    database(db)
      .select()
      .from(d)
      .where(
        c
          ? or(lt(d.createdAt, c.createdAt), and(eq(d.createdAt, c.createdAt), lt(d.runId, c.runId)))
          : undefined,
      )
      .orderBy(desc(d.createdAt), desc(d.runId))
      .limit(f.limit)
      .all(),
  );
  return mergeNewest(pages, (r) => r.runId, f.limit);
}

/** How many dead records there are (the operator's `status`). */
export async function countDeadRecords(env: Env): Promise<number> {
  const counts = await readEach(env, (db) =>
    db.prepare(`select count(*) as n from "dead_records"`).first<{ n: number }>(),
  );
  return counts.reduce((sum, row) => sum + (row?.n ?? 0), 0);
}

const ENDED = `excluded."status" in ('ok', 'error', 'aborted', 'timeout', 'budget_exceeded')`;
const STARTS = `excluded."status" = 'running' and "runs"."status" = 'queued'`;
const ifEnded = (column: string) =>
  `"${column}" = case when ${ENDED} then excluded."${column}" else "runs"."${column}" end`;

/**
 * Several runs' records in one statement, each row the run as far as the writer knows it: queued
 * (its accept: created if missing), running (also marks a queued row running), or ended (also
 * sets its end on the row there is). A late write never moves a run back: a queued record leaves
 * a row alone, a running one moves only a queued row, and an end is final.
 */
export function runRecordsStatement(db: D1Database, rows: ReadonlyArray<typeof schema.runs.$inferInsert>) {
  return statement(
    db,
    insertManyQuery(
      schema.runs,
      rows,
      `on conflict ("run_id") do update set
         "status" = case when ${ENDED} or ${STARTS} then excluded."status" else "runs"."status" end,
         "started_at" = case when ${ENDED} then coalesce(excluded."started_at", "runs"."started_at")
           when ${STARTS} then excluded."started_at" else "runs"."started_at" end,
         ${["ended_at", "error", "reply", "usage", "model", "delivered", "timeline"].map(ifEnded).join(", ")}`,
    ),
  );
}
