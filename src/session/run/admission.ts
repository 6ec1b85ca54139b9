/**
 * Admission of a run into a SessionActor (SPEC §4 steps after routing): dedupe by run id,
 * freshness and automatic reset, reset triggers, then collect-merge or queue-cap, and the
 * records. The run is `queued` once its queue row is stored (see lifecycle.ts); a connector's
 * message has its records journaled in that same synchronous step (written behind, see
 * records.ts), any other run's are written to D1 before the answer, so the caller can read them
 * by id at once. The decision is one synchronous critical section over the actor's storage.
 */

import type { Config } from "../../config/schema";
import type { SessionRow } from "../../db/queries";
import type { EnqueueRequest, EnqueueResult, RunInput } from "../../runs/types";
import { boundedText, MAX_MESSAGE_CHARS, type TranscriptMessage } from "../../transcript/message";
import { repliesToChat } from "../chat/posts";
import type { ActorRecords } from "../d1/records";
import { matchResetTrigger } from "../entry/reset-trigger";
import { applyRoute, entryExpiry, isStale, newSessionRow, resetEntry } from "../entry/rules";
import type { ActorStore } from "../storage/store";
import { abortCurrent, type LiveRun } from "./live";
import { type QueuedRun, type RunQueue, specOf } from "./queue";

/** What admission uses of the actor: its entry and run ids, the queue, the accept's records. */
export interface AdmissionHost {
  readonly config: Config;
  readonly store: Pick<
    ActorStore,
    | "accepted"
    | "entry"
    | "saveEntry"
    | "keepAnswer"
    | "hasHistory"
    | "setYielding"
    | "steers"
    | "setSteers"
    | "signals"
    | "setWatching"
  >;
  readonly queue: Pick<RunQueue, "summary" | "insert" | "updateSpec" | "head">;
  readonly records: Pick<ActorRecords, "runAccepted">;
  /** The run executing now and the sessions it waits on (an answer names them). */
  readonly live: Pick<LiveRun, "current" | "waitingOn">;
  /** Sets the alarm for what is due (the run just queued, as a backstop). */
  schedule(): Promise<void>;
}

const GREETING_TEXT =
  "The session was just reset. Greet the user in one short sentence and confirm the fresh start.";

/** The transcript messages of a run's inputs; ids derive from the run id, so appends are idempotent. */
export function inputMessages(runId: string, inputs: RunInput[]): TranscriptMessage[] {
  return inputs.map((input, i) => ({
    id: `${runId}:u${i}`,
    role: "user",
    content: [{ type: "text", text: input.text }, ...(input.parts ?? [])],
    timestamp: input.timestamp,
    runId,
    provenance: input.provenance,
  }));
}

/**
 * The running turn a message may steer: the queue head of this transcript, executing now, whose
 * reply goes to the chat. Not a compaction, and not an agent's run (a `sessions_send`, a
 * reply-back or announce step): a message joining it would never be answered.
 */
function steerableRun(a: AdmissionHost, sessionId: string): string | undefined {
  const current = a.live.current?.runId;
  const head = a.queue.head();
  if (!current || head?.run_id !== current || head.state !== "running") return undefined;
  const spec = specOf(head);
  return spec.sessionId === sessionId && !spec.req.compact && repliesToChat(spec.req) ? current : undefined;
}

/**
 * `steered`: the inputs wait in the actor (after any that came before) for the running run's
 * next model step, which takes them (agent/loop.ts); if it ends first they become a follow-up
 * run (lifecycle.ts). One synchronous step, with the answer kept for dedupe.
 */
function steer(
  a: AdmissionHost,
  req: EnqueueRequest,
  running: string,
  inputs: RunInput[],
  entry: SessionRow,
  now: number,
): EnqueueResult {
  const held = a.store.steers();
  const items = [
    ...(held?.runId === running ? held.items : []),
    ...inputs.map((input, i) => ({
      id: `${req.runId}:${i}`,
      input,
      ...(req.route ? { route: req.route } : {}),
    })),
  ];
  a.store.setSteers({ runId: running, items });
  recordArrival(a, req, entry, false, false, now);
  a.store.saveEntry(entry);
  const result = {
    ok: true as const,
    runId: running,
    sessionKey: req.sessionKey,
    sessionId: entry.sessionId,
    status: "steered" as const,
  };
  a.store.keepAnswer(req.runId, result, now);
  return result;
}

