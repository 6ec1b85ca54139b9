/**
 * The hot tables' columns as SQL sees them, written out by hand for the statements of
 * reads.ts and writes.ts: per table, each row property's column name, how its value is stored
 * (text and integer as they are, booleans as 0/1, JSON as its text) and what an insert
 * without the value stores, in the schema's declaration order. Typed against the drizzle
 * schema's row types: a property added to or removed from schema.ts, or a column whose kind
 * does not match its property, fails to compile. Names, order and defaults are held against
 * drizzle's own statements in test/unit/writes.test.ts, its rows in test/unit/reads.test.ts,
 * and drizzle's column definitions (getTableColumns) in test/unit/columns.test.ts.
 */
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import * as schema from "./schema";

export type Codec = "text" | "integer" | "boolean" | "json";

/** What an insert without the value stores: the `.default(value)` (bound) or SQL default (inlined). */
export type Fallback = { value: string | number | boolean } | { sql: string };

export interface ColumnDef<C extends Codec = Codec> {
  /** The column name, unquoted. */
  name: string;
  codec: C;
  /** None: the column has no default, an insert without the value stores null. */
  fallback?: Fallback;
}

/** The codec a property's type takes (JSON columns are `unknown`). */
type CodecOf<V> = [NonNullable<V>] extends [boolean]
  ? "boolean"
  : [NonNullable<V>] extends [number]
    ? "integer"
    : [NonNullable<V>] extends [string]
      ? "text"
      : "json";

/** Every property of a row, in the schema's declaration order. */
export type Columns<Row> = { [K in keyof Row]-?: ColumnDef<CodecOf<Row[K]>> };

export interface TableDef<Row> {
  /** The table name, unquoted. */
  name: string;
  columns: Columns<Row>;
}

const text = (name: string, value?: string): ColumnDef<"text"> =>
  value === undefined ? { name, codec: "text" } : { name, codec: "text", fallback: { value } };
const integer = (name: string, fallback?: Fallback): ColumnDef<"integer"> =>
  fallback === undefined ? { name, codec: "integer" } : { name, codec: "integer", fallback };
const boolean = (name: string, value?: boolean): ColumnDef<"boolean"> =>
  value === undefined ? { name, codec: "boolean" } : { name, codec: "boolean", fallback: { value } };
const json = (name: string): ColumnDef<"json"> => ({ name, codec: "json" });
const zero: Fallback = { value: 0 };

export const sessions: TableDef<typeof schema.sessions.$inferSelect> = {
  name: "sessions",
  columns: {
    key: text("key"),
    agentId: text("agent_id"),
    sessionId: text("session_id"),
    kind: text("kind"),
    chatType: text("chat_type"),
    channel: text("channel"),
    displayName: text("display_name"),
    label: text("label"),
    subject: text("subject"),
    createdAt: integer("created_at"),
    updatedAt: integer("updated_at"),
    sessionStartedAt: integer("session_started_at"),
    lastInteractionAt: integer("last_interaction_at"),
    model: text("model"),
    modelOverride: text("model_override"),
    contextTokens: integer("context_tokens", zero),
    inputTokens: integer("input_tokens", zero),
    outputTokens: integer("output_tokens", zero),
    totalTokens: integer("total_tokens", zero),
    compactionCount: integer("compaction_count", zero),
    thinkingLevel: text("thinking_level"),
    verboseLevel: text("verbose_level"),
    systemSent: boolean("system_sent", false),
    abortedLastRun: boolean("aborted_last_run", false),
    sendPolicy: text("send_policy"),
    lastChannel: text("last_channel"),
    lastTo: text("last_to"),
    lastAccountId: text("last_account_id"),
    lastThreadId: text("last_thread_id"),
    deliveryContext: json("delivery_context"),
    origin: json("origin"),
    spawnedBy: text("spawned_by"),
    archivedAt: integer("archived_at"),
    runStatus: text("run_status", "idle"),
    expiresAt: integer("expires_at"),
    expiredAt: integer("expired_at"),
  },
};

