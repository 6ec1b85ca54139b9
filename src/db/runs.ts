/**
 * Named D1 queries of runs and deliveries (sessions: queries.ts). A run's rows live in its
 * session's database (db/placement.ts): reads by run id go to the database the id names,
 * listings read every database and merge on the same keyset cursor; writes are idempotent
 * (primary keys, `INSERT OR IGNORE`, upserts) so that retries never duplicate rows.
 */
import { and, desc, eq, inArray, lt, or, type SQL, sql } from "drizzle-orm";
import { allDatabases, databaseOfKey, databaseOfRun, groupByDatabase, readEach } from "./placement";
import { type DeliveryRow, database, firstOf, type RunRow, statement } from "./queries";
import { col, selectRows } from "./reads";
import * as schema from "./schema";
import { insertManyQuery, insertQuery, updateQuery } from "./writes";

// ---------------------------------------------------------------------------------------------
// Runs

/** Creates the run row if missing and marks it running (one statement, idempotent). */
export function startRunStatement(
  db: D1Database,
  run: typeof schema.runs.$inferInsert & { startedAt: number },
) {
  return statement(
    db,
    insertQuery(
      schema.runs,
      { ...run, status: "running" },
      { target: schema.runs.runId, set: { status: "running", startedAt: run.startedAt } },
    ),
  );
}

export function updateRunStatement(
  db: D1Database,
  runId: string,
  fields: Partial<Omit<typeof schema.runs.$inferInsert, "runId">>,
): D1PreparedStatement {
  return statement(db, updateQuery(schema.runs, fields, { column: schema.runs.runId, value: runId }));
}

/**
 * A run's row: from the database its id names (keys/run-id.ts), else (an id made from a seed
 * alone, by a tool, a job or an idempotency key) from whichever database holds it.
 */
export async function getRun(env: Env, runId: string): Promise<RunRow | undefined> {
  const read = (db: D1Database) =>
    database(db).select().from(schema.runs).where(eq(schema.runs.runId, runId)).get();
  const named = databaseOfRun(env, runId);
  const row = named ? await read(named) : undefined;
  if (row || allDatabases(env).length === 1) return row;
  return firstOf(env, (db) => (db === named ? Promise.resolve(undefined) : read(db)));
}

const ACTIVE_STATUSES = ["queued", "running"];
/** The condition runs_active is partial on, as SQLite must find it in a query to use the index. */
const ACTIVE_RUNS = `"runs"."status" IN ('queued', 'running')`;
/** The condition deliveries_status_recent is partial on. */
const NOT_DELIVERED = `"deliveries"."status" != 'delivered'`;
/** The condition deliveries_due is partial on. */
const OWED_DELIVERIES = `"deliveries"."status" IN ('pending', 'retrying')`;

/**
 * Runs newest first (ties: runId descending), keyset-paged on (createdAt, runId), optionally of
 * one status and/or one session (indexes runs_recent, runs_active for runs not ended yet,
 * runs_session).
 */
export async function listRuns(
  env: Env,
  f: { status?: string; sessionKey?: string; limit: number; cursor?: { createdAt: number; runId: string } },
): Promise<RunRow[]> {
  const r = schema.runs;
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.status) {
    where.push(`${col(r, "status")} = ?`);
    params.push(f.status);
    // The term runs_active is partial on, so a query for runs not ended yet can use it.
    if (ACTIVE_STATUSES.includes(f.status)) where.push(ACTIVE_RUNS);
  }
  if (f.sessionKey) {
    where.push(`${col(r, "sessionKey")} = ?`);
    params.push(f.sessionKey);
  }
  if (f.cursor) {
    const [c, id] = [col(r, "createdAt"), col(r, "runId")];
    where.push(`(${c} < ? or (${c} = ? and ${id} < ?))`);
    params.push(f.cursor.createdAt, f.cursor.createdAt, f.cursor.runId);
  }
  const read = (db: D1Database) =>
    selectRows(
      db,
      r,
      `${where.length ? `where ${where.join(" and ")} ` : ""}order by ${col(r, "createdAt")} desc, ${col(r, "runId")} desc limit ?`,
      [...params, f.limit],
    );
  if (f.sessionKey) return read(databaseOfKey(env, f.sessionKey));
  return mergeNewest(await readEach(env, read), (x) => x.runId, f.limit);
}

/** The delivery kinds a run's own delivery can have (its id is `<runId>:<kind>`). */
const RUN_DELIVERY_KINDS = ["reply", "notice", "announce"] as const;

