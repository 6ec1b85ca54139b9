/**
 * zod schemas of the shapes a SessionActor keeps in its storage and reads back (see durable.ts):
 * transcript messages, the session entry, run requests, outcomes and accepted answers. Each is
 * declared against its TypeScript type (`z.ZodType<T>`), so a required field added to the type
 * and not to the schema, or a field of another type, fails the typecheck (an optional field
 * added only to the type is kept as stored, unchecked). Objects are loose: a field written by a
 * newer deploy is kept, not refused (the version says when a shape really changed). A field
 * added after documents were first stored has a default here, so an older document reads. Pure.
 */
import { z } from "zod";
import {
  ContentSchema,
  DeliveryContextSchema,
  OriginSchema,
  ProvenanceSchema,
  TimelineSpanSchema,
  UsageSchema,
} from "../db/json-columns";
import type { SessionRow } from "../db/queries";
import type { TranscriptMessage } from "../transcript/message";
import type {
  DeliveryRoute,
  EnqueueRequest,
  EnqueueResult,
  EntryInit,
  FlowMeta,
  RunInput,
  RunOutcome,
  SpawnMeta,
} from "./types";

const str = z.string();
const num = z.number();
/** A nullable field: missing in a document written before the field existed, it is null. */
const nullableStr = str.nullable().default(null);
const nullableNum = num.nullable().default(null);
const counter = num.default(0);
const flag = z.boolean().default(false);

export const TranscriptMessageSchema: z.ZodType<TranscriptMessage> = z.looseObject({
  id: str,
  span: TimelineSpanSchema.optional(),
  seq: num.optional(),
  role: z.enum(["user", "assistant", "toolResult", "system"]),
  content: ContentSchema,
  toolCallId: str.optional(),
  toolName: str.optional(),
  isError: z.boolean().optional(),
  timestamp: num,
  runId: str.optional(),
  model: str.optional(),
  usage: UsageSchema.optional(),
  provenance: ProvenanceSchema.optional(),
  compaction: z.looseObject({ firstKeptId: str.optional(), firstKeptSeq: num.optional() }).optional(),
});

/** The session entry (its D1 row's shape); the JSON columns hold what their writers put there. */
export const SessionRowSchema: z.ZodType<SessionRow> = z.looseObject({
  key: str,
  agentId: str,
  sessionId: str,
  kind: str,
  chatType: nullableStr,
  channel: nullableStr,
  displayName: nullableStr,
  label: nullableStr,
  subject: nullableStr,
  createdAt: num,
  updatedAt: num,
  sessionStartedAt: num,
  lastInteractionAt: nullableNum,
  model: nullableStr,
  modelOverride: nullableStr,
  contextTokens: counter,
  inputTokens: counter,
  outputTokens: counter,
  totalTokens: counter,
  costUsd: counter,
  usageMode: nullableStr,
  compactionCount: counter,
  thinkingLevel: nullableStr,
  verboseLevel: nullableStr,
  systemSent: flag,
  abortedLastRun: flag,
  sendPolicy: nullableStr,
  queueMode: nullableStr,
  stateVersion: counter,
  lastChannel: nullableStr,
  lastTo: nullableStr,
  lastAccountId: nullableStr,
  lastThreadId: nullableStr,
  deliveryContext: z.union([DeliveryContextSchema, z.null()]).default(null),
  origin: z.union([OriginSchema, z.null()]).default(null),
  spawnedBy: nullableStr,
  archivedAt: nullableNum,
  runStatus: str.default("idle"),
  expiresAt: nullableNum,
  expiredAt: nullableNum,
});

export const RunInputSchema: z.ZodType<RunInput> = z.looseObject({
  text: str,
  provenance: ProvenanceSchema,
  messageId: str.optional(),
  senderName: str.optional(),
  timestamp: num,
});

const EntryInitSchema: z.ZodType<EntryInit> = z.looseObject({
  agentId: str,
  kind: str,
  chatType: z.enum(["direct", "group", "channel"]),
  channel: nullableStr,
  displayName: str.optional(),
  subject: str.optional(),
  spawnedBy: str.optional(),
  label: str.optional(),
});

const RunStatusSchema = z.enum(["queued", "running", "ok", "error", "aborted", "timeout", "budget_exceeded"]);

const FlowMetaSchema: z.ZodType<FlowMeta> = z.looseObject({
  flowId: str,
  hop: num,
  requesterKey: str,
  targetKey: str,
  phase: z.enum(["primary", "reply", "announce"]),
  round: num,
  maxRounds: num,
  originalMessage: str,
  firstReply: str.optional(),
  latestReply: str.optional(),
  requesterInit: EntryInitSchema,
});

const SpawnMetaSchema: z.ZodType<SpawnMeta> = z.looseObject({
  requesterKey: str,
  requesterRoute: DeliveryContextSchema.optional(),
  requesterInit: EntryInitSchema,
  cleanup: z.enum(["keep", "delete"]),
  phase: z.enum(["task", "announce"]),
  task: z
    .looseObject({
      runId: str,
      status: RunStatusSchema,
      error: str.optional(),
      reply: str.optional(),
      lastToolResult: str.optional(),
      startedAt: num,
      endedAt: num,
      inputTokens: num,
      outputTokens: num,
      costUsd: num.nullable().optional(),
    })
    .optional(),
});

export const DeliveryRouteSchema: z.ZodType<DeliveryRoute> = z.looseObject({
  channel: str,
  to: str,
  accountId: str,
  threadId: str.optional(),
  postTo: str.optional(),
  replyToMessageId: str.optional(),
  replyContext: str.optional(),
});

export const EnqueueRequestSchema: z.ZodType<EnqueueRequest> = z.looseObject({
  sessionKey: str,
  runId: str,
  trigger: z.enum(["inbound", "send", "spawn", "a2a_reply", "announce", "hook", "cron", "rpc", "compact"]),
  inputs: z.array(RunInputSchema),
  deliver: z.boolean(),
  route: DeliveryRouteSchema.optional(),
  origin: OriginSchema.optional(),
  init: EntryInitSchema,
  userInteraction: flag,
  sender: z.looseObject({ channel: str, id: str }).optional(),
  freshSession: z.boolean().optional(),
  overrideBudget: z.boolean().optional(),
  hasThread: flag,
  idempotencyKey: str.optional(),
  timeoutSeconds: num.optional(),
  model: str.optional(),
  flow: FlowMetaSchema.optional(),
  spawn: SpawnMetaSchema.optional(),
  hook: z.looseObject({ name: str.optional(), wake: z.boolean().optional() }).optional(),
  compact: z.looseObject({ instructions: str.optional() }).optional(),
  inbound: z.looseObject({ channel: str, accountId: str, messageId: str }).optional(),
  steer: z.boolean().optional(),
});

export const RunOutcomeSchema: z.ZodType<RunOutcome> = z.looseObject({
  runId: str,
  status: RunStatusSchema,
  startedAt: num.optional(),
  endedAt: num.optional(),
  error: str.optional(),
  reply: str.optional(),
  delivery: z.enum(["none", "blocked", "delivered", "retrying", "dead", "pending"]).optional(),
});

export type Accepted = Extract<EnqueueResult, { ok: true }>;

export const AcceptedSchema: z.ZodType<Accepted> = z.looseObject({
  ok: z.literal(true),
  runId: str,
  sessionKey: str,
  sessionId: str,
  status: z.enum(["queued", "duplicate", "command", "steered"]),
  waitingOn: z.array(str).optional(),
});