/**
 * The signal log's events of an admitted request (SPEC §20): the reset it caused, and a message
 * from a chat, a hook or an operator; the entry gets the new stateVersion. Only once admitted:
 * a message the queue's cap refused changed nothing.
 */
function recordArrival(
  a: AdmissionHost,
  req: EnqueueRequest,
  entry: SessionRow,
  reset: boolean,
  created: boolean,
  now: number,
): void {
  if (reset && !created) {
    entry.stateVersion = a.store.signals.record({
      kind: "reset",
      actor: req.userInteraction ? "human" : "system",
      at: now,
      summary: req.userInteraction ? "reset by a message" : "a new sessionId: the session had gone stale",
    });
  }
  if (req.userInteraction || req.trigger === "rpc" || req.trigger === "hook") {
    entry.stateVersion = a.store.signals.record({
      kind: "human_message",
      actor: "human",
      at: now,
      summary: req.sender
        ? `a message from ${req.sender.channel}:${req.sender.id}`
        : `a message (${req.trigger})`,
    });
  }
}

/** A merged run's queued row stays well under the storage row limit (SPEC §16). */
const MAX_MERGED_CHARS = 256 * 1024;

/**
 * Whether a message may merge into the waiting run (collect mode): at most `cap` inputs and
 * MAX_MERGED_CHARS of input text in one run. Otherwise it queues as a run of its own, which
 * `session.queue.cap` counts like any other.
 */
function canMerge(into: QueuedRun, inputs: RunInput[], cap: number): boolean {
  if (into.req.inputs.length + inputs.length > cap) return false;
  let chars = 0;
  for (const i of [...into.req.inputs, ...inputs]) chars += i.text.length;
  return chars <= MAX_MERGED_CHARS;
}

/** The earlier answer for a run id this actor already accepted, marked as a duplicate. */
export function duplicateOf(
  a: { readonly store: Pick<ActorStore, "accepted"> },
  runId: string,
): EnqueueResult | undefined {
  const seen = a.store.accepted(runId);
  return seen ? { ...seen, status: "duplicate" } : undefined;
}

/**
 * The entry as a request finds it, in SPEC §4's order: created on first contact, the request's
 * route and origin recorded, then renewed (a new sessionId) when its reset policy has closed it,
 * judged on the channel it talks on now, or when the request asks for a fresh session. Commands
 * and runs alike. Pure over the stored entry; the caller stores the result.
 */
export function entryForRequest(
  a: { readonly config: Config; readonly store: Pick<ActorStore, "entry"> },
  req: EnqueueRequest,
  now: number,
): { entry: SessionRow; created: boolean; reset: boolean } {
  const stored = a.store.entry();
  if (!stored) {
    const entry = applyRoute(newSessionRow(req.sessionKey, req.init, now, crypto.randomUUID()), req);
    return { entry, created: true, reset: false };
  }
  const entry = applyRoute(stored, req);
  // A stale session is closed: whatever reaches it next (a person, a job, a hook, another
  // session) starts a new sessionId, as does an isolated job's run. Only a person's message
  // refreshes idle freshness (the caller's part).
  if (req.freshSession || isStale(entry, a.config, now, req.userInteraction ? req.hasThread : undefined)) {
    return { entry: resetEntry(entry, now), created: false, reset: true };
  }
  return { entry, created: false, reset: false };
}

