/**
 * Transcript queries (SPEC §3): appending messages (idempotent by message id, `seq` assigned in
 * the statement), history pages and export chunks by `(sessionId, seq)`, the newest messages
 * of several sessions in one statement, and what a turn's context is loaded from.
 */
import { and, asc, desc, eq, getTableName, gt, gte, isNotNull, isNull, notLike } from "drizzle-orm";
import { FLUSH_ID_MARK, type TranscriptMessage } from "../transcript/message";
import { databaseOfKey, groupByDatabase } from "./placement";
import { database, type SessionRow, writeBatch } from "./queries";
import { col, mapRow, type SelectPart, selectUnion } from "./reads";
import * as schema from "./schema";

// A compaction entry (?13 = 1) resolves its first kept message id (?14) to that message's seq;
// with none kept, everything up to the entry itself is summarized (first kept = its seq + 1).
const APPEND_SQL = `INSERT OR IGNORE INTO messages
  (session_id, seq, id, role, content, tool_call_id, tool_name, is_error, timestamp, run_id, model, usage, provenance, first_kept_seq)
  SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
    CASE WHEN ?13 = 1 THEN COALESCE((SELECT seq FROM messages WHERE id = ?14), COALESCE(MAX(seq), 0) + 2) END
  FROM messages WHERE session_id = ?1`;

// Several messages in one statement, in order: the seq of the i-th (json_each's key) is the
// transcript's max + 1 + i, read before any is inserted (the select reads the table it inserts
// into, so SQLite runs it to the end first). One already stored (by id) is skipped and leaves
// its seq unused: a gap, which history order allows.
const APPEND_MANY_SQL = `INSERT OR IGNORE INTO messages
  (session_id, seq, id, role, content, tool_call_id, tool_name, is_error, timestamp, run_id, model, usage, provenance, first_kept_seq)
  SELECT ?1, (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?1) + 1 + j.key,
    j.value ->> 0, j.value ->> 1, j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5, j.value ->> 6,
    j.value ->> 7, j.value ->> 8, j.value ->> 9, j.value ->> 10, NULL
  FROM json_each(?2) AS j`;

function columnsOf(m: TranscriptMessage): unknown[] {
  return [
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
  ];
}

/**
 * The statements appending `msgs` in order: one for all of them, or one each when a compaction
 * entry is among them (its first kept message is resolved to a seq as it is inserted).
 */
export function appendMessageStatements(
  db: D1Database,
  sessionId: string,
  msgs: TranscriptMessage[],
): D1PreparedStatement[] {
  if (msgs.length === 0) return [];
  if (msgs.length > 1 && !msgs.some((m) => m.compaction)) {
    return [db.prepare(APPEND_MANY_SQL).bind(sessionId, JSON.stringify(msgs.map(columnsOf)))];
  }
  const stmt = db.prepare(APPEND_SQL);
  return msgs.map((m) =>
    stmt.bind(sessionId, ...columnsOf(m), m.compaction ? 1 : 0, m.compaction?.firstKeptId ?? null),
  );
}

/**
 * Appends messages in order. `seq` is assigned inside the statement (max + 1, served by the
 * primary key), and a message whose `id` is already stored is skipped, so a resumed run that
 * appends the same messages again changes nothing.
 */
export async function appendMessages(
  env: Env,
  sessionKey: string,
  sessionId: string,
  msgs: TranscriptMessage[],
): Promise<void> {
  const db = databaseOfKey(env, sessionKey);
  await writeBatch(db, appendMessageStatements(db, sessionId, msgs));
}

type MessageRow = typeof schema.messages.$inferSelect;

