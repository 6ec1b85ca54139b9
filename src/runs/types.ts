/**
 * The run contract: what a request to run an agent turn in a session carries, and what comes
 * back (enqueue results, outcomes, waits, queue depth). These shapes cross the Durable Object
 * RPC boundary between the Worker, the tools and the SessionActor, so they live below all three.
 */
import type { DeliveryContext, Origin } from "../db/json-columns";
import type { MediaPart, MediaRef, Provenance } from "../transcript/message";

export type RunTrigger =
  | "inbound"
  | "send"
  | "spawn"
  | "a2a_reply"
  | "announce"
  | "hook"
  | "cron"
  | "rpc"
  /** A compaction run: `/compact`, `sessions.compact`, or one made before a turn's first model call. */
  | "compact";
export type RunStatus = "queued" | "running" | "ok" | "error" | "aborted" | "timeout" | "budget_exceeded";
export const TERMINAL: ReadonlySet<string> = new Set([
  "ok",
  "error",
  "aborted",
  "timeout",
  "budget_exceeded",
]);

export interface RunInput {
  text: string;
  /** Files the message carries, fetched and stored when its run starts (SPEC §22). */
  media?: MediaRef[];
  /** The files as stored (set when the run has fetched them: the user message's parts). */
  parts?: MediaPart[];
  provenance: Provenance;
  messageId?: string;
  senderName?: string;
  timestamp: number;
}

export interface DeliveryRoute extends DeliveryContext {
  replyToMessageId?: string;
  /** What a platform connector needs to answer this message (see connectors/types.ts); not in D1. */
  replyContext?: string;
}

/** What the entry looks like when this request creates it. */
export interface EntryInit {
  agentId: string;
  kind: string;
  chatType: "direct" | "group" | "channel";
  channel: string | null;
  displayName?: string;
  subject?: string;
  spawnedBy?: string;
  label?: string;
}

/**
 * An agent-to-agent exchange started by `sessions_send` (SPEC §6): the primary run in the
 * target, reply-back rounds alternating requester/target, then the announce step in the target.
 */
export interface FlowMeta {
  flowId: string;
  /** Hop count of the inter-session message that started this exchange. */
  hop: number;
  requesterKey: string;
  targetKey: string;
  phase: "primary" | "reply" | "announce";
  /** 0 for the primary run, 1.. for reply-back rounds. */
  round: number;
  maxRounds: number;
  originalMessage: string;
  /** The target's reply to the original message (round 1 of the exchange). */
  firstReply?: string;
  /** The latest non-skip reply of the exchange. */
  latestReply?: string;
  /** Creates the requester's entry if a reply round reaches a session that does not exist yet. */
  requesterInit: EntryInit;
}

/** A sub-agent run started by `sessions_spawn` (SPEC §6), and its announce step. */
export interface SpawnMeta {
  requesterKey: string;
  /** The requester's chat route captured at spawn time. */
  requesterRoute?: DeliveryContext;
  /** Creates the requester's entry if the announcement reaches a session that does not exist. */
  requesterInit: EntryInit;
  cleanup: "keep" | "delete";
  phase: "task" | "announce";
  /** Set on the announce step: how the task run ended. */
  task?: {
    runId: string;
    status: RunStatus;
    error?: string;
    reply?: string;
    lastToolResult?: string;
    startedAt: number;
    endedAt: number;
    inputTokens: number;
    outputTokens: number;
    /** US dollars of its priced model calls; null when none had a price (SPEC §21). */
    costUsd?: number | null;
  };
}

export interface EnqueueRequest {
  sessionKey: string;
  runId: string;
  trigger: RunTrigger;
  inputs: RunInput[];
  /** Deliver the reply to `route` (or the session's delivery route) when the run ends. */
  deliver: boolean;
  route?: DeliveryRoute;
  origin?: Origin;
  init: EntryInit;
  /** A message from a person: refreshes idle freshness, checks reset triggers and commands. */
  userInteraction: boolean;
  /** Who sent an inbound message (owner-only commands check it). */
  sender?: { channel: string; id: string };
  /** Start a new sessionId for this run, keeping the key's settings (isolated scheduled jobs). */
  freshSession?: boolean;
  /** An operator's message run past the agent's budgets (SPEC §21). */
  overrideBudget?: boolean;
  hasThread: boolean;
  idempotencyKey?: string;
  timeoutSeconds?: number;
  model?: string;
  flow?: FlowMeta;
  spawn?: SpawnMeta;
  /** Set for runs started through `/hooks/agent` (`name`: the caller's label) or `/hooks/wake`. */
  hook?: { name?: string; wake?: boolean };
  /** A compaction run (`/compact [instructions]`, `sessions.compact`): summarizes instead of a turn. */
  compact?: { instructions?: string };
  /** For webhooks: the connector message the run answers (channel, account, messageId). */
  inbound?: { channel: string; accountId: string; messageId: string };
  /** Steer the running run with this message whatever the queue mode (`/steer`, sessions_send `steer`). */
  steer?: boolean;
}

export type ActorError = {
  ok: false;
  code: "INVALID_REQUEST" | "NOT_FOUND" | "CONFLICT" | "RATE_LIMITED" | "FORBIDDEN";
  message: string;
};

export type EnqueueResult =
  | {
      ok: true;
      runId: string;
      sessionKey: string;
      sessionId: string;
      /** `steered`: added to the running run `runId` (SPEC §20), no run of its own. */
      status: "queued" | "duplicate" | "command" | "steered";
      /** Sessions the target's current run is waiting on (sessions_send uses it to avoid deadlocks). */
      waitingOn?: string[];
    }
  | ActorError;

/**
 * What became of a finished run's delivery: `none` (nothing to post, or no route), `blocked`
 * (send policy), or the state of its first attempt (`delivered`, `retrying`, `dead`); `pending`
 * when a resumed finalize found it already handed to the outbox.
 */
export type DeliveryState = "none" | "blocked" | "delivered" | "retrying" | "dead" | "pending";

export interface RunOutcome {
  runId: string;
  status: RunStatus;
  startedAt?: number;
  endedAt?: number;
  error?: string;
  reply?: string;
  /** Set once the run is finalized. */
  delivery?: DeliveryState;
}

export interface WaitResult {
  runId: string;
  status: "ok" | "error" | "aborted" | "timeout";
  runStatus: RunStatus;
  startedAt?: number;
  endedAt?: number;
  error?: string;
  reply?: string;
  delivery?: DeliveryState;
}

/** How much work a session's actor holds: waiting runs (not counting the running one). */
export interface QueueDepth {
  waiting: number;
  running: boolean;
}
