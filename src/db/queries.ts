/**
 * Named D1 queries. Every query here is served by an index (see schema.ts); writes are
 * idempotent (primary keys, `INSERT OR IGNORE`, upserts) so that retries never duplicate rows.
 */
import {
  and,
  asc,
  desc,
  eq,
  getTableColumns,
  getTableName,
  gt,
  gte,
  inArray,
  isNotNull,
  isNull,
  lt,
  notLike,
  or,
  type SQL,
} from "drizzle-orm";
import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import { FLUSH_ID_MARK, type TranscriptMessage } from "../transcript/message";
import { col, mapRow, selectRows, selectStatement } from "./reads";
import * as schema from "./schema";
import { insertQuery, type Query, updateQuery } from "./writes";

export type SessionRow = typeof schema.sessions.$inferSelect;
export type RunRow = typeof schema.runs.$inferSelect;
export type DeliveryRow = typeof schema.deliveries.$inferSelect;

export interface DeliveryContext {
  channel: string;
  to: string;
  accountId: string;
  threadId?: string;
}

export interface Origin {
  label?: string;
  provider?: string;
  from?: string;
  to?: string;
  accountId?: string;
  threadId?: string;
}

/** One drizzle instance per D1 binding: building one extracts the relational config of the whole schema. */
const databases = new WeakMap<D1Database, DrizzleD1Database<typeof schema>>();

export function database(env: Env) {
  let db = databases.get(env.DB);
  if (!db) {
    db = drizzle(env.DB, { schema });
    databases.set(env.DB, db);
  }
  return db;
}

/** A D1 statement, so that writes of one step can share one `DB.batch` (SQL from ./writes). */
function statement(env: Env, query: Query): D1PreparedStatement {
  return env.DB.prepare(query.sql).bind(...query.params);
}

/** Runs writes in one round trip (D1 batches are atomic). */
export async function writeBatch(env: Env, statements: D1PreparedStatement[]): Promise<void> {
  if (statements.length === 0) return;
  await env.DB.batch(statements);
}

// ---------------------------------------------------------------------------------------------
// Sessions

export function upsertSessionStatement(env: Env, row: SessionRow): D1PreparedStatement {
  const { key: _key, ...rest } = row;
  return statement(env, insertQuery(schema.sessions, row, { target: schema.sessions.key, set: rest }));
}

export function recordTranscriptStatement(env: Env, sessionId: string, sessionKey: string, now: number) {
  return statement(
    env,
    insertQuery(schema.transcripts, { sessionId, sessionKey, createdAt: now }, "nothing"),
  );
}

export async function upsertSession(env: Env, row: SessionRow): Promise<void> {
  const { key, ...rest } = row;
  await database(env)
    .insert(schema.sessions)
    .values(row)
    .onConflictDoUpdate({ target: schema.sessions.key, set: rest });
}

export async function getSession(env: Env, key: string): Promise<SessionRow | undefined> {
  const s = schema.sessions;
  const [row] = await selectRows(env.DB, s, `where ${col(s, "key")} = ? limit 1`, [key]);
  return row;
}

export async function getSessionBySessionId(env: Env, sessionId: string): Promise<SessionRow | undefined> {
  return database(env).select().from(schema.sessions).where(eq(schema.sessions.sessionId, sessionId)).get();
}

export async function getSessionByLabel(env: Env, label: string, agentId?: string): Promise<SessionRow[]> {
  const where = agentId
    ? and(eq(schema.sessions.label, label), eq(schema.sessions.agentId, agentId))
    : eq(schema.sessions.label, label);
  return database(env).select().from(schema.sessions).where(where).limit(2).all();
}

export async function transcriptOwner(env: Env, sessionId: string) {
  return database(env)
    .select()
    .from(schema.transcripts)
    .where(eq(schema.transcripts.sessionId, sessionId))
    .get();
}

export async function recordTranscript(env: Env, sessionId: string, sessionKey: string, now: number) {
  await database(env)
    .insert(schema.transcripts)
    .values({ sessionId, sessionKey, createdAt: now })
    .onConflictDoNothing()
    .run();
}