function rowToMessage(r: MessageRow): TranscriptMessage {
  const m: TranscriptMessage = {
    id: r.id,
    seq: r.seq,
    role: r.role as TranscriptMessage["role"],
    content: r.content,
    timestamp: r.timestamp,
  };
  if (r.toolCallId) m.toolCallId = r.toolCallId;
  if (r.toolName) m.toolName = r.toolName;
  if (r.isError !== null) m.isError = r.isError;
  if (r.runId) m.runId = r.runId;
  if (r.model) m.model = r.model;
  if (r.usage) m.usage = r.usage;
  if (r.provenance) m.provenance = r.provenance;
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
  sessionKey: string,
  sessionId: string,
  limit: number,
): Promise<{ compaction?: TranscriptMessage; messages: TranscriptMessage[] }> {
  const m = schema.messages;
  const db = database(databaseOfKey(env, sessionKey));
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
  sessions: ReadonlyArray<{ key: string; sessionId: string }>,
  limit: number,
  opts: { excludeToolResults?: boolean } = {},
): Promise<Map<string, TranscriptMessage[]>> {
  const out = new Map<string, TranscriptMessage[]>(sessions.map((s) => [s.sessionId, []]));
  if (out.size === 0 || limit <= 0) return out;
  const m = schema.messages;
  const [table, sessionId, seq, role] = [getTableName(m), m.sessionId.name, m.seq.name, m.role.name];
  const notTools = (alias: string) =>
    opts.excludeToolResults ? ` AND ${alias}."${role}" <> 'toolResult'` : "";
  const sql =
    `SELECT m.* FROM json_each(?2) AS ids JOIN "${table}" AS m ON m."${sessionId}" = ids.value` +
    ` AND m."${seq}" >= COALESCE((SELECT x."${seq}" FROM "${table}" AS x WHERE x."${sessionId}" = ids.value${notTools("x")}` +
    ` ORDER BY x."${seq}" DESC LIMIT 1 OFFSET ?1), 0)` +
    (opts.excludeToolResults ? ` WHERE m."${role}" <> 'toolResult'` : "");
  // One statement per database holding some of the transcripts, in parallel.
  const answers = await Promise.all(
    groupByDatabase(env, sessions, (s) => s.key).map(({ db, items }) =>
      db
        .prepare(sql)
        .bind(limit - 1, JSON.stringify([...new Set(items.map((s) => s.sessionId))]))
        .all<Record<string, unknown>>(),
    ),
  );
  for (const { results } of answers) {
    for (const raw of results) {
      const row = mapRow(m, raw);
      out.get(row.sessionId)?.push(rowToMessage(row));
    }
  }
  for (const list of out.values()) list.sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
  return out;
}

export interface HistoryPage {
  messages: TranscriptMessage[];
  hasMore: boolean;
  nextBefore?: number;
  /** Whether newer messages follow the page (a page around a seq). */
  hasNewer?: boolean;
}

export interface HistoryOptions {
  limit: number;
  before?: number | undefined;
  /** A page centred on this seq (`before` is then ignored): up to half the limit at or before it, the rest after. */
  around?: number | undefined;
  includeTools: boolean;
}

/** The selects of a history page of the transcript `sessionIdSql` (a `?` or a subquery) names. */
function historyParts(sessionIdSql: string, sessionParams: unknown[], opts: HistoryOptions): SelectPart[] {
  const m = schema.messages;
  const base = `where ${col(m, "sessionId")} = ${sessionIdSql}${opts.includeTools ? "" : ` and ${col(m, "role")} <> 'toolResult'`}`;
  if (opts.around !== undefined) {
    const { older, newer } = aroundSplit(opts.limit);
    return [
      {
        table: m,
        rest: `${base} and ${col(m, "seq")} <= ? order by ${col(m, "seq")} desc limit ?`,
        params: [...sessionParams, opts.around, older + 1],
      },
      {
        table: m,
        rest: `${base} and ${col(m, "seq")} > ? order by ${col(m, "seq")} asc limit ?`,
        params: [...sessionParams, opts.around, newer + 1],
      },
    ];
  }
  const before = opts.before !== undefined ? ` and ${col(m, "seq")} < ?` : "";
  return [
    {
      table: m,
      rest: `${base}${before} order by ${col(m, "seq")} desc limit ?`,
      params: [...sessionParams, ...(opts.before !== undefined ? [opts.before] : []), opts.limit + 1],
    },
  ];
}

/** How a page around a seq splits its limit: the older half (the seq itself included) and the newer. */
function aroundSplit(limit: number): { older: number; newer: number } {
  const older = Math.ceil(limit / 2);
  return { older, newer: limit - older };
}

