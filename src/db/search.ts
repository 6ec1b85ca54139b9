/**
 * Transcript search over D1 (SPEC §20 `sessions_search`): the `messages_fts` index that
 * migration 0010 keeps beside `messages` (its triggers index a message in the statement that
 * stores it and unindex it in the one that deletes it), the search itself (one statement per
 * database, bm25 order, the caller's visibility and filters inside the statement, keyset-paged
 * across databases), and the resumable backfill of messages stored before the index.
 */

import { allDatabases, readEach } from "./placement";
import { BACKFILL_LEFT_ROWIDS_SQL, BACKFILL_STEP_SQL } from "./search-backfill";
import type { ListingScope } from "./session-page";

/** A hit as the statement returns it. */
export interface SearchHit {
  sessionKey: string;
  sessionId: string;
  seq: number;
  role: "user" | "assistant";
  timestamp: number;
  agentId: string;
  channel: string | null;
  /** The message's `content` column (JSON parts). */
  content: string;
  /** bm25: lower is better. */
  rank: number;
  /** Which database of `storage.d1` (its index) and the message's rowid there: the keyset's tie-breakers. */
  db: number;
  rowid: number;
}

/** Where the previous page ended: the last hit's order key. */
export interface SearchCursor {
  rank: number;
  timestamp: number;
  db: number;
  rowid: number;
}

export interface SearchFilter {
  /** The FTS5 match expression (transcript/search.ts `searchTerms`). */
  match: string;
  /** The caller's visibility: a hit's session is in one of them (`{}` is every session). */
  scopes: ListingScope[];
  /** Keys never returned (the reserved `unknown`, and `global` unless it is a main session). */
  excludeKeys: string[];
  agentId?: string;
  kinds?: string[];
  /** Every transcript this key ever had. */
  sessionKey?: string;
  roles: Array<"user" | "assistant">;
  since?: number;
  until?: number;
  archived: boolean | "all";
  limit: number;
  cursor?: SearchCursor;
}

/** The select of one database's hits after `cursor` (`db` is that database's index). */
function searchStatement(d1: D1Database, f: SearchFilter, db: number): D1PreparedStatement {
  const where: string[] = ["messages_fts MATCH ?"];
  const params: unknown[] = [f.match];
  const scopes: string[] = [];
  for (const scope of f.scopes) {
    const parts: string[] = [];
    if (scope.keys) {
      parts.push(`s.key IN (SELECT value FROM json_each(?))`);
      params.push(JSON.stringify(scope.keys));
    }
    if (scope.spawnedBy !== undefined) {
      parts.push("s.spawned_by = ?");
      params.push(scope.spawnedBy);
    }
    if (scope.agentId !== undefined) {
      parts.push("s.agent_id = ?");
      params.push(scope.agentId);
    }
    scopes.push(parts.length ? `(${parts.join(" AND ")})` : "1");
  }
  where.push(scopes.length ? `(${scopes.join(" OR ")})` : "0");
  if (f.excludeKeys.length) {
    where.push("t.session_key NOT IN (SELECT value FROM json_each(?))");
    params.push(JSON.stringify(f.excludeKeys));
  }
  if (f.agentId !== undefined) {
    where.push("s.agent_id = ?");
    params.push(f.agentId);
  }
  if (f.kinds?.length) {
    where.push("s.kind IN (SELECT value FROM json_each(?))");
    params.push(JSON.stringify(f.kinds));
  }
  if (f.sessionKey !== undefined) {
    where.push("t.session_key = ?");
    params.push(f.sessionKey);
  }
  if (f.roles.length < 2) {
    where.push("m.role IN (SELECT value FROM json_each(?))");
    params.push(JSON.stringify(f.roles));
  }
  if (f.since !== undefined) {
    where.push("m.timestamp >= ?");
    params.push(f.since);
  }
  if (f.until !== undefined) {
    where.push("m.timestamp <= ?");
    params.push(f.until);
  }
  if (f.archived !== "all") where.push(f.archived ? "s.archived_at IS NOT NULL" : "s.archived_at IS NULL");
  const c = f.cursor;
  if (c) {
    // After the cursor in the order rank ascending, newest first, database, rowid descending.
    const later =
      db < c.db
        ? "m.timestamp < ?"
        : db > c.db
          ? "m.timestamp <= ?"
          : "(m.timestamp < ? OR (m.timestamp = ? AND m.rowid < ?))";
    where.push(`(f.rank > ? OR (f.rank = ? AND ${later}))`);
    params.push(c.rank, c.rank, c.timestamp, ...(db === c.db ? [c.timestamp, c.rowid] : []));
  }
  params.push(f.limit);
  return d1
    .prepare(
      `SELECT t.session_key AS sessionKey, m.session_id AS sessionId, m.seq AS seq, m.role AS role,
         m.timestamp AS timestamp, s.agent_id AS agentId, coalesce(s.last_channel, s.channel) AS channel,
         m.content AS content, f.rank AS rank, m.rowid AS rowid
       FROM messages_fts AS f
       JOIN messages AS m ON m.rowid = f.rowid
       JOIN transcripts AS t ON t.session_id = m.session_id
       JOIN sessions AS s ON s.key = t.session_key
       WHERE ${where.join(" AND ")}
       ORDER BY f.rank, m.timestamp DESC, m.rowid DESC
       LIMIT ?`,
    )
    .bind(...params);
}

