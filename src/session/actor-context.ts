/**
 * What the modules of one SessionActor share: its storage, run queue, outbox, D1 records,
 * turn context copy, waiters and live run state, plus the few actor operations they call back into. The actor
 * builds one of these over itself; `env` and `config` are read on every access because an
 * instance's bindings can be replaced (tests rewire them).
 */
import type { Config } from "../config/schema";
import type { DeliveryOutbox } from "../delivery/outbox";
import type { EnqueueRequest, EnqueueResult } from "../runs/types";
import type { ActorStore } from "./actor-store";
import type { ContextStore } from "./context-store";
import type { ActorRecords } from "./records";
import type { RunQueue } from "./run-queue";
import type { RunWaiters } from "./waiters";

/** In-memory state of the run executing now; it describes live work only. */
export interface LiveRun {
  current?: { runId: string; controller: AbortController };
  /** Sessions the current run is waiting on (sessions_send), with a count per key. */
  waitingOn: Map<string, number>;
}

export interface ActorContext {
  readonly env: Env;
  readonly config: Config;
  readonly store: ActorStore;
  readonly queue: RunQueue;
  readonly outbox: DeliveryOutbox;
  readonly records: ActorRecords;
  /** The turn context copy (latest summary and the messages after it). */
  readonly context: ContextStore;
  readonly waiters: RunWaiters;
  readonly live: LiveRun;
  /** Sets the alarm for the queue head (now) or the next due delivery, or clears it. */
  scheduleAlarm(): Promise<void>;
  /** Enqueues into this same actor, without an RPC hop (flow and announce steps). */
  enqueue(req: EnqueueRequest): Promise<EnqueueResult>;
  /** Aborts the running run and, with `clearQueue`, drops the waiting ones. */
  abort(sessionKey: string, clearQueue: boolean): Promise<{ aborted: number }>;
  remove(sessionKey: string, deleteTranscript: boolean): Promise<{ deleted: boolean; aborted: number }>;
}