/** The page from the rows of a history's selects (each one more than it shows). */
function historyOf(parts: MessageRow[][], opts: HistoryOptions): HistoryPage {
  // Sorted again, as a union promises no order (the rows are in order already: one pass).
  const older = (parts[0] ?? []).sort((a, b) => b.seq - a.seq);
  const split = opts.around !== undefined ? aroundSplit(opts.limit) : { older: opts.limit, newer: 0 };
  const hasMore = older.length > split.older;
  const page = older.slice(0, split.older).reverse().map(rowToMessage);
  const oldest = page[0]?.seq;
  const result: HistoryPage =
    hasMore && oldest !== undefined
      ? { messages: page, hasMore, nextBefore: oldest }
      : { messages: page, hasMore };
  if (opts.around === undefined) return result;
  const newer = (parts[1] ?? []).sort((a, b) => a.seq - b.seq);
  result.messages.push(...newer.slice(0, split.newer).map(rowToMessage));
  result.hasNewer = newer.length > split.newer;
  return result;
}

export async function historyPage(
  env: Env,
  sessionKey: string,
  sessionId: string,
  opts: HistoryOptions,
): Promise<HistoryPage> {
  const parts = await selectUnion(databaseOfKey(env, sessionKey), historyParts("?", [sessionId], opts));
  return historyOf(parts as MessageRow[][], opts);
}

/** What a history page's reader needs of its session: who may see it, and its transcript. */
const HISTORY_SESSION_COLUMNS = ["key", "agentId", "spawnedBy", "sessionId"] as const;
export type HistorySession = Pick<SessionRow, (typeof HISTORY_SESSION_COLUMNS)[number]>;

/**
 * The session stored under `key` and a history page of its current transcript (or of the
 * transcript `sessionId`, when given, with the key it was written under), in one D1 statement
 * (the page is empty when no session is stored under the key).
 */
export async function sessionWithHistoryPage(
  env: Env,
  key: string,
  opts: HistoryOptions & { sessionId?: string | undefined },
): Promise<{ row: HistorySession | undefined; page: HistoryPage; transcriptKey?: string | null }> {
  const s = schema.sessions;
  const t = schema.transcripts;
  const pages =
    opts.sessionId === undefined
      ? historyParts(
          `(select ${col(s, "sessionId")} from "${getTableName(s)}" where ${col(s, "key")} = ?)`,
          [key],
          opts,
        )
      : historyParts("?", [opts.sessionId], opts);
  const owner: SelectPart[] =
    opts.sessionId === undefined
      ? []
      : [
          {
            table: t,
            keys: ["sessionKey"],
            rest: `where ${col(t, "sessionId")} = ? limit 1`,
            params: [opts.sessionId],
          },
        ];
  const [sessions, ...rest] = await selectUnion(databaseOfKey(env, key), [
    { table: s, keys: HISTORY_SESSION_COLUMNS, rest: `where ${col(s, "key")} = ? limit 1`, params: [key] },
    ...owner,
    ...pages,
  ]);
  const row = sessions?.[0] as HistorySession | undefined;
  if (opts.sessionId === undefined) return { row, page: historyOf(rest as MessageRow[][], opts) };
  const [owners, ...messages] = rest;
  const transcriptKey = (owners?.[0] as { sessionKey?: string } | undefined)?.sessionKey ?? null;
  // Another key's transcript (or one in another database) shows nothing here.
  const page =
    transcriptKey === key ? historyOf(messages as MessageRow[][], opts) : { messages: [], hasMore: false };
  return { row, page, transcriptKey };
}

/** Ascending chunk of a transcript after `afterSeq`, for streaming exports. */
export async function messagesAfter(
  env: Env,
  sessionKey: string,
  sessionId: string,
  afterSeq: number,
  limit: number,
) {
  const m = schema.messages;
  const rows = await database(databaseOfKey(env, sessionKey))
    .select()
    .from(m)
    .where(and(eq(m.sessionId, sessionId), gt(m.seq, afterSeq)))
    .orderBy(asc(m.seq))
    .limit(limit)
    .all();
  return rows.map(rowToMessage);
}