export async function deleteSessionRows(env: Env, key: string, deleteTranscript: boolean): Promise<void> {
  const db = database(env);
  if (!deleteTranscript) {
    await db.delete(schema.sessions).where(eq(schema.sessions.key, key)).run();
    return;
  }
  const ids = await db
    .select({ sessionId: schema.transcripts.sessionId })
    .from(schema.transcripts)
    .where(eq(schema.transcripts.sessionKey, key))
    .all();
  // Chunked: each statement stays well under D1's bound-parameter limit.
  const statements = [];
  for (let i = 0; i < ids.length; i += 50) {
    const chunk = ids.slice(i, i + 50).map((r) => r.sessionId);
    statements.push(db.delete(schema.messages).where(inArray(schema.messages.sessionId, chunk)));
    statements.push(db.delete(schema.transcripts).where(inArray(schema.transcripts.sessionId, chunk)));
  }
  await db.batch([db.delete(schema.sessions).where(eq(schema.sessions.key, key)), ...statements]);
}

export interface SessionListFilter {
  kinds?: string[];
  agentId?: string;
  label?: string;
  activeSince?: number;
  archived: boolean | "all";
  spawnedBy?: string;
  excludeKeys?: string[];
  keys?: string[];
  limit: number;
  cursor?: { updatedAt: number; key: string };
}

/** Newest first (ties: key descending), keyset-paged on (updatedAt, key): deep pages cost what the first costs. */
export async function listSessions(env: Env, f: SessionListFilter): Promise<SessionRow[]> {
  const [rows] = await listSessionsBatch(env, [f]);
  return rows ?? [];
}

/**
 * Several listings in one D1 round trip (a batch of index-ordered selects), each answered in
 * the order of its filter. A filter with several kinds is one select per kind, merged:
 * `kind IN (…)` cannot use the (kind, updatedAt, key) index for ordering, so SQLite would sort
 * every matching row, while one index-ordered query per kind stays bounded.
 */
export async function listSessionsBatch(env: Env, filters: SessionListFilter[]): Promise<SessionRow[][]> {
  const parts = filters.map((f) =>
    f.kinds && f.kinds.length > 1 ? f.kinds.map((kind) => ({ ...f, kinds: [kind] })) : [f],
  );
  const statements = parts.flat().map((f) => listStatement(env, f));
  if (statements.length === 0) return [];
  const results = await env.DB.batch<Record<string, unknown>>(statements);
  let next = 0;
  return parts.map((group, i) => {
    const rows = group.flatMap(() => (results[next++]?.results ?? []).map((r) => mapRow(schema.sessions, r)));
    if (group.length === 1) return rows;
    const limit = filters[i]?.limit ?? rows.length;
    return rows
      .sort((a, b) => b.updatedAt - a.updatedAt || (a.key < b.key ? 1 : a.key > b.key ? -1 : 0))
      .slice(0, limit);
  });
}

/** One index-ordered select of a listing (at most one kind). */
function listStatement(env: Env, f: SessionListFilter): D1PreparedStatement {
  const s = schema.sessions;
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (clause: string, ...values: unknown[]) => {
    where.push(clause);
    params.push(...values);
  };
  if (f.kinds?.length) add(`${col(s, "kind")} = ?`, f.kinds[0] ?? "");
  if (f.agentId) add(`${col(s, "agentId")} = ?`, f.agentId);
  if (f.label) add(`${col(s, "label")} = ?`, f.label);
  if (f.spawnedBy) add(`${col(s, "spawnedBy")} = ?`, f.spawnedBy);
  if (f.keys)
    add(f.keys.length ? `${col(s, "key")} in (${f.keys.map(() => "?").join(", ")})` : "0", ...f.keys);
  if (f.activeSince !== undefined) add(`${col(s, "updatedAt")} > ?`, f.activeSince);
  if (f.archived === true) add(`${col(s, "archivedAt")} is not null`);
  else if (f.archived === false) add(`${col(s, "archivedAt")} is null`);
  for (const k of f.excludeKeys ?? []) add(`${col(s, "key")} <> ?`, k);
  if (f.cursor) {
    const [u, k] = [col(s, "updatedAt"), col(s, "key")];
    add(`(${u} < ? or (${u} = ? and ${k} < ?))`, f.cursor.updatedAt, f.cursor.updatedAt, f.cursor.key);
  }
  // Both columns descending, so the (…, updatedAt, key) indexes serve the order with a
  // backwards scan instead of sorting every matching row.
  return selectStatement(
    env.DB,
    s,
    `${where.length ? `where ${where.join(" and ")} ` : ""}order by ${col(s, "updatedAt")} desc, ${col(s, "key")} desc limit ?`,
    [...params, f.limit],
  );
}

