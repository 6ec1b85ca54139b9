/**
 * Every JSON document a SessionActor keeps in its own storage, as a versioned codec (see
 * runs/durable.ts): nothing the actor wrote is read back without its schema, so a deploy in
 * the middle of a run cannot misread what the previous version left.
 *
 *   document          where                         version
 *   entry             kv `entry`                    1
 *   queued run        queue.spec                    1
 *   run progress      queue.checkpoint              1  (produced messages as placeholders)
 *   run step          run_steps.message, context    1  (a transcript message)
 *   outcome           run_ids.outcome               1
 *   accepted answer   run_ids.result                1  (an announcement's row is never read)
 *   deferred record   d1_pending.body               1  (written by earlier versions, read once)
 *   context state     kv `ctx:<sessionId>`          1
 *   delivery payload  outbox.payload                1  (delivery/schemas.ts)
 *   delivery outcome  outbox.state                  1  (delivery/schemas.ts)
 *
 * Pure: schemas and codecs only.
 */
import { z } from "zod";
import type { RunCheckpoint } from "../../agent/checkpoint";
import type { SessionRow } from "../../db/queries";
import type { deliveries, runs } from "../../db/schema";
import { durableCodec } from "../../runs/durable";
import {
  AcceptedSchema,
  DeliveryRouteSchema,
  EnqueueRequestSchema,
  RunInputSchema,
  RunOutcomeSchema,
  SessionRowSchema,
  TranscriptMessageSchema,
} from "../../runs/schemas";
import type { DeliveryRoute, EnqueueRequest, RunInput, RunOutcome } from "../../runs/types";
import type { TranscriptMessage } from "../../transcript/message";

// ---------------------------------------------------------------------------------------------
// The documents' types

/** What the queue holds for a run: its request and the sessionId it runs in. */
export interface QueuedRun {
  req: EnqueueRequest;
  sessionId: string;
  /** Set when this run is the greeting turn of a bare reset trigger. */
  greeting?: boolean;
}

/** A compaction's resume points, kept in the run's checkpoint. */
export interface CompactionProgress {
  /** The run the compaction is recorded as. */
  runId: string;
  startedAt: number;
  flush?: RunCheckpoint;
  flushed?: boolean;
  summary?: {
    text: string;
    firstKeptId?: string;
    summarized: number;
    kept: number;
    tokensBefore: number;
    inputTokens: number;
    outputTokens: number;
  };
  applied?: boolean;
  /** Set when nothing could be summarized. */
  nothing?: boolean;
  /** A compaction inside a turn: its run row was written, and then its end. */
  recorded?: boolean;
  ended?: boolean;
}

/** A running run's checkpoint: how far it got, so that a restart resumes instead of repeating. */
export interface RunProgress {
  startedAt: number;
  loop: RunCheckpoint;
  /** A compaction made by this run (a compaction run, or one before a turn's first model call). */
  compaction?: CompactionProgress;
  /** Present once the run has ended and is being finalized (idempotent re-entry). */
  outcome?: RunOutcome;
  /**
   * How many of `loop.produced` the run's records leave out (known stored, or given up on when
   * a run that D1 refuses ends: lifecycle.ts `giveUp`). A step's messages are checkpointed and
   * reach D1 with the run's finalize, not on round trips of their own.
   */
  stored?: number;
  /** Set when a run given up on is recorded without its inputs (one of them may be what D1 refuses). */
  inputsLeftOut?: boolean;
  /** Notes of watched sessions that changed (SPEC §20), shown in this run's system prompt. */
  notes?: string[];
  /** The run's inputs with their files fetched and kept (SPEC §22), once that is done. */
  inputs?: RunInput[];
  /**
   * The reply's preview on the chat (SPEC §22 streaming), from when it was posted: a resumed
   * run edits the same one, and its reply takes its place (or deletes it).
   */
  preview?: { messageId: string; finalEdits: boolean; notBefore?: number };
}

/**
 * A run's records as the journal keeps them: `accepted` (the entry, the run row; with
 * `starting` once the run's start was folded in: the row is then written running, with those
 * messages), `started` (a start whose accept already reached D1) or `finished` (a run's
 * finalize written behind while the next run of a busy session goes on: the run row as it
 * ended, its last messages in `starting`, its delivery).
 */
export interface DeferredRecord {
  kind?: "accepted" | "started" | "finished";
  entry: SessionRow;
  run: typeof runs.$inferInsert;
  starting?: TranscriptMessage[];
  /** Kept by earlier versions (the inbound dedupe row, now the actor's alone); not written. */
  inbound?: { channel: string; accountId: string; messageId: string };
  /** A finished run's delivery, with its first attempt's state. */
  delivery?: typeof deliveries.$inferInsert;
  /** False when the transcript's row is known to exist (absent in rows of earlier versions: written). */
  newTranscript?: boolean;
}

// ---------------------------------------------------------------------------------------------
// Their schemas

const num = z.number();
const str = z.string();

const QueuedRunSchema: z.ZodType<QueuedRun> = z.looseObject({
  req: EnqueueRequestSchema,
  sessionId: str,
  greeting: z.boolean().optional(),
});

/**
 * A checkpoint as stored: `produced` holds a placeholder (0) per message, the messages being
 * rows of `run_steps`; a checkpoint saved whole by an earlier version holds the messages.
 */