export const transcripts: TableDef<typeof schema.transcripts.$inferSelect> = {
  name: "transcripts",
  columns: {
    sessionId: text("session_id"),
    sessionKey: text("session_key"),
    createdAt: integer("created_at"),
  },
};

export const messages: TableDef<typeof schema.messages.$inferSelect> = {
  name: "messages",
  columns: {
    sessionId: text("session_id"),
    seq: integer("seq"),
    id: text("id"),
    role: text("role"),
    content: json("content"),
    toolCallId: text("tool_call_id"),
    toolName: text("tool_name"),
    isError: boolean("is_error"),
    timestamp: integer("timestamp"),
    runId: text("run_id"),
    model: text("model"),
    usage: json("usage"),
    provenance: json("provenance"),
    firstKeptSeq: integer("first_kept_seq"),
  },
};

export const runs: TableDef<typeof schema.runs.$inferSelect> = {
  name: "runs",
  columns: {
    runId: text("run_id"),
    sessionKey: text("session_key"),
    sessionId: text("session_id"),
    trigger: text("trigger"),
    status: text("status"),
    createdAt: integer("created_at"),
    startedAt: integer("started_at"),
    endedAt: integer("ended_at"),
    error: text("error"),
    reply: text("reply"),
    usage: json("usage"),
    model: text("model"),
    deliver: boolean("deliver", false),
    delivered: boolean("delivered"),
    idempotencyKey: text("idempotency_key"),
  },
};

export const deliveries: TableDef<typeof schema.deliveries.$inferSelect> = {
  name: "deliveries",
  columns: {
    deliveryId: text("delivery_id"),
    kind: text("kind"),
    sessionKey: text("session_key"),
    runId: text("run_id"),
    channel: text("channel"),
    accountId: text("account_id"),
    to: text("to"),
    threadId: text("thread_id"),
    replyToMessageId: text("reply_to_message_id"),
    text: text("text"),
    status: text("status"),
    attempts: integer("attempts", zero),
    nextAttemptAt: integer("next_attempt_at"),
    lastError: text("last_error"),
    createdAt: integer("created_at"),
    updatedAt: integer("updated_at"),
    deliveredAt: integer("delivered_at"),
    partsSent: integer("parts_sent"),
  },
};

export const deadRecords: TableDef<typeof schema.deadRecords.$inferSelect> = {
  name: "dead_records",
  columns: {
    runId: text("run_id"),
    sessionKey: text("session_key"),
    error: text("error"),
    attempts: integer("attempts"),
    body: text("body"),
    createdAt: integer("created_at"),
  },
};

/** A table's columns, whatever its row type. */
export interface AnyTableDef {
  name: string;
  columns: Record<string, ColumnDef>;
}

const defs = new Map<SQLiteTable, AnyTableDef>([
  [schema.sessions, sessions],
  [schema.transcripts, transcripts],
  [schema.messages, messages],
  [schema.runs, runs],
  [schema.deliveries, deliveries],
  [schema.deadRecords, deadRecords],
]);

/** The columns of a schema table; a table not written out here is not supported. */
export function tableDef(table: SQLiteTable): AnyTableDef {
  const def = defs.get(table);
  if (!def) throw new Error("A table without columns in src/db/columns.ts is not supported");
  return def;
}

/** A value as D1 stores it (null stays null). */
export function encode(codec: Codec, value: unknown): unknown {
  if (value === null) return null;
  if (codec === "boolean") return value ? 1 : 0;
  if (codec === "json") return JSON.stringify(value);
  return value;
}

/** How a stored value becomes a row's value; null when it is the value (text, integer). */
export type Decode = ((value: unknown) => unknown) | null;

const decodeBoolean = (value: unknown): boolean => Number(value) === 1;
const decodeJson = (value: unknown): unknown => JSON.parse(value as string);

/** The decoder of a codec (applied to non-null values only). */
export function decoderOf(codec: Codec): Decode {
  return codec === "boolean" ? decodeBoolean : codec === "json" ? decodeJson : null;
}