/**
 * `delivered` of ended runs as their deliveries' rows say it (a run's row keeps only `false`
 * for a reply send policy blocked; the outcome of its attempts is its delivery's): true once
 * delivered, false once dead, null while owed or not recorded yet. One read per database.
 */
export async function withDeliveryOutcomes<R extends RunRow>(env: Env, rows: R[]): Promise<R[]> {
  const open = rows.filter((r) => r.delivered === null && r.deliver);
  if (open.length === 0) return rows;
  const byDatabase = new Map<D1Database, string[]>();
  for (const r of open) {
    const db = databaseOfKey(env, r.sessionKey);
    const ids = byDatabase.get(db) ?? [];
    for (const kind of RUN_DELIVERY_KINDS) ids.push(`${r.runId}:${kind}`);
    byDatabase.set(db, ids);
  }
  const statuses = new Map<string, string>();
  await Promise.all(
    [...byDatabase].map(async ([db, ids]) => {
      for (let i = 0; i < ids.length; i += 90) {
        const d = schema.deliveries;
        const found = await database(db)
          .select({ deliveryId: d.deliveryId, status: d.status })
          .from(d)
          .where(inArray(d.deliveryId, ids.slice(i, i + 90)))
          .all();
        for (const f of found) statuses.set(f.deliveryId.slice(0, f.deliveryId.lastIndexOf(":")), f.status);
      }
    }),
  );
  return rows.map((r) => {
    if (r.delivered !== null || !r.deliver) return r;
    const status = statuses.get(r.runId);
    return status === "delivered"
      ? { ...r, delivered: true }
      : status === "dead"
        ? { ...r, delivered: false }
        : r;
  });
}

export async function getRunByIdempotencyKey(env: Env, key: string): Promise<RunRow | undefined> {
  return firstOf(env, (db) =>
    database(db).select().from(schema.runs).where(eq(schema.runs.idempotencyKey, key)).get(),
  );
}

// ---------------------------------------------------------------------------------------------
// Deliveries

/** The deliveries of a run's own reply, notice or announcement (its timeline's delivery spans). */
export async function deliveriesOfRun(
  env: Env,
  run: { runId: string; sessionKey: string },
): Promise<DeliveryRow[]> {
  const d = schema.deliveries;
  return database(databaseOfKey(env, run.sessionKey))
    .select()
    .from(d)
    .where(
      inArray(
        d.deliveryId,
        RUN_DELIVERY_KINDS.map((kind) => `${run.runId}:${kind}`),
      ),
    )
    .all();
}

export async function getDelivery(env: Env, deliveryId: string): Promise<DeliveryRow | undefined> {
  return firstOf(env, (db) =>
    database(db).select().from(schema.deliveries).where(eq(schema.deliveries.deliveryId, deliveryId)).get(),
  );
}

/** Deliveries, several in one statement; one already recorded (by id) stays as it is. */
export function insertDeliveriesStatement(
  db: D1Database,
  rows: ReadonlyArray<typeof schema.deliveries.$inferInsert>,
): D1PreparedStatement {
  return statement(db, insertManyQuery(schema.deliveries, rows));
}

export function insertDeliveryStatement(
  db: D1Database,
  row: typeof schema.deliveries.$inferInsert,
): D1PreparedStatement {
  return statement(db, insertQuery(schema.deliveries, row, "nothing"));
}

/**
 * A delivery row with the outcome of an attempt: inserted when the row is not written yet (a
 * late attempt can settle before the run's finalize batch), else its state updated.
 */
export function recordDeliveryStatement(
  db: D1Database,
  row: typeof schema.deliveries.$inferInsert,
  state: Pick<
    typeof schema.deliveries.$inferInsert,
    "status" | "attempts" | "updatedAt" | "nextAttemptAt" | "lastError" | "deliveredAt" | "partsSent"
  >,
): D1PreparedStatement {
  return statement(
    db,
    insertQuery(
      schema.deliveries,
      { ...row, ...state },
      { target: schema.deliveries.deliveryId, set: state },
    ),
  );
}

/** The state columns a recorded delivery outcome sets. */
const OUTCOME_COLUMNS = [
  "status",
  "attempts",
  "updated_at",
  "next_attempt_at",
  "last_error",
  "delivered_at",
  "parts_sent",
];

/** Several deliveries with the outcome of their latest attempt (as `recordDeliveryStatement`), in one statement. */
export function recordDeliveriesStatement(
  db: D1Database,
  rows: ReadonlyArray<typeof schema.deliveries.$inferInsert>,
): D1PreparedStatement {
  return statement(
    db,
    insertManyQuery(
      schema.deliveries,
      rows,
      `on conflict ("delivery_id") do update set ${OUTCOME_COLUMNS.map((c) => `"${c}" = excluded."${c}"`).join(", ")}`,
    ),
  );
}

