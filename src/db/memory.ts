/**
 * Named D1 queries of agent memory (SPEC §5): notes stored per agent, written in place by key or
 * added, and read newest first with an optional substring filter. Every write is one statement
 * that checks the per-agent cap itself, so two concurrent writers can never pass it together
 * (D1 runs one statement at a time). Queries are served by `memories_agent_recent` and
 * `memories_agent_key` (schema.ts).
 */
import { and, desc, eq, type SQL, sql } from "drizzle-orm";
import { homeDatabase } from "./placement";
import { database } from "./queries";
import * as schema from "./schema";

/**
 * Notes one agent may keep. Bounds what a single agent can store and what counting its notes
 * costs (the cap check counts them on every new note); replacing a keyed note is always allowed.
 */
export const MAX_NOTES_PER_AGENT = 500;
/** The most notes one read returns. */
export const MAX_READ_LIMIT = 50;

export type MemoryRow = typeof schema.memories.$inferSelect;

export interface MemoryWrite {
  agentId: string;
  /** With a key, the agent's note of that key is replaced (created when missing). */
  key?: string;
  text: string;
  /** The session writing the note. */
  sessionKey?: string;
  now: number;
  /** Overrides MAX_NOTES_PER_AGENT (tests). */
  cap?: number;
}

export type MemoryWriteResult = { id: string; key: string | null; created: boolean } | { full: true };

/**
 * The insert runs only while the agent is under the cap, or, for a key, also when that key
 * already exists (then ON CONFLICT turns it into an in-place update keeping id and created_at).
 * The conflict target repeats the partial index's WHERE so SQLite matches `memories_agent_key`.
 * `INSERT … SELECT … WHERE` also resolves SQLite's parsing ambiguity before ON CONFLICT.
 */
const INSERT_KEYED = `INSERT INTO memories (id, agent_id, key, text, created_at, updated_at, session_key)
  SELECT ?1, ?2, ?3, ?4, ?5, ?5, ?6
  WHERE (SELECT COUNT(*) FROM memories WHERE agent_id = ?2) < ?7
     OR EXISTS (SELECT 1 FROM memories WHERE agent_id = ?2 AND key = ?3)
  ON CONFLICT (agent_id, key) WHERE key IS NOT NULL
  DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at, session_key = excluded.session_key
  RETURNING id`;

const INSERT_NOTE = `INSERT INTO memories (id, agent_id, key, text, created_at, updated_at, session_key)
  SELECT ?1, ?2, NULL, ?3, ?4, ?4, ?5
  WHERE (SELECT COUNT(*) FROM memories WHERE agent_id = ?2) < ?6
  RETURNING id`;

/**
 * Writes one note of `agentId`: replaces the text of `key` (keeping its id and createdAt), or
 * adds a note. `{ full: true }` when the agent already has `cap` notes and this would add one.
 */
export async function writeMemory(env: Env, w: MemoryWrite): Promise<MemoryWriteResult> {
  const id = crypto.randomUUID();
  const cap = w.cap ?? MAX_NOTES_PER_AGENT;
  const session = w.sessionKey ?? null;
  const stmt =
    w.key === undefined
      ? homeDatabase(env).prepare(INSERT_NOTE).bind(id, w.agentId, w.text, w.now, session, cap)
      : homeDatabase(env).prepare(INSERT_KEYED).bind(id, w.agentId, w.key, w.text, w.now, session, cap);
  const row = await stmt.first<{ id: string }>();
  if (!row) return { full: true };
  return { id: row.id, key: w.key ?? null, created: row.id === id };
}

/** Escapes LIKE's wildcards (`%`, `_`) and the escape character itself, for `ESCAPE '\'`. */
export function likePattern(substring: string): string {
  return `%${substring.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export interface MemoryQuery {
  agentId: string;
  /** Substring of the text or the key; ASCII letters match case-insensitively (SQLite LIKE). */
  query?: string;
  /** Clamped to 1..MAX_READ_LIMIT. */
  limit: number;
}

function readMemorySelect(env: Env, q: MemoryQuery) {
  const m = schema.memories;
  const limit = Math.min(Math.max(Math.trunc(q.limit) || 1, 1), MAX_READ_LIMIT);
  const filters: SQL[] = [eq(m.agentId, q.agentId)];
  if (q.query) {
    const pattern = likePattern(q.query);
    filters.push(sql`(${m.text} LIKE ${pattern} ESCAPE '\\' OR ${m.key} LIKE ${pattern} ESCAPE '\\')`);
  }
  return (
    database(homeDatabase(env))
      .select()
      .from(m)
      .where(and(...filters))
      // rowid breaks ties between notes written in the same millisecond (latest insert first);
      // the index on (agent_id, updated_at) carries it, so the order needs no sort.
      .orderBy(desc(m.updatedAt), sql`rowid DESC`)
      .limit(limit)
  );
}

/** The agent's notes, most recently written first (index `memories_agent_recent`). */
export async function readMemory(env: Env, q: MemoryQuery): Promise<MemoryRow[]> {
  return readMemorySelect(env, q).all();
}

/** The SQL of `readMemory`, for checking its query plan. */
export function readMemoryQuery(env: Env, q: MemoryQuery) {
  return readMemorySelect(env, q).toSQL();
}

/** How many notes the agent keeps. */
export async function countMemory(env: Env, agentId: string): Promise<number> {
  const m = schema.memories;
  const row = await database(homeDatabase(env))
    .select({ n: sql<number>`COUNT(*)` })
    .from(m)
    .where(eq(m.agentId, agentId))
    .get();
  return row?.n ?? 0;
}
