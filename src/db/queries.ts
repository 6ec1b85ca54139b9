/**
 * Named D1 queries of sessions (runs and deliveries: runs.ts; transcripts: messages.ts): the
 * entry's one upsert, reads by key, sessionId and label, listings, deletes and sub-agent
 * archival; and the drizzle instance and batch helpers the other query modules share. Every
 * query here is served by an index (see schema.ts); writes are idempotent (primary keys,
 * `INSERT OR IGNORE`, upserts) so that retries never duplicate rows.
 */
import { and, eq, inArray, isNotNull, isNull, lt } from "drizzle-orm";
import { type DrizzleD1Database, drizzle } from "drizzle-orm/d1";
import { allDatabases, databaseOfKey, groupByDatabase, readEach } from "./placement";
import { col, decodeRow, rawValue, type SelectPart, selectRows, selectUnionRaw } from "./reads";
import * as schema from "./schema";
import { boundStatement, insertManyQuery, insertQuery, type Query } from "./writes";

export type SessionRow = typeof schema.sessions.$inferSelect;
export type RunRow = typeof schema.runs.$inferSelect;
export type DeliveryRow = typeof schema.deliveries.$inferSelect;

/** One drizzle instance per D1 binding: building one extracts the relational config of the whole schema. */
const drizzles = new WeakMap<D1Database, DrizzleD1Database<typeof schema>>();

export function database(d1: D1Database) {
  let db = drizzles.get(d1);
  if (!db) {
    db = drizzle(d1, { schema });
    drizzles.set(d1, db);
  }
  return db;
}

/** A D1 statement, so that writes of one step can share one `batch` (SQL from ./writes). */
export function statement(db: D1Database, query: Query): D1PreparedStatement {
  return boundStatement(db, query);
}

/** Runs writes in one round trip (D1 batches are atomic). */
export async function writeBatch(db: D1Database, statements: D1PreparedStatement[]): Promise<void> {
  if (statements.length === 0) return;
  await db.batch(statements);
}

