/**
 * Named D1 queries of the scheduled maintenance (SPEC §11): the sessions due for closing, the
 * guarded updates that close or reschedule them, retention deletes, scheduled-job claims and
 * the maintenance record shown by `status`. Every query is served by an index and bounded by a
 * limit; every write is guarded or keyed so that two overlapping invocations change a row once.
 * Session rows are read from every database (db/placement.ts), each bounded by the limit; jobs and
 * the maintenance record are the deployment's own, in its home database.
 */
import { and, asc, desc, eq, gte, isNull, lte, sql } from "drizzle-orm";
import type { TaskRun } from "./json-columns";
import { groupByDatabase, homeDatabase, readEach } from "./placement";
import { database } from "./queries";
import * as schema from "./schema";

/** Changes made by each statement of a batch, in order. */
async function batchChanges(db: D1Database, statements: D1PreparedStatement[]): Promise<number[]> {
  if (statements.length === 0) return [];
  const results = await db.batch(statements);
  return results.map((r) => r.meta.changes ?? 0);
}

// ---------------------------------------------------------------------------------------------
// Reset sweep

export type DueSession = Pick<
  typeof schema.sessions.$inferSelect,
  | "key"
  | "kind"
  | "chatType"
  | "channel"
  | "lastChannel"
  | "lastThreadId"
  | "sessionStartedAt"
  | "lastInteractionAt"
> & { expiresAt: number };

/**
 * Live sessions whose expiry has passed, oldest expiry first (the partial index `sessions_due`):
 * the oldest `limit` of every database's oldest `limit`.
 */
export async function dueSessions(env: Env, now: number, limit: number): Promise<DueSession[]> {
  const pages = await readEach(env, (db) => dueSessionsOf(db, now, limit));
  if (pages.length === 1) return pages[0] ?? [];
  return pages
    .flat()
    .sort((a, b) => a.expiresAt - b.expiresAt)
    .slice(0, limit);
}

async function dueSessionsOf(db: D1Database, now: number, limit: number): Promise<DueSession[]> {
  const s = schema.sessions;
  const rows = await database(db)
    .select({
      key: s.key,
      kind: s.kind,
      chatType: s.chatType,
      channel: s.channel,
      lastChannel: s.lastChannel,
      lastThreadId: s.lastThreadId,
      sessionStartedAt: s.sessionStartedAt,
      lastInteractionAt: s.lastInteractionAt,
      expiresAt: s.expiresAt,
    })
    .from(s)
    .where(and(isNull(s.expiredAt), lte(s.expiresAt, now)))
    .orderBy(asc(s.expiresAt))
    .limit(limit)
    .all();
  return rows as DueSession[];
}

/** The SQL of `dueSessions`, for checking its query plan. */
export function dueSessionsQuery(env: Env, now: number, limit: number) {
  const s = schema.sessions;
  return database(homeDatabase(env))
    .select({ key: s.key })
    .from(s)
    .where(and(isNull(s.expiredAt), lte(s.expiresAt, now)))
    .orderBy(asc(s.expiresAt))
    .limit(limit)
    .toSQL();
}

export interface ExpiryChange {
  key: string;
  /** The expiry the row was read with: the update applies only if it still holds. */
  was: number;
  /** Close the session at this instant… */
  closeAt?: number;
  /** …or move its expiry (null: it no longer expires). */
  expiresAt?: number | null;
}

/**
 * Applies expiry changes in one batch. Each update holds only while the row still has the
 * expiry it was read with and is not closed, so a concurrent write by the session's actor (a
 * new message moved the expiry) or a second sweep wins or loses cleanly. Returns, per change,
 * whether it applied.
 */