// ---------------------------------------------------------------------------------------------
// Transcript messages

// A compaction entry (?13 = 1) resolves its first kept message id (?14) to that message's seq;
// with none kept, everything up to the entry itself is summarized (first kept = its seq + 1).
const APPEND_SQL = `INSERT OR IGNORE INTO messages
  (session_id, seq, id, role, content, tool_call_id, tool_name, is_error, timestamp, run_id, model, usage, provenance, first_kept_seq)
  SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
    CASE WHEN ?13 = 1 THEN COALESCE((SELECT seq FROM messages WHERE id = ?14), COALESCE(MAX(seq), 0) + 2) END
  FROM messages WHERE session_id = ?1`;

export function appendMessageStatements(
  env: Env,
  sessionId: string,
  msgs: TranscriptMessage[],
): D1PreparedStatement[] {
  const stmt = env.DB.prepare(APPEND_SQL);
  return msgs.map((m) =>
    stmt.bind(
      sessionId,
      m.id,
      m.role,
      JSON.stringify(m.content),
      m.toolCallId ?? null,
      m.toolName ?? null,
      m.isError === undefined ? null : m.isError ? 1 : 0,
      m.timestamp,
      m.runId ?? null,
      m.model ?? null,
      m.usage ? JSON.stringify(m.usage) : null,
      m.provenance ? JSON.stringify(m.provenance) : null,
      m.compaction ? 1 : 0,
      m.compaction?.firstKeptId ?? null,
    ),
  );
}

/**
 * Appends messages in order. `seq` is assigned inside the statement (max + 1, served by the
 * primary key), and a message whose `id` is already stored is skipped, so a resumed run that
 * appends the same messages again changes nothing.
 */
export async function appendMessages(env: Env, sessionId: string, msgs: TranscriptMessage[]): Promise<void> {
  await writeBatch(env, appendMessageStatements(env, sessionId, msgs));
}

type MessageRow = typeof schema.messages.$inferSelect;

function rowToMessage(r: MessageRow): TranscriptMessage {
  const m: TranscriptMessage = {
    id: r.id,
    seq: r.seq,
    role: r.role as TranscriptMessage["role"],
    content: r.content as TranscriptMessage["content"],
    timestamp: r.timestamp,
  };
  if (r.toolCallId) m.toolCallId = r.toolCallId;
  if (r.toolName) m.toolName = r.toolName;
  if (r.isError !== null) m.isError = r.isError;
  if (r.runId) m.runId = r.runId;
  if (r.model) m.model = r.model;
  if (r.usage) m.usage = r.usage as TranscriptMessage["usage"];
  if (r.provenance) m.provenance = r.provenance as TranscriptMessage["provenance"];
  if (r.firstKeptSeq !== null) m.compaction = { firstKeptSeq: r.firstKeptSeq };
  return m;
}

/**
 * What a turn's context is built from, read from D1 when an actor has no copy of its own (its
 * storage predates it, or was lost): the latest compaction entry of the transcript (found by
 * the `messages_compactions` partial index, never a scan) and at most `limit` newest messages
 * from its first kept seq on, oldest first, without compaction entries and memory-flush turns.
 */
export async function turnContextRows(
  env: Env,
  sessionId: string,
  limit: number,
): Promise<{ compaction?: TranscriptMessage; messages: TranscriptMessage[] }> {
  const m = schema.messages;
  const db = database(env);
  const [latest] = await db
    .select()
    .from(m)
    .where(and(eq(m.sessionId, sessionId), isNotNull(m.firstKeptSeq)))
    .orderBy(desc(m.seq))
    .limit(1)
    .all();
  const rows = await db
    .select()
    .from(m)
    .where(
      and(
        eq(m.sessionId, sessionId),
        latest?.firstKeptSeq != null ? gte(m.seq, latest.firstKeptSeq) : undefined,
        isNull(m.firstKeptSeq),
        notLike(m.id, `%${FLUSH_ID_MARK}%`),
      ),
    )
    .orderBy(desc(m.seq))
    .limit(limit)
    .all();
  const messages = rows.reverse().map(rowToMessage);
  return latest ? { compaction: rowToMessage(latest), messages } : { messages };
}

const messageColumns = Object.entries(getTableColumns(schema.messages));