/** The first row `read` finds in any database (rows of one session live in one). */
export async function firstOf<T>(
  env: Env,
  read: (db: D1Database) => Promise<T | undefined>,
): Promise<T | undefined> {
  for (const row of await readEach(env, read)) if (row !== undefined) return row;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Sessions

/**
 * The columns an upsert with `set: "run"` leaves alone: set when the entry or its transcript
 * began (its agent, kind, creation, spawner, sessionId), or its label (changed only by a patch,
 * written whole). Their indexes are then not rewritten (D1 bills each index row it writes).
 */
const RUN_KEEPS = new Set(["key", "agentId", "kind", "createdAt", "spawnedBy", "sessionId", "label"]);
/** An upsert of the whole entry leaves only its key alone. */
const ALL_KEEPS = new Set(["key"]);

/** Strictly older: an entry as new as the stored one (the same admission, landing late) leaves it alone. */
const NOT_NEWER = `${col(schema.sessions, "updatedAt")} < excluded.${col(schema.sessions, "updatedAt")}`;

export interface SessionUpsert {
  /**
   * Which columns an existing row takes: `"all"` (default), or `"run"`, those a run, an
   * admission or the sweep change. A missing row is inserted whole either way.
   */
  set?: "all" | "run";
  /** Update the stored row only if it was updated earlier: a late write never moves it back. */
  unlessNewer?: boolean;
}

/** The entry's upsert by key. */
export function upsertSessionStatement(
  db: D1Database,
  row: SessionRow,
  { set = "all", unlessNewer = false }: SessionUpsert = {},
): D1PreparedStatement {
  const keeps = set === "run" ? RUN_KEEPS : ALL_KEEPS;
  const values = Object.fromEntries(Object.entries(row).filter(([k]) => !keeps.has(k)));
  return statement(
    db,
    insertQuery(schema.sessions, row, {
      target: schema.sessions.key,
      set: values,
      ...(unlessNewer ? { where: NOT_NEWER } : {}),
    }),
  );
}

export function recordTranscriptStatement(
  db: D1Database,
  sessionId: string,
  sessionKey: string,
  now: number,
) {
  return statement(db, insertQuery(schema.transcripts, { sessionId, sessionKey, createdAt: now }, "nothing"));
}

/** Transcripts begun (sessionId → key), several in one statement; one already recorded stays. */
export function recordTranscriptsStatement(
  db: D1Database,
  rows: ReadonlyArray<typeof schema.transcripts.$inferInsert>,
): D1PreparedStatement {
  return statement(db, insertManyQuery(schema.transcripts, rows));
}

export async function getSession(env: Env, key: string): Promise<SessionRow | undefined> {
  const s = schema.sessions;
  const [row] = await selectRows(databaseOfKey(env, key), s, `where ${col(s, "key")} = ? limit 1`, [key]);
  return row;
}

/** The entry stored under the first of `keys` that has one (one query). */
export async function findSession(env: Env, keys: readonly string[]): Promise<SessionRow | undefined> {
  if (keys.length <= 1) return keys[0] === undefined ? undefined : getSession(env, keys[0]);
  const s = schema.sessions;
  const found = await Promise.all(
    groupByDatabase(env, keys, (k) => k).map(({ db, items }) =>
      selectRows(db, s, `where ${col(s, "key")} in (${items.map(() => "?").join(", ")})`, items),
    ),
  );
  const rows = found.flat();
  for (const key of keys) {
    const row = rows.find((r) => r.key === key);
    if (row) return row;
  }
  return undefined;
}

export async function getSessionBySessionId(env: Env, sessionId: string): Promise<SessionRow | undefined> {
  return firstOf(env, (db) =>
    database(db).select().from(schema.sessions).where(eq(schema.sessions.sessionId, sessionId)).get(),
  );
}

export async function getSessionByLabel(env: Env, label: string, agentId?: string): Promise<SessionRow[]> {
  const where = agentId
    ? and(eq(schema.sessions.label, label), eq(schema.sessions.agentId, agentId))
    : eq(schema.sessions.label, label);
  const found = await readEach(env, (db) =>
    database(db).select().from(schema.sessions).where(where).limit(2).all(),
  );
  return found.flat().slice(0, 2);
}

/**
 * Whether a session of `agentId` other than `key` has `label` in a database other than `key`'s:
 * a label names one session of its agent across every database (SPEC §19), and the unique index
 * `sessions_agent_label` holds only within one. Read before the write that sets it (D1 has no
 * transactions across databases); in `key`'s own database the index refuses the write itself.
 * Reads nothing with a single database.
 */
export async function labelTakenElsewhere(
  env: Env,
  key: string,
  agentId: string,
  label: string,
): Promise<boolean> {
  const own = databaseOfKey(env, key);
  const s = schema.sessions;
  const found = await Promise.all(
    allDatabases(env)
      .filter((db) => db !== own)
      .map((db) =>
        database(db)
          .select({ key: s.key })
          .from(s)
          .where(and(eq(s.agentId, agentId), eq(s.label, label)))
          .limit(1)
          .get(),
      ),
  );
  return found.some((row) => row !== undefined && row.key !== key);
}

export async function transcriptOwner(env: Env, sessionId: string) {
  return firstOf(env, (db) =>
    database(db).select().from(schema.transcripts).where(eq(schema.transcripts.sessionId, sessionId)).get(),
  );
}

export async function recordTranscript(env: Env, sessionId: string, sessionKey: string, now: number) {
  await recordTranscriptStatement(databaseOfKey(env, sessionKey), sessionId, sessionKey, now).run();
}

/** Deletes a session's entry (and its transcripts when asked): the sessionIds of the transcripts deleted. */
export async function deleteSessionRows(env: Env, key: string, deleteTranscript: boolean): Promise<string[]> {
  const db = database(databaseOfKey(env, key));
  if (!deleteTranscript) {
    await db.delete(schema.sessions).where(eq(schema.sessions.key, key)).run();
    return [];
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
  return ids.map((r) => r.sessionId);
}

export interface SessionListFilter {
  kinds?: string[];
  agentId?: string;
  label?: string;
  /** The chat channel the session was last reached on, else its own (`sessions_channel_recent`). */
  channel?: string;
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

/** The columns a listing row shows (SPEC §6, §17): what listing pages read of each session. */
export const LISTED_COLUMNS = [
  "key",
  "agentId",
  "sessionId",
  "kind",
  "channel",
  "displayName",
  "label",
  "updatedAt",
  "model",
  "contextTokens",
  "totalTokens",
  "costUsd",
  "thinkingLevel",
  "verboseLevel",
  "systemSent",
  "abortedLastRun",
  "sendPolicy",
  "lastChannel",
  "lastTo",
  "deliveryContext",
  "spawnedBy",
  "archivedAt",
  "runStatus",
  "expiresAt",
  "expiredAt",
  "stateVersion",
] as const satisfies ReadonlyArray<keyof SessionRow>;
export type ListedSession = Pick<SessionRow, (typeof LISTED_COLUMNS)[number]>;

/** Listing order: newest `updatedAt` first, ties by key descending (the keyset order). */
export function newestFirst(
  a: Pick<SessionRow, "updatedAt" | "key">,
  b: Pick<SessionRow, "updatedAt" | "key">,
): number {
  return b.updatedAt - a.updatedAt || (a.key < b.key ? 1 : a.key > b.key ? -1 : 0);
}

/**
 * Several listings in one D1 statement (index-ordered selects joined by `union all`), each
 * answered in the order of its filter, with every column or the properties `keys`. A filter
 * with several kinds is one select per kind, merged: `kind IN (…)` cannot use the
 * (kind, updatedAt, key) index for ordering, so SQLite would sort every matching row, while
 * one index-ordered select per kind stays bounded.
 */
export async function listSessionsBatch<K extends keyof SessionRow & string = keyof SessionRow & string>(
  env: Env,
  filters: SessionListFilter[],
  keys?: readonly K[],
): Promise<Array<Array<Pick<SessionRow, K | "updatedAt" | "key">>>> {
  const groups = filters.map((f) =>
    f.kinds && f.kinds.length > 1 ? f.kinds.map((kind) => ({ ...f, kinds: [kind] })) : [f],
  );
  const withOrder = keys ? [...new Set<K | "updatedAt" | "key">([...keys, "updatedAt", "key"])] : undefined;
  const parts = groups.flat().map((f) => listPart(f, withOrder));
  if (parts.length === 0) return [];
  // Every database answers every listing (each select bounded by the listing's limit), and the
  // answers merge: the newest `limit` of the union are the newest `limit` overall, and each
  // database pages from the same (updatedAt, key) cursor, so pages are exact across databases.
  const answers = await readEach(env, (db) => selectUnionRaw(db, parts));
  let next = 0;
  return groups.map((group, i) => {
    const first = next;
    next += group.length;
    // Each select is index-ordered; sorted again here, as a union promises no order (the
    // rows are in order already, so this costs one pass). Sorted as read, and only the rows
    // kept are decoded: over N databases a page reads N pages' rows.
    const rows = answers
      .flatMap((results) => results.slice(first, next).flat())
      .map((row) => ({
        row,
        updatedAt: rawValue(row, "updatedAt") as number,
        key: rawValue(row, "key") as string,
      }))
      .sort(newestFirst);
    const limit = filters[i]?.limit ?? rows.length;
    return (rows.length > limit ? rows.slice(0, limit) : rows).map(
      (r) => decodeRow(r.row) as Pick<SessionRow, K | "updatedAt" | "key">,
    );
  });
}

/** One index-ordered select of a listing (at most one kind). */
function listPart(f: SessionListFilter, keys: readonly string[] | undefined): SelectPart {
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
  // The expression of the index sessions_channel_recent, so the index serves filter and order.
  if (f.channel) add(`coalesce(${col(s, "lastChannel")}, ${col(s, "channel")}) = ?`, f.channel);
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
  return {
    table: s,
    keys,
    rest: `${where.length ? `where ${where.join(" and ")} ` : ""}order by ${col(s, "updatedAt")} desc, ${col(s, "key")} desc limit ?`,
    params: [...params, f.limit],
  };
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
  const archived = await readEach(env, async (d1) => {
    const due = await database(d1)
      .select({ key: s.key })
      .from(s)
      .where(
        and(isNotNull(s.spawnedBy), isNull(s.archivedAt), lt(s.updatedAt, before), eq(s.runStatus, "idle")),
      )
      .limit(limit)
      .all();
    if (due.length === 0) return [];
    const keys = due.map((d) => d.key);
    await database(d1).update(s).set({ archivedAt: now }).where(inArray(s.key, keys)).run();
    return keys;
  });
  return archived.flat();
}