export async function applyExpiryChanges(env: Env, changes: ExpiryChange[]): Promise<boolean[]> {
  const s = schema.sessions;
  const applied = new Map<ExpiryChange, boolean>();
  // One batch per database holding some of the sessions, in parallel.
  await Promise.all(
    groupByDatabase(env, changes, (c) => c.key).map(async ({ db, items }) => {
      const statements = items.map((c) => {
        const set =
          c.closeAt !== undefined
            ? { expiredAt: c.closeAt, expiresAt: c.closeAt }
            : { expiresAt: c.expiresAt ?? null };
        const query = database(db)
          .update(s)
          .set(set)
          .where(and(eq(s.key, c.key), eq(s.expiresAt, c.was), isNull(s.expiredAt)))
          .toSQL();
        return db.prepare(query.sql).bind(...query.params);
      });
      const counts = await batchChanges(db, statements);
      for (const [j, c] of items.entries()) applied.set(c, (counts[j] ?? 0) > 0);
    }),
  );
  return changes.map((c) => applied.get(c) ?? false);
}

// ---------------------------------------------------------------------------------------------
// Retention

/**
 * Deletes up to `limit` transcript messages older than `before` in each database: how many, the
 * transcripts they belonged to, and whether some database deleted its whole limit (so more may
 * be left). A transcript's messages are appended in time order, so those older than `before`
 * are a prefix of its seq order: each transcript begun before `before` (index
 * `transcripts_created`) loses the messages before its first one at or after `before` (the
 * primary key, read from the start; a prefix deleted already is not read again). No index on
 * the messages' time is kept for this: every message would write a row to it.
 */
export async function deleteOldMessages(
  env: Env,
  before: number,
  limit: number,
): Promise<{ deleted: number; sessionIds: string[]; more: boolean }> {
  const answers = await readEach(env, (db) =>
    db
      .prepare(
        `DELETE FROM messages WHERE rowid IN (
           SELECT m.rowid FROM transcripts t JOIN messages m ON m.session_id = t.session_id
           WHERE t.created_at < ?1 AND m.seq < COALESCE((
             SELECT k.seq FROM messages k WHERE k.session_id = t.session_id AND k.timestamp >= ?1
             ORDER BY k.seq LIMIT 1), 9007199254740991)
           LIMIT ?2)
         RETURNING session_id`,
      )
      .bind(before, limit)
      .all<{ session_id: string }>(),
  );
  const rows = answers.flatMap((a) => a.results);
  return {
    deleted: rows.length,
    sessionIds: [...new Set(rows.map((r) => r.session_id))],
    more: answers.some((a) => a.results.length >= limit),
  };
}

/**
 * Deletes the transcript records (sessionId → key) among `sessionIds` that have no message left
 * and are no session's current sessionId: their export would be empty. Chunked by 90 ids.
 */
export async function deleteEmptyTranscripts(env: Env, sessionIds: string[]): Promise<number> {
  if (sessionIds.length === 0) return 0;
  // Each database deletes those of the ids it holds (a transcript's id does not name its key).
  const changes = await readEach(env, (db) => {
    const statements: D1PreparedStatement[] = [];
    for (let i = 0; i < sessionIds.length; i += 90) {
      const chunk = sessionIds.slice(i, i + 90);
      statements.push(
        db
          .prepare(
            `DELETE FROM transcripts WHERE session_id IN (${chunk.map(() => "?").join(", ")})
           AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_id = transcripts.session_id)
           AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.session_id = transcripts.session_id)`,
          )
          .bind(...chunk),
      );
    }
    return batchChanges(db, statements);
  });
  return changes.flat().reduce((a, b) => a + b, 0);
}

/** Per table: the rows retention may delete once older than the cutoff, and the index that finds them. */
const RETAINED = {
  // Finished runs only (index runs_recent: created_at, run_id).
  runs: `DELETE FROM runs WHERE rowid IN (SELECT rowid FROM runs
           WHERE status IN ('ok', 'error', 'aborted', 'timeout', 'budget_exceeded') AND created_at < ?1 LIMIT ?2)`,
  // Settled deliveries only (index deliveries_recent: created_at, delivery_id).
  deliveries: `DELETE FROM deliveries WHERE rowid IN (SELECT rowid FROM deliveries
           WHERE status IN ('delivered', 'dead') AND created_at < ?1 LIMIT ?2)`,
  // Scheduled-job claims (index job_runs_claimed).
  jobRuns: `DELETE FROM job_runs WHERE rowid IN (SELECT rowid FROM job_runs WHERE claimed_at < ?1 LIMIT ?2)`,
} as const;