/** Best first: bm25 rank, then newest, then database and rowid (the keyset order). */
export function searchOrder(a: SearchHit, b: SearchHit): number {
  return a.rank - b.rank || b.timestamp - a.timestamp || a.db - b.db || b.rowid - a.rowid;
}

/**
 * One page of hits: every database of `storage.d1` answers with its best `limit + 1` after the
 * cursor, merged. bm25 weighs a word by how rare it is in its own database, so a hit's rank
 * is comparable across databases only as far as their vocabularies are alike.
 */
export async function searchMessages(
  env: Env,
  f: SearchFilter,
): Promise<{ hits: SearchHit[]; more: boolean }> {
  const dbs = allDatabases(env);
  const answers = await Promise.all(
    dbs.map(async (d1, db) => {
      const { results } = await searchStatement(d1, { ...f, limit: f.limit + 1 }, db).all<
        Omit<SearchHit, "db">
      >();
      return results.map((r) => ({ ...r, db }));
    }),
  );
  const merged = answers.flat().sort(searchOrder);
  return { hits: merged.slice(0, f.limit), more: merged.length > f.limit };
}

// --- the backfill ------------------------------------------------------------------------------

/** What is left of the backfill, in rowids and in messages to index. */
const BACKFILL_LEFT_SQL = `SELECT upto - through AS rowids, indexed,
  (SELECT count(*) FROM messages AS m, search_backfill AS k
    WHERE k.id = 1 AND m.rowid > k.through AND m.rowid <= k.upto AND m.role IN ('user', 'assistant')) AS pending
  FROM search_backfill WHERE id = 1`;

/**
 * Runs backfill steps on every database until each is done or `maxSteps` steps were taken in
 * it; returns what is left. Each step is one batch (one transaction): an interrupted backfill
 * resumes from its last step.
 */
export async function backfillSearchIndex(
  env: Env,
  maxSteps: number,
): Promise<{ steps: number; pending: number }> {
  let steps = 0;
  let pending = 0;
  for (const db of allDatabases(env)) {
    for (let i = 0; i < maxSteps; i++) {
      const left = await db.prepare(BACKFILL_LEFT_ROWIDS_SQL).first<{
        rowids: number;
      }>();
      if (!left || left.rowids <= 0) break;
      await db.batch(BACKFILL_STEP_SQL.map((q) => db.prepare(q)));
      steps++;
    }
    const left = await db.prepare(BACKFILL_LEFT_SQL).first<{ pending: number }>();
    pending += left?.pending ?? 0;
  }
  return { steps, pending };
}

/** The backfill's progress over every database: messages indexed by it, and left to index. */
export async function searchIndexStatus(env: Env): Promise<{ indexed: number; pending: number }> {
  const rows = await readEach(env, (db) =>
    db.prepare(BACKFILL_LEFT_SQL).first<{ indexed: number; pending: number }>(),
  );
  return {
    indexed: rows.reduce((n, r) => n + (r?.indexed ?? 0), 0),
    pending: rows.reduce((n, r) => n + (r?.pending ?? 0), 0),
  };
}
