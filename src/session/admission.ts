/**
 * Admission of a run into a SessionActor (SPEC §4 steps after routing): dedupe by run id,
 * freshness and automatic reset, reset triggers, then collect-merge or queue-cap, and the
 * write-through to D1. A run that finds the actor idle is "prestarted": the enqueue's one D1
 * batch also marks it running and stores its inputs, so its start needs no round trip of its own.
 * A connector's message puts that batch in the actor's records journal instead, in the same
 * synchronous step as its queue row (see records.ts).
 * The decision is one synchronous critical section over the actor's storage; D1 is written after.
 */
import type { SessionRow } from "../db/queries";
import type { EnqueueRequest, EnqueueResult, RunInput } from "../runs/types";
import { boundedText, MAX_MESSAGE_CHARS, type TranscriptMessage } from "../transcript/message";
import type { ActorContext } from "./actor-context";
import { applyRoute, entryExpiry, isStale, newSessionRow, resetEntry } from "./entry";
import { matchResetTrigger } from "./reset-trigger";
import { type QueuedRun, specOf } from "./run-queue";

const GREETING_TEXT =
  "The session was just reset. Greet the user in one short sentence and confirm the fresh start.";

/** The transcript messages of a run's inputs; ids derive from the run id, so appends are idempotent. */
export function inputMessages(runId: string, inputs: RunInput[]): TranscriptMessage[] {
  return inputs.map((input, i) => ({
    id: `${runId}:u${i}`,
    role: "user",
    content: [{ type: "text", text: input.text }],
    timestamp: input.timestamp,
    runId,
    provenance: input.provenance,
  }));
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
export function duplicateOf(a: ActorContext, runId: string): EnqueueResult | undefined {
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
  a: Pick<ActorContext, "store" | "config">,
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

export async function admit(a: ActorContext, req: EnqueueRequest): Promise<EnqueueResult> {
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

  const queued = a.queue.summary();
  const tail = queued.newestWaiting;
  const collectInto =
    config.session.queue.mode === "collect" && !greeting && !resetHappened && tail ? specOf(tail) : undefined;

  // Nothing running or waiting: this run is next, so its start is written with the enqueue.
  const idle = !a.live.current && queued.total === 0;
  // A connector's message: its records go to the actor's journal in this same step, so a run
  // that starts at once is stored prestarted (see records.ts).
  const behind = req.trigger === "inbound" && config.session.writeBehind;
  let stored: { json: string; run: QueuedRun } | undefined;
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
    delete collectInto.prestarted;
    a.queue.updateSpec(tail.pos, collectInto);
    runId = tail.run_id;
  } else {
    const cap = config.session.queue.cap;
    if (queued.waiting >= cap) {
      return { ok: false, code: "RATE_LIMITED", message: `session queue is full (cap ${cap})` };
    }
    const run: QueuedRun = { req: { ...req, inputs }, sessionId: entry.sessionId };
    if (greeting) run.greeting = true;
    if (behind && idle) run.prestarted = { startedAt: now };
    stored = { json: a.queue.insert(runId, run, now), run };
    // Something is running or about to (a step starts the head at once; a prestarted
    // head is already recorded as running).
    entry.runStatus = "running";
  }
  a.store.saveEntry(entry);
  const result = { ok: true as const, runId, sessionKey: req.sessionKey, sessionId: entry.sessionId, status };
  const waitingOn = a.live.current ? [...a.live.waitingOn.keys()] : [];
  a.store.recordAccepted(req.runId, result, now);
  const prestart = idle && runId === req.runId ? { startedAt: now } : undefined;
  const alarmSet = a.scheduleAlarm();
  // Journaled synchronously, with the queue row (the call runs to its first await here).
  const journaled = behind ? writeThrough(a, entry, runId, req, now, behind, prestart && inputs) : undefined;
  if (journaled && prestart && stored) a.store.markHistory(entry.sessionId);
  // --- end of critical section ----------------------------------------------------------

  await alarmSet;
  if (journaled) {
    await journaled;
  } else {
    // Write-through to D1 so the session and run are visible at once. If this fails the run
    // still executes (it repeats these idempotent writes when it starts).
    await writeThrough(a, entry, runId, req, now, false, prestart && inputs);
    if (prestart && stored) markPrestarted(a, runId, entry.sessionId, stored, prestart);
  }
  return waitingOn.length ? { ...result, waitingOn } : result;
}

async function writeThrough(
  a: ActorContext,
  entry: SessionRow,
  runId: string,
  req: EnqueueRequest,
  now: number,
  /** Into the actor's records journal (a connector's message), not straight to D1. */
  behind: boolean,
  /** The inputs of a run that starts at once: stored now, with the run marked running. */
  startingWith?: RunInput[] | false,
): Promise<void> {
  await a.records.runAccepted({
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
      ...(startingWith ? { startedAt: now } : {}),
    },
    ...(startingWith ? { starting: inputMessages(runId, startingWith) } : {}),
    ...(req.inbound ? { inbound: req.inbound } : {}),
    // A connector's message is acknowledged once the actor holds it: its records follow with
    // the run's next write (session.writeBehind). Runs that callers ask D1 about by id at once
    // (operator surfaces, hooks, tools) are written through.
    behind,
  });
}

/**
 * Records that the enqueue batch stored the run's start, unless the run has started or taken
 * more inputs (collect mode) while the batch was in flight: one conditional write.
 */
function markPrestarted(
  a: ActorContext,
  runId: string,
  sessionId: string,
  stored: { json: string; run: QueuedRun },
  prestart: NonNullable<QueuedRun["prestarted"]>,
): void {
  const spec = { ...stored.run, prestarted: prestart };
  if (a.queue.replaceSpecIfUnchanged(runId, stored.json, spec)) a.store.markHistory(sessionId);
}
