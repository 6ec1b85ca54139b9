/**
 * The ports of a SessionActor's modules: each module names the few capabilities it uses (as a
 * host hands its capabilities a small interface), and the actor (actor.ts) builds one object
 * that satisfies them all. A module reaches nothing else of the actor, and a test can hand a
 * module a small fake. `env` and `config` are read on every access because an instance's
 * bindings can be replaced (tests rewire them).
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

/** Everything the actor has; modules take a `Pick` of it (the ports below), never the whole. */
export interface ActorParts {
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

type Records<K extends keyof ActorRecords> = { readonly records: Pick<ActorRecords, K> };
type Store<K extends keyof ActorStore> = { readonly store: Pick<ActorStore, K> };
type Queue<K extends keyof RunQueue> = { readonly queue: Pick<RunQueue, K> };
type Outbox<K extends keyof DeliveryOutbox> = { readonly outbox: Pick<DeliveryOutbox, K> };
type Context<K extends keyof ContextStore> = { readonly context: Pick<ContextStore, K> };

/** Deliveries posted now or queued (outbound.ts). */
export type OutboundPort = Pick<ActorParts, "scheduleAlarm"> & Outbox<"payload" | "add" | "attemptWithin">;

/** Admission of a run (admission.ts): dedupe, the entry, the queue and the accept's records. */
export type AdmissionPort = Pick<ActorParts, "config" | "live" | "scheduleAlarm"> &
  Store<"accepted" | "entry" | "saveEntry" | "recordAccepted" | "hasHistory"> &
  Queue<"summary" | "insert" | "updateSpec"> &
  Records<"runAccepted">;

/** The turn context a report or a turn reads (context-report.ts). */
export type ContextPort = Pick<ActorParts, "config"> &
  Context<"ready" | "hydrate" | "load"> &
  Records<"turnContext">;

/** Compaction and the memory-flush turn (compactor.ts). */
export type CompactionPort = Store<"entry" | "saveEntry"> &
  Context<"compacted" | "load"> &
  Records<"messagesAppended" | "runStarted" | "runsEnded">;

/** Flow hand-offs and announcements (flow-runner.ts). */
export type FlowPort = OutboundPort &
  Pick<ActorParts, "env" | "config" | "enqueue"> &
  Store<"announced" | "recordAnnounced" | "entry" | "saveEntry" | "markHistory"> &
  Records<"messagesAppended" | "sessionStarted">;

/** A run's turn: model, tools, compaction, notices (executor.ts). */
export type TurnPort = OutboundPort &
  ContextPort &
  CompactionPort &
  Pick<ActorParts, "env" | "config" | "live"> &
  Store<"entry" | "saveEntry">;

/** The run lifecycle (lifecycle.ts): the queue head from its start to leaving the queue. */
export type LifecyclePort = TurnPort &
  FlowPort &
  Pick<ActorParts, "waiters" | "remove"> &
  Store<"entry" | "saveEntry" | "markHistory" | "recordFinished"> &
  Queue<
    | "beginAttempt"
    | "attemptFailed"
    | "start"
    | "progress"
    | "saveProgress"
    | "othersWaiting"
    | "rows"
    | "remove"
  > &
  Outbox<"payload" | "addAndAttempt"> &
  Records<"runStarted" | "runFinished" | "runsEnded">;

/** Chat commands (commands.ts): they admit (`/compact`), post notices and read the context. */
export type CommandPort = AdmissionPort &
  OutboundPort &
  ContextPort &
  Pick<ActorParts, "env" | "abort"> &
  Queue<"rows"> &
  Records<"entryPatched" | "sessionStarted" | "spawnedChildren">;
