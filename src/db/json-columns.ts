/**
 * The D1 columns that hold JSON: each one's type and zod schema, and `json()`, the column
 * schema.ts declares them with. A value is written as its JSON text and read back through the
 * column's schema, by drizzle's queries and by the plain statements of reads.ts alike (both
 * call the column's decoder), so a row holding something else fails loudly, naming the column,
 * instead of being cast to a type it does not have. Objects are loose: a field a newer deploy
 * writes is kept.
 */
import { customType } from "drizzle-orm/sqlite-core";
import { z } from "zod";
import type { ContentPart, Provenance, TimelineSpan, Usage } from "../transcript/message";

const str = z.string();
const num = z.number();

/** Where a session's replies go (sessions.delivery_context). */
export interface DeliveryContext {
  channel: string;
  /** The peer or group the chat is with, as keys and listings name it. */
  to: string;
  accountId: string;
  threadId?: string;
  /**
   * Where its connector posts, when that is not `to` (connectors/types.ts `PlatformMessage`): a
   * Discord DM's channel. A delivery made on this route is addressed there.
   */
  postTo?: string;
}

/** Where a session's messages came from (sessions.origin). */
export interface Origin {
  label?: string;
  provider?: string;
  from?: string;
  to?: string;
  accountId?: string;
  threadId?: string;
}

/** One invocation of a maintenance task (maintenance.last_run, last_work). */
export interface TaskRun {
  at: number;
  durationMs: number;
  /** Whether this invocation changed anything (kept as `lastWork` if so). */
  worked: boolean;
  [count: string]: unknown;
}

export const DeliveryContextSchema: z.ZodType<DeliveryContext> = z.looseObject({
  channel: str,
  to: str,
  accountId: str,
  threadId: str.optional(),
  postTo: str.optional(),
});

export const OriginSchema: z.ZodType<Origin> = z.looseObject({
  label: str.optional(),
  provider: str.optional(),
  from: str.optional(),
  to: str.optional(),
  accountId: str.optional(),
  threadId: str.optional(),
});

export const ProvenanceSchema: z.ZodType<Provenance> = z.looseObject({
  kind: z.enum(["external_user", "inter_session", "internal_system", "subagent_announce"]),
  sourceSessionKey: str.optional(),
  sourceChannel: str.optional(),
  sourceTool: str.optional(),
});

export const ContentPartSchema: z.ZodType<ContentPart> = z.union([
  z.looseObject({ type: z.literal("text"), text: str }),
  z.looseObject({ type: z.literal("toolCall"), id: str, name: str, arguments: z.unknown() }),
  z.looseObject({
    type: z.enum(["image", "audio", "file"]),
    mediaId: str,
    mimeType: str,
    bytes: num,
    name: str.optional(),
    transcript: str.optional(),
  }),
]);

/** A transcript message's parts (messages.content). */
export const ContentSchema = z.array(ContentPartSchema);

export const UsageSchema: z.ZodType<Usage> = z.looseObject({
  inputTokens: num,
  outputTokens: num,
  totalTokens: num,
  cacheReadTokens: num.optional(),
  cacheWriteTokens: num.optional(),
  modelCalls: num.optional(),
  unpricedCalls: num.optional(),
  costUsd: num.nullable().optional(),
});

export const TimelineSpanSchema: z.ZodType<TimelineSpan> = z.looseObject({
  phase: z.enum(["queued", "model", "tool", "delivery"]),
  name: str.optional(),
  startedAt: num,
  ms: num,
  outcome: str.optional(),
});

export const TimelineSchema = z.array(TimelineSpanSchema);

export const TaskRunSchema: z.ZodType<TaskRun> = z.looseObject({
  at: num,
  durationMs: num,
  worked: z.boolean(),
});

/** A list of D1 binding names (storage_placement.databases, moving_to). */
export const NameListSchema = z.array(str);

/** Row counts by table (storage_placement.counts). */
export const CountsSchema = z.record(str, num);

/** The stored JSON of `column` read through `schema`; what does not fit throws, naming the column. */
export function decodeJson<T>(column: string, schema: z.ZodType<T>, text: unknown): T {
  const parsed = schema.safeParse(JSON.parse(String(text)));
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const at = issue?.path.length ? ` at ${issue.path.join(".")}` : "";
  throw new Error(`${column} holds JSON its schema refuses${at}: ${issue?.message ?? "invalid"}`);
}

/** A text column holding `schema`'s values as JSON. */
export function json<T>(name: string, schema: z.ZodType<T>) {
  return customType<{ data: T; driverData: string }>({
    dataType: () => "text",
    toDriver: (value) => JSON.stringify(value),
    fromDriver: (text) => decodeJson(name, schema, text),
  })(name);
}