/** A row read with raw SQL (database column names, driver values) as drizzle would have mapped it. */
function messageRowFromDriver(raw: Record<string, unknown>): MessageRow {
  const row: Record<string, unknown> = {};
  for (const [field, column] of messageColumns) {
    const value = raw[column.name];
    row[field] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
  }
  return row as MessageRow;
}

/**
 * The newest `limit` messages of each of several transcripts (each list oldest first),
 * optionally without tool results, in one statement whatever the number of transcripts (their
 * ids are one JSON parameter). Per transcript, a backward scan of the primary key finds the seq
 * of its `limit`-th newest message and a range scan from there reads the messages, so the rows
 * read stay bounded by transcripts × limit however long the transcripts are (a window function
 * over `session_id IN (…)` would read every message of them).
 */
export async function recentMessagesOf(
  env: Env,
  sessionIds: string[],
  limit: number,
  opts: { excludeToolResults?: boolean } = {},
): Promise<Map<string, TranscriptMessage[]>> {
  const ids = [...new Set(sessionIds)];
  const out = new Map<string, TranscriptMessage[]>(ids.map((id) => [id, []]));
  if (ids.length === 0 || limit <= 0) return out;
  const m = schema.messages;
  const [table, sessionId, seq, role] = [getTableName(m), m.sessionId.name, m.seq.name, m.role.name];
  const notTools = (alias: string) =>
    opts.excludeToolResults ? ` AND ${alias}."${role}" <> 'toolResult'` : "";
  const sql =
    `SELECT m.* FROM json_each(?2) AS ids JOIN "${table}" AS m ON m."${sessionId}" = ids.value` +
    ` AND m."${seq}" >= COALESCE((SELECT x."${seq}" FROM "${table}" AS x WHERE x."${sessionId}" = ids.value${notTools("x")}` +
    ` ORDER BY x."${seq}" DESC LIMIT 1 OFFSET ?1), 0)` +
    (opts.excludeToolResults ? ` WHERE m."${role}" <> 'toolResult'` : "");
  const { results } = await env.DB.prepare(sql)
    .bind(limit - 1, JSON.stringify(ids))
    .all<Record<string, unknown>>();
  for (const raw of results) {
    const row = messageRowFromDriver(raw);
    out.get(row.sessionId)?.push(rowToMessage(row));
  }
  for (const list of out.values()) list.sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
  return out;
}

export interface HistoryPage {
  messages: TranscriptMessage[];
  hasMore: boolean;
  nextBefore?: number;
}

/** A page of history ending before `before` (a seq), oldest first; keyset on (sessionId, seq). */
export async function historyPage(
  env: Env,
  sessionId: string,
  opts: { limit: number; before?: number; includeTools: boolean },
): Promise<HistoryPage> {
  const m = schema.messages;
  let where = `where ${col(m, "sessionId")} = ?`;
  const params: unknown[] = [sessionId];
  if (opts.before !== undefined) {
    where += ` and ${col(m, "seq")} < ?`;
    params.push(opts.before);
  }
  if (!opts.includeTools) where += ` and ${col(m, "role")} <> 'toolResult'`;
  const rows = await selectRows(env.DB, m, `${where} order by ${col(m, "seq")} desc limit ?`, [
    ...params,
    opts.limit + 1,
  ]);
  const hasMore = rows.length > opts.limit;
  const page = rows.slice(0, opts.limit).reverse().map(rowToMessage);
  const oldest = page[0]?.seq;
  return hasMore && oldest !== undefined
    ? { messages: page, hasMore, nextBefore: oldest }
    : { messages: page, hasMore };
}

/** Ascending chunk of a transcript after `afterSeq`, for streaming exports. */
export async function messagesAfter(env: Env, sessionId: string, afterSeq: number, limit: number) {
  const m = schema.messages;
  const rows = await database(env)
    .select()
    .from(m)
    .where(and(eq(m.sessionId, sessionId), gt(m.seq, afterSeq)))
    .orderBy(asc(m.seq))
    .limit(limit)
    .all();
  return rows.map(rowToMessage);
}

// ---------------------------------------------------------------------------------------------
// Runs

export function insertRunStatement(env: Env, run: typeof schema.runs.$inferInsert): D1PreparedStatement {
  return statement(env, insertQuery(schema.runs, run, "nothing"));
}

