/**
 * Tool contract: every tool is declared once with a zod schema, which gives the model its JSON
 * schema, validates the model's (or HTTP caller's) arguments, and types `execute`. Tools return
 * JSON; expected failures are results (`{ status: "error" | "forbidden", error }`), not throws.
 */
import type { z } from "zod";
import type { Config } from "../config/schema";
import type { SessionRow } from "../db/queries";
import type {
  ActorError,
  EnqueueRequest,
  EnqueueResult,
  QueueDepth,
  RunTrigger,
  WaitResult,
} from "../runs/types";
import type { Provenance } from "../transcript/message";

/** The session on whose behalf a tool runs (visibility and policy are decided from it). */
export interface CallerContext {
  /** Canonical key of the acting session. */
  sessionKey: string;
  agentId: string;
  /** The acting session's entry; absent when it has never been used (e.g. a fresh main key over HTTP). */
  entry?: SessionRow;
  /** The run making the call; absent for /tools/invoke. */
  runId?: string;
  trigger: RunTrigger | "http";
  /** Set when the acting run was triggered by an inter-session message. */
  flow?: { flowId: string; hop: number };
}

/**
 * What tools may ask of sessions (their SessionActors): queue a run, wait for one, read a queue's
 * depth. Passed in by whoever runs the tool, so tools never reach into the session layer.
 */
export interface SessionPort {
  enqueue(req: EnqueueRequest): Promise<EnqueueResult>;
  waitForRun(sessionKey: string, runId: string, timeoutMs: number): Promise<WaitResult | ActorError>;
  queueDepth(sessionKey: string): Promise<QueueDepth>;
  /** The session's stateVersion, and its signal log's events after `since` when given (SPEC §20). */
  stateChanges(sessionKey: string, since: number | undefined): Promise<SessionState>;
  /** Appends `message` to the session's transcript without a run (sessions_send `notify`). */
  note(sessionKey: string, message: NoteMessage): Promise<{ ok: true } | ActorError>;
  /** What a run the session holds (queued or running) was asked: its inputs' text. */
  runInput(sessionKey: string, runId: string): Promise<string | undefined>;
  /** Aborts the session's running run (and drops its waiting ones with `clearQueue`). */
  abort(sessionKey: string, clearQueue: boolean): Promise<{ aborted: number }>;
}

/** A session's state as its actor knows it (SPEC §20 "State awareness"). */
export interface SessionState {
  /** Whether the session exists (has an entry). */
  exists?: boolean;
  stateVersion: number;
  events?: Array<{
    version: number;
    kind: string;
    actor: string;
    at: number;
    summary: string;
    runId?: string;
    outcome?: string;
    by?: string;
  }>;
  historyGap?: boolean;
}

/** A message noted in a session's transcript without a run: its id makes a repeat a no-op. */
export interface NoteMessage {
  id: string;
  text: string;
  provenance: Provenance;
}

export interface ToolContext {
  caller: CallerContext;
  sessions: SessionPort;
  /**
   * The model's tool call id (or `http:<idempotencyKey>` over /tools/invoke): stable across a
   * resumed run, but unique only within its caller; ids derived from it go through `callSeed`.
   */
  toolCallId: string;
  /**
   * When the model asked for this call (the time of the assistant message holding it; absent
   * over HTTP). A resumed run repeats an unanswered call with the same time, so a deadline a
   * tool counts from it (sessions_send's wait) is not started again by a restart.
   */
  calledAt?: number;
  config: Config;
  env: Env;
  /**
   * Marks the acting run as waiting on another session until the returned function is called
   * (set inside runs; sessions_send uses it to detect two sessions waiting on each other).
   */
  onWait?: (targetKey: string) => () => void;
}

/**
 * A seed unique to one tool call across every caller, for the ids derived from it (run ids,
 * child session keys), so that a repeated call maps to the same ids and two callers never do.
 * Inside a run: the run id and the model's call id (models repeat call ids across runs, run ids
 * are unique). Over /tools/invoke: the acting session and the HTTP idempotency key — two sessions
 * that happen to use the same key get two runs, the same session with the same key one (SPEC §5).
 */
export function callSeed(ctx: Pick<ToolContext, "caller" | "toolCallId">): string {
  return `${ctx.caller.runId ?? `http:${ctx.caller.sessionKey}`}:${ctx.toolCallId}`;
}

export interface AgentTool<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  schema: S;
  execute(input: z.output<S>, ctx: ToolContext): Promise<unknown>;
  /**
   * Whether a result of this tool ends the turn (no further model step), and the run's reply
   * then: the agent loop reads it from the checkpoint, so a resumed run ends the same way.
   */
  endsTurn?(result: unknown): { reply: string } | undefined;
}

export function defineTool<S extends z.ZodType>(tool: AgentTool<S>): AgentTool {
  return tool as unknown as AgentTool;
}

export type ToolFailure = { status: "error" | "forbidden"; error: string };

export function toolError(error: string): ToolFailure {
  return { status: "error", error };
}

export function forbidden(error: string): ToolFailure {
  return { status: "forbidden", error };
}

export function isToolFailure(value: unknown): value is ToolFailure {
  const v = value as { status?: unknown; error?: unknown } | null;
  return (
    typeof v === "object" &&
    v !== null &&
    (v.status === "error" || v.status === "forbidden") &&
    typeof v.error === "string"
  );
}
