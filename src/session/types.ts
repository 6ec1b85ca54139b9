/** Shapes shared by the Worker and the SessionActor (they cross the DO RPC boundary). */
import type { DeliveryContext, Origin } from "../db/queries";
import type { Provenance } from "./transcript";

export type RunTrigger = "inbound" | "send" | "spawn" | "a2a_reply" | "announce" | "hook" | "cron" | "rpc";
export type RunStatus = "queued" | "running" | "ok" | "error" | "aborted" | "timeout";
export const TERMINAL: ReadonlySet<string> = new Set(["ok", "error", "aborted", "timeout"]);

export interface RunInput {
  text: string;
  provenance: Provenance;
  messageId?: string;
  senderName?: string;
  timestamp: number;
}

export interface DeliveryRoute extends DeliveryContext {
  replyToMessageId?: string;
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
  /** A message from a person: refreshes idle freshness, checks expiry and reset triggers. */
  userInteraction: boolean;
  hasThread: boolean;
  idempotencyKey?: string;
  timeoutSeconds?: number;
  model?: string;
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
      status: "queued" | "duplicate" | "command";
    }
  | ActorError;

export interface RunOutcome {
  runId: string;
  status: RunStatus;
  startedAt?: number;
  endedAt?: number;
  error?: string;
  reply?: string;
}

export interface WaitResult {
  runId: string;
  status: "ok" | "error" | "aborted" | "timeout";
  runStatus: RunStatus;
  startedAt?: number;
  endedAt?: number;
  error?: string;
  reply?: string;
}