const CheckpointSchema: z.ZodType<RunCheckpoint> = z.looseObject({
  step: num,
  produced: z.array(z.union([z.literal(0), TranscriptMessageSchema])) as unknown as z.ZodType<
    RunCheckpoint["produced"]
  >,
  inputTokens: num,
  outputTokens: num,
  lastCallTokens: num,
  cacheReadTokens: num.optional(),
  cacheWriteTokens: num.optional(),
  modelCalls: num.optional(),
  unpricedCalls: num.optional(),
  costUsd: num.optional(),
  reasoning: z
    .record(str, z.array(z.looseObject({ type: z.literal("reasoning"), text: str })))
    .optional() as unknown as z.ZodType<RunCheckpoint["reasoning"]>,
});

const CompactionProgressSchema: z.ZodType<CompactionProgress> = z.looseObject({
  runId: str,
  startedAt: num,
  flush: CheckpointSchema.optional(),
  flushed: z.boolean().optional(),
  summary: z
    .looseObject({
      text: str,
      firstKeptId: str.optional(),
      summarized: num,
      kept: num,
      tokensBefore: num,
      inputTokens: num,
      outputTokens: num,
    })
    .optional(),
  applied: z.boolean().optional(),
  nothing: z.boolean().optional(),
  recorded: z.boolean().optional(),
  ended: z.boolean().optional(),
});

const RunProgressSchema: z.ZodType<RunProgress> = z.looseObject({
  startedAt: num,
  loop: CheckpointSchema,
  compaction: CompactionProgressSchema.optional(),
  outcome: RunOutcomeSchema.optional(),
  stored: num.optional(),
  inputsLeftOut: z.boolean().optional(),
  notes: z.array(str).optional(),
  inputs: z.array(RunInputSchema).optional(),
  preview: z.strictObject({ messageId: str, finalEdits: z.boolean(), notBefore: num.optional() }).optional(),
});

const DeferredRecordSchema: z.ZodType<DeferredRecord> = z.looseObject({
  kind: z.enum(["accepted", "started", "finished"]).optional(),
  entry: SessionRowSchema,
  run: z.looseObject({
    runId: str,
    sessionKey: str,
    sessionId: str,
    trigger: str,
    status: z.enum(["queued", "running", "ok", "error", "aborted", "timeout", "budget_exceeded"]),
    createdAt: num,
    startedAt: num.nullable().optional(),
    deliver: z.boolean().optional(),
    idempotencyKey: str.nullable().optional(),
    // A run whose end was folded in (see records.ts `runFinished`).
    endedAt: num.nullable().optional(),
    error: str.nullable().optional(),
    reply: str.nullable().optional(),
    model: str.nullable().optional(),
    usage: z.unknown().optional(),
    timeline: z.unknown().optional(),
    delivered: z.boolean().nullable().optional(),
  }) as unknown as z.ZodType<DeferredRecord["run"]>,
  starting: z.array(TranscriptMessageSchema).optional(),
  inbound: z.looseObject({ channel: str, accountId: str, messageId: str }).optional(),
  newTranscript: z.boolean().optional(),
  delivery: z
    .looseObject({ deliveryId: str, kind: str, sessionKey: str, text: str, status: str, createdAt: num })
    .optional() as unknown as z.ZodType<DeferredRecord["delivery"]>,
});

export const entryCodec = durableCodec("session entry", 1, SessionRowSchema);
export const queuedRunCodec = durableCodec("queued run", 1, QueuedRunSchema);
export const progressCodec = durableCodec("run progress", 1, RunProgressSchema);
export const stepCodec = durableCodec("run step", 1, TranscriptMessageSchema);
export const outcomeCodec = durableCodec("run outcome", 1, RunOutcomeSchema);
export const acceptedCodec = durableCodec("accepted answer", 1, AcceptedSchema);
export const deferredRecordCodec = durableCodec("deferred record", 1, DeferredRecordSchema);
/**
 * A session that yielded to its sub-agents (SPEC §20 `sessions_yield`): the run that yielded,
 * and the child sessions whose announcements it still waits for (each starts a run here).
 * `calling`: run `runId` called sessions_yield and has not ended yet; until it does, the
 * announcement of any of the session's sub-agents starts a run.
 */
export interface YieldState {
  runId: string;
  since: number;
  waitingOn: string[];
  calling?: boolean;
}
export const yieldCodec = durableCodec(
  "yield",
  1,
  z.looseObject({
    runId: str,
    since: num,
    waitingOn: z.array(str),
    calling: z.boolean().optional(),
  }) as z.ZodType<YieldState>,
);
/**
 * Messages steering the running run `runId` (SPEC §20 steering), in arrival order, each with the
 * id of the request that brought it and the route its answer goes to: taken into the run before
 * its next model step, or queued as a follow-up run when the run ends first (which answers the
 * last of them).
 */
export interface SteerState {
  runId: string;
  items: Array<{ id: string; input: RunInput; route?: DeliveryRoute }>;
}
export const steerCodec = durableCodec(
  "steer",
  1,
  z.looseObject({
    runId: str,
    items: z.array(z.looseObject({ id: str, input: RunInputSchema, route: DeliveryRouteSchema.optional() })),
  }) as unknown as z.ZodType<SteerState>,
);
/** The sessions this session watches (SPEC §20), each with the version of its log it has seen. */
export const watchingCodec = durableCodec(
  "watching",
  1,
  z.looseObject({ watches: z.array(z.looseObject({ key: str, seen: num })) }) as unknown as z.ZodType<{
    watches: Array<{ key: string; seen: number }>;
  }>,
);
export const contextStateCodec = durableCodec(
  "context state",
  1,
  z.looseObject({ summary: str.optional() }) as z.ZodType<{ summary?: string }>,
);