export async function listDeliveries(
  env: Env,
  f: {
    status?: string;
    sessionKey?: string;
    limit: number;
    cursor?: { createdAt: number; deliveryId: string };
  },
): Promise<DeliveryRow[]> {
  const d = schema.deliveries;
  const where: (SQL | undefined)[] = [];
  if (f.status) where.push(eq(d.status, f.status));
  // Any status but delivered: the term deliveries_status_recent is partial on.
  if (f.status && f.status !== "delivered") where.push(sql.raw(NOT_DELIVERED));
  if (f.sessionKey) where.push(eq(d.sessionKey, f.sessionKey));
  if (f.cursor) {
    where.push(
      or(
        lt(d.createdAt, f.cursor.createdAt),
        and(eq(d.createdAt, f.cursor.createdAt), lt(d.deliveryId, f.cursor.deliveryId)),
      ),
    );
  }
  const read = (db: D1Database) =>
    database(db)
      .select()
      .from(d)
      .where(and(...where))
      .orderBy(desc(d.createdAt), desc(d.deliveryId))
      .limit(f.limit)
      .all();
  if (f.sessionKey) return read(databaseOfKey(env, f.sessionKey));
  return mergeNewest(await readEach(env, read), (x) => x.deliveryId, f.limit);
}

/** Deliveries still owed whose next attempt is overdue (the cron backstop for lost alarms). */
export async function overdueDeliveries(env: Env, before: number, limit: number): Promise<DeliveryRow[]> {
  const d = schema.deliveries;
  const found = await readEach(env, (db) =>
    database(db)
      .select()
      .from(d)
      .where(and(sql.raw(OWED_DELIVERIES), lt(d.nextAttemptAt, before)))
      .limit(limit)
      .all(),
  );
  return found.flat();
}

/**
 * The newest `limit` of several databases' pages, each ordered by (createdAt, id) descending: a
 * page from the same keyset cursor in each, so the merged page is the one a single database
 * holding all rows would answer.
 */
export function mergeNewest<T extends { createdAt: number }>(
  pages: T[][],
  idOf: (row: T) => string,
  limit: number,
): T[] {
  if (pages.length === 1) return pages[0] ?? [];
  const rows = pages.flat();
  rows.sort((a, b) => b.createdAt - a.createdAt || (idOf(a) < idOf(b) ? 1 : idOf(a) > idOf(b) ? -1 : 0));
  return rows.length > limit ? rows.slice(0, limit) : rows;
}

/** Runs left queued/running for a while: their actor is nudged by cron in case an alarm was lost. */
export async function staleActiveRuns(env: Env, before: number, limit: number) {
  const r = schema.runs;
  const found = await readEach(env, (db) =>
    database(db)
      .select({ runId: r.runId, sessionKey: r.sessionKey })
      .from(r)
      .where(and(sql.raw(ACTIVE_RUNS), lt(r.createdAt, before)))
      .limit(limit)
      .all(),
  );
  return found.flat();
}

/** A sub-agent's task run (`trigger` spawn) as `subagents list` shows it. */
export interface SpawnedRun {
  runId: string;
  sessionKey: string;
  status: string;
  createdAt: number;
  startedAt: number | null;
  endedAt: number | null;
  /** The child transcript's first message (`content` JSON): the task. */
  task: string | null;
}

/**
 * The task runs of `children` (sub-agent sessions and their current transcripts), with each
 * task's text, one statement per database holding some of them (`runs_session` and the
 * messages' primary key serve it).
 */
export async function spawnedRuns(
  env: Env,
  children: ReadonlyArray<{ key: string; sessionId: string }>,
): Promise<SpawnedRun[]> {
  if (children.length === 0) return [];
  const answers = await Promise.all(
    groupByDatabase(env, children, (c) => c.key).map(({ db, items }) =>
      db
        .prepare(
          `SELECT r.run_id AS runId, r.session_key AS sessionKey, r.status AS status, r.created_at AS createdAt,
             r.started_at AS startedAt, r.ended_at AS endedAt,
             (SELECT m.content FROM messages AS m WHERE m.session_id = c.value ->> 1 ORDER BY m.seq LIMIT 1) AS task
           FROM json_each(?) AS c JOIN runs AS r ON r.session_key = c.value ->> 0 AND r.trigger = 'spawn'`,
        )
        .bind(JSON.stringify(items.map((c) => [c.key, c.sessionId])))
        .all<SpawnedRun>(),
    ),
  );
  return answers.flatMap((a) => a.results);
}