/** Creates the run row if missing and marks it running (one statement, idempotent). */
export function startRunStatement(env: Env, run: typeof schema.runs.$inferInsert & { startedAt: number }) {
  return statement(
    env,
    insertQuery(
      schema.runs,
      { ...run, status: "running" },
      { target: schema.runs.runId, set: { status: "running", startedAt: run.startedAt } },
    ),
  );
}

export function updateRunStatement(
  env: Env,
  runId: string,
  fields: Partial<Omit<typeof schema.runs.$inferInsert, "runId">>,
): D1PreparedStatement {
  return statement(env, updateQuery(schema.runs, fields, { column: schema.runs.runId, value: runId }));
}

export async function getRun(env: Env, runId: string): Promise<RunRow | undefined> {
  return database(env).select().from(schema.runs).where(eq(schema.runs.runId, runId)).get();
}

export async function getRunByIdempotencyKey(env: Env, key: string): Promise<RunRow | undefined> {
  return database(env).select().from(schema.runs).where(eq(schema.runs.idempotencyKey, key)).get();
}

// ---------------------------------------------------------------------------------------------
// Deliveries

export function insertDeliveryStatement(
  env: Env,
  row: typeof schema.deliveries.$inferInsert,
): D1PreparedStatement {
  return statement(env, insertQuery(schema.deliveries, row, "nothing"));
}

/**
 * A delivery row with the outcome of an attempt: inserted when the row is not written yet (a
 * late attempt can settle before the run's finalize batch), else its state updated.
 */
export function recordDeliveryStatement(
  env: Env,
  row: typeof schema.deliveries.$inferInsert,
  state: Pick<
    typeof schema.deliveries.$inferInsert,
    "status" | "attempts" | "updatedAt" | "nextAttemptAt" | "lastError" | "deliveredAt"
  >,
): D1PreparedStatement {
  return statement(
    env,
    insertQuery(
      schema.deliveries,
      { ...row, ...state },
      { target: schema.deliveries.deliveryId, set: state },
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
  if (f.sessionKey) where.push(eq(d.sessionKey, f.sessionKey));
  if (f.cursor) {
    where.push(
      or(
        lt(d.createdAt, f.cursor.createdAt),
        and(eq(d.createdAt, f.cursor.createdAt), lt(d.deliveryId, f.cursor.deliveryId)),
      ),
    );
  }
  return database(env)
    .select()
    .from(d)
    .where(and(...where))
    .orderBy(desc(d.createdAt), desc(d.deliveryId))
    .limit(f.limit)
    .all();
}

/** Deliveries still owed whose next attempt is overdue (the cron backstop for lost alarms). */
export async function overdueDeliveries(env: Env, before: number, limit: number): Promise<DeliveryRow[]> {
  const d = schema.deliveries;
  return database(env)
    .select()
    .from(d)
    .where(and(inArray(d.status, ["pending", "retrying"]), lt(d.nextAttemptAt, before)))
    .limit(limit)
    .all();
}

/** Runs left queued/running for a while: their actor is nudged by cron in case an alarm was lost. */
export async function staleActiveRuns(env: Env, before: number, limit: number) {
  const r = schema.runs;
  return database(env)
    .select({ runId: r.runId, sessionKey: r.sessionKey })
    .from(r)
    .where(and(inArray(r.status, ["queued", "running"]), lt(r.createdAt, before)))
    .limit(limit)
    .all();
}

/**
 * Archives sub-agent sessions idle since `before` (bounded to `limit` rows per call, served by
 * the partial index `sessions_subagent_archive`). Returns the archived keys.
 */
export async function archiveIdleSubagents(
  env: Env,
  before: number,
  now: number,
  limit: number,
): Promise<string[]> {
  const s = schema.sessions;
  const due = await database(env)
    .select({ key: s.key })
    .from(s)
    .where(
      and(isNotNull(s.spawnedBy), isNull(s.archivedAt), lt(s.updatedAt, before), eq(s.runStatus, "idle")),
    )
    .limit(limit)
    .all();
  if (due.length === 0) return [];
  const keys = due.map((d) => d.key);
  await database(env).update(s).set({ archivedAt: now }).where(inArray(s.key, keys)).run();
  return keys;
}

// ---------------------------------------------------------------------------------------------
// Inbound dedupe

export function recordInboundStatement(
  env: Env,
  row: typeof schema.inbound.$inferInsert,
): D1PreparedStatement {
  return statement(env, insertQuery(schema.inbound, row, "nothing"));
}