export type RetainedTable = keyof typeof RETAINED;

/**
 * Deletes up to `limit` rows of each table older than `before` in each database; returns the
 * count per table, and whether some database deleted its whole limit of a table.
 */
export async function deleteOldRows(
  env: Env,
  before: number,
  limit: number,
): Promise<{ deleted: Record<RetainedTable, number>; more: boolean }> {
  const tables = Object.keys(RETAINED) as RetainedTable[];
  const changes = await readEach(env, (db) =>
    batchChanges(
      db,
      tables.map((t) => db.prepare(RETAINED[t]).bind(before, limit)),
    ),
  );
  const deleted = Object.fromEntries(
    tables.map((t, i) => [t, changes.reduce((sum, c) => sum + (c[i] ?? 0), 0)]),
  ) as Record<RetainedTable, number>;
  // Each database's work is what `limit` bounds: one that deleted its whole limit may have more.
  return { deleted, more: changes.some((c) => c.some((n) => n >= limit)) };
}

// ---------------------------------------------------------------------------------------------
// Scheduled jobs

export type JobRun = typeof schema.jobRuns.$inferSelect;

/** Claims a job's scheduled minute; false when another invocation claimed it first. */
export async function claimJobRun(env: Env, claim: Omit<JobRun, "skipped" | "queuedAt">): Promise<boolean> {
  const result = await database(homeDatabase(env))
    .insert(schema.jobRuns)
    .values(claim)
    .onConflictDoNothing()
    .run();
  return (result.meta.changes ?? 0) > 0;
}

/** Records how a claimed run went: accepted by its session at `queuedAt`, or skipped and why. */
export async function settleJobRun(
  env: Env,
  claim: Pick<JobRun, "jobId" | "scheduledFor">,
  outcome: { queuedAt: number } | { skipped: string },
): Promise<void> {
  const j = schema.jobRuns;
  await database(homeDatabase(env))
    .update(j)
    .set(outcome)
    .where(and(eq(j.jobId, claim.jobId), eq(j.scheduledFor, claim.scheduledFor)))
    .run();
}

/**
 * Claims made since `since` whose run was neither queued nor skipped: the invocation that
 * claimed them stopped in between. Index `job_runs_claimed`.
 */
export async function unsettledJobRuns(env: Env, since: number): Promise<JobRun[]> {
  const j = schema.jobRuns;
  return database(homeDatabase(env))
    .select()
    .from(j)
    .where(and(gte(j.claimedAt, since), isNull(j.queuedAt), isNull(j.skipped)))
    .limit(100)
    .all();
}

/** A job's newest claimed run (the primary key serves it). */
export async function lastJobRun(env: Env, jobId: string): Promise<JobRun | undefined> {
  const j = schema.jobRuns;
  return database(homeDatabase(env))
    .select()
    .from(j)
    .where(eq(j.jobId, jobId))
    .orderBy(desc(j.scheduledFor))
    .limit(1)
    .get();
}

// ---------------------------------------------------------------------------------------------
// The maintenance record

/** Records each task's run; a run that changed nothing keeps the previous `lastWork`. */
export async function recordTaskRuns(env: Env, runs: Record<string, TaskRun>): Promise<void> {
  const m = schema.maintenance;
  const home = homeDatabase(env);
  const db = database(home);
  const statements = Object.entries(runs).map(([task, run]) => {
    const query = db
      .insert(m)
      .values({ task, lastRunAt: run.at, lastRun: run, lastWork: run.worked ? run : null })
      .onConflictDoUpdate({
        target: m.task,
        set: {
          lastRunAt: run.at,
          lastRun: run,
          lastWork: run.worked ? run : sql`${m.lastWork}`,
        },
      })
      .toSQL();
    return home.prepare(query.sql).bind(...query.params);
  });
  await batchChanges(home, statements);
}

export async function readTaskRuns(env: Env) {
  return database(homeDatabase(env)).select().from(schema.maintenance).all();
}