export async function admit(a: AdmissionHost, req: EnqueueRequest): Promise<EnqueueResult> {
  const config = a.config;
  const now = Date.now();

  // --- critical section: synchronous storage only ---------------------------------------
  const duplicate = duplicateOf(a, req.runId);
  if (duplicate) return duplicate;

  const found = entryForRequest(a, req, now);
  let entry = found.entry;
  const created = found.created;
  let resetHappened = found.reset;

  // Inputs are cut to what one transcript message holds before they are queued.
  let inputs = req.inputs.map((i) =>
    i.text.length > MAX_MESSAGE_CHARS ? { ...i, text: boundedText(i.text) } : i,
  );
  let greeting = false;
  let status: "queued" | "command" = "queued";
  if (req.userInteraction && inputs.length === 1 && inputs[0]) {
    const trigger = matchResetTrigger(inputs[0].text, config.session.resetTriggers, config);
    if (trigger) {
      if (!created) entry = resetEntry(entry, now);
      resetHappened = true;
      if (trigger.model) entry.modelOverride = trigger.model;
      if (trigger.rest) {
        inputs = [{ ...inputs[0], text: trigger.rest }];
      } else {
        greeting = true;
        status = "command";
        inputs = [{ text: GREETING_TEXT, provenance: { kind: "internal_system" }, timestamp: now }];
      }
    }
  }

  entry.updatedAt = now;
  if (req.userInteraction) entry.lastInteractionAt = now;
  entry.expiresAt = entryExpiry(entry, config);

  // Steering (SPEC §20): a person's message while a turn of this transcript runs joins it
  // before its next model step (`steer`), or ends it and queues behind it (`interrupt`). The
  // session's own mode (`/queue`) comes before the gateway's.
  const mode = entry.queueMode ?? config.session.queue.mode;
  const running = req.steer || req.userInteraction ? steerableRun(a, entry.sessionId) : undefined;
  // A message with files runs on its own: they are fetched when a run starts (run/media.ts).
  if (running && !greeting && !resetHappened && !inputs.some((i) => i.media?.length)) {
    if (req.steer || mode === "steer") return steer(a, req, running, inputs, entry, now);
    if (mode === "interrupt") abortCurrent(a.live);
  }

  const queued = a.queue.summary();
  const tail = queued.newestWaiting;
  const collectInto = mode === "collect" && !greeting && !resetHappened && tail ? specOf(tail) : undefined;

  // A connector's message: its records go to the actor's journal in this same step.
  const behind = req.trigger === "inbound" && config.session.writeBehind;
  let runId = req.runId;
  if (
    collectInto &&
    tail &&
    collectInto.req.trigger === req.trigger &&
    collectInto.sessionId === entry.sessionId &&
    canMerge(collectInto, inputs, config.session.queue.cap)
  ) {
    collectInto.req.inputs.push(...inputs);
    if (req.route) collectInto.req.route = req.route;
    // The merged inputs are stored when the run starts, with the others.
    a.queue.updateSpec(tail.pos, collectInto);
    runId = tail.run_id;
  } else {
    const cap = config.session.queue.cap;
    if (queued.waiting >= cap) {
      return { ok: false, code: "RATE_LIMITED", message: `session queue is full (cap ${cap})` };
    }
    const run: QueuedRun = { req: { ...req, inputs }, sessionId: entry.sessionId };
    if (greeting) run.greeting = true;
    a.queue.insert(runId, run, now);
    // Something is running or about to (a step starts the head at once).
    entry.runStatus = "running";
  }
  recordArrival(a, req, entry, resetHappened, created, now);
  a.store.saveEntry(entry);
  // A yield and the watches belong to the conversation they were made in (SPEC §20): a reset
  // ends them.
  if (resetHappened) {
    a.store.setYielding(undefined);
    a.store.setWatching([]);
  }
  const result = { ok: true as const, runId, sessionKey: req.sessionKey, sessionId: entry.sessionId, status };
  const waitingOn = a.live.current ? [...a.live.waitingOn.keys()] : [];
  a.store.keepAnswer(req.runId, result, now);
  const alarmSet = a.schedule();
  // Journaled synchronously, with the queue row (the call runs to its first await here).
  const recorded = a.records.runAccepted({
    entry,
    run: {
      runId,
      sessionKey: req.sessionKey,
      sessionId: entry.sessionId,
      trigger: req.trigger,
      status: "queued",
      createdAt: now,
      deliver: req.deliver,
      idempotencyKey: req.idempotencyKey ?? null,
    },
    // The transcript's row is written with its first run (or the session's start).
    newTranscript: created || resetHappened || !a.store.hasHistory(entry.sessionId),
    behind,
  });
  // --- end of critical section ----------------------------------------------------------

  await alarmSet;
  // Written through: the session and run are visible at once. If this fails the run still
  // executes (its start writes the run again; the writes are idempotent).
  await recorded;
  return waitingOn.length ? { ...result, waitingOn } : result;
}
