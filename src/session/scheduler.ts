/**
 * The one scheduler of a SessionActor: it alone decides when the actor wakes, and does the
 * actor's work in passes that never overlap. A pass writes the records an earlier version left,
 * starts the deliveries that are due (in the background, see delivery/outbox.ts), writes the
 * delivery outcomes due to be recorded (d1/records.ts) and attempts at most one run, the queue
 * head (run/lifecycle.ts). A pass starts at once when a run is admitted to an idle actor or the
 * run before it is done; the alarm is set for the earliest of everything due later:
 *
 *   due item                      when                                  read from
 *   the queue head                now, or after a failed attempt's      the queue (run/queue.ts)
 *                                 backoff; a backstop while a pass
 *                                 sees to it (the process may end)
 *   the running run's deadline    its start + its `timeoutSeconds`      the queue head's checkpoint
 *   a delivery's next attempt     its backoff, or its lease's end       the outbox
 *   a delivery outcome to record  its delay (at once if it failed)      the outbox
 *
 * The alarm is the only timer of durable work; a pass is the only way a run starts.
 */
import type { DeliveryOutbox } from "../delivery/outbox";
import type { ActorRecords } from "./d1/records";
import type { QueueRow, RunQueue } from "./run/queue";
import type { ActorStore } from "./storage/store";

/**
 * How late the alarm is set for a run a pass is already seeing to: it fires only when the
 * process ended before the run did (or the run takes longer, and then finds it running).
 */
const PASS_BACKSTOP_MS = 10_000;

/** What the scheduler uses of the actor. */
export interface SchedulerHost {
  readonly storage: Pick<DurableObjectStorage, "getAlarm" | "setAlarm" | "deleteAlarm">;
  waitUntil(promise: Promise<unknown>): void;
  readonly store: Pick<ActorStore, "kvGet" | "sweepRunIds">;
  readonly queue: Pick<RunQueue, "head" | "due">;
  readonly outbox: Pick<DeliveryOutbox, "dispatch" | "nextDue">;
  readonly records: Pick<ActorRecords, "flushLeftover" | "writeDue">;
  /** Attempts the queue head (run/lifecycle.ts `attemptHead`). */
  attempt(row: QueueRow): Promise<void>;
  /** Ends the run executing now as timed out, if there is one; true when there was. */
  timeOut(): boolean;
}

export class ActorScheduler {
  /** The alarm this instance set and has not seen fire: a time, none (null), or unknown. */
  private alarmAt: number | null | undefined;
  /** The passes queued on this instance, in order: they never overlap. */
  private chain: Promise<void> = Promise.resolve();
  /** Passes queued, running or reserved: while one is, it sees to the queue head, whose alarm is a backstop. */
  private active = 0;

  constructor(private readonly host: SchedulerHost) {}

  /** Whether a pass is queued, running or reserved. */
  get busy(): boolean {
    return this.active > 0;
  }

  /**
   * Reserves the next pass while a run is being admitted to an idle actor (so the alarm that
   * admission sets is only the backstop); `release` then starts it.
   */
  reserve(): void {
    this.active++;
  }

  release(): void {
    this.active--;
    this.soon();
  }

  /**
   * The alarm fired: a running run past its deadline is ended (before the pass queued behind
   * it, which could not reach it), then the pass the alarm asks for.
   */
  alarm(): Promise<void> {
    // The alarm that fired is gone; whatever this invocation needs next is set again.
    this.alarmAt = undefined;
    const { deadline } = this.host.queue.due(Date.now());
    if (deadline !== undefined && deadline <= Date.now()) this.host.timeOut();
    return this.queue();
  }

  /** Forgets the alarm this instance remembers setting (the cron backstop trusts storage). */
  forgetAlarm(): void {
    this.alarmAt = undefined;
  }

  /**
   * Sets the alarm for the earliest due item (the table above), or clears it. The alarm this
   * instance last set is remembered until it fires, so an alarm already due no later than
   * needed is not set again (an early alarm finds nothing due and sets the next one).
   */
  async schedule(): Promise<void> {
    const { storage, queue, outbox } = this.host;
    const now = Date.now();
    const due = queue.due(now);
    let run = due.head;
    // A pass is under way or queued: it runs a head that is due, so the alarm only backs it up.
    if (run !== undefined && run <= now && this.active > 0) run = now + PASS_BACKSTOP_MS;
    const next = earliest(run, due.deadline, outbox.nextDue());
    if (next === undefined) {
      if (this.alarmAt === null) return;
      this.alarmAt = undefined;
      await storage.deleteAlarm();
      this.alarmAt = null;
      return;
    }
    const at = Math.max(now, next);
    if (typeof this.alarmAt === "number" && this.alarmAt <= at) return;
    // Remembered once storage has it: a failed call leaves it unknown (set again next time).
    this.alarmAt = undefined;
    await storage.setAlarm(at);
    this.alarmAt = at;
  }

  /** Queues a pass after the ones before it; settles with that pass. */
  private queue(): Promise<void> {
    this.active++;
    const pass = this.chain.then(() => this.pass());
    this.chain = pass.catch(() => {});
    return pass;
  }

  /** A pass started without an alarm; its failure is logged (the backstop alarm retries). */
  private soon(): void {
    this.host.waitUntil(this.queue().catch((error) => console.error(`pass failed: ${error}`)));
  }

  /**
   * One pass: records an earlier version left, the deliveries that are due, the outcomes due to
   * be recorded, and at most one run (the queue head, when due). A next head that is due starts
   * in a pass of its own at once; the alarm is then set for what is due later.
   */
  private async pass(): Promise<void> {
    const { store, queue, outbox, records } = this.host;
    let started: string | undefined;
    try {
      if (!store.kvGet("key")) return;
      await records.flushLeftover().catch((error) => console.error(`deferred records not written: ${error}`));
      // Deliveries go out in the background: a connector that is down or slow never holds the run.
      outbox.dispatch();
      await records.writeDue();
      const head = queue.head();
      // A head whose last attempt failed waits for its backoff (this pass may be a delivery's).
      if (head && (head.retry_at ?? 0) <= Date.now()) {
        started = head.run_id;
        await this.host.attempt(head);
      }
      outbox.dispatch();
      store.sweepRunIds(Date.now());
    } finally {
      this.active--;
    }
    // The next run starts now, unless it is the one just attempted (its retry is the alarm's).
    const next = started && !this.active ? queue.head() : undefined;
    if (next && next.run_id !== started && (next.retry_at ?? 0) <= Date.now()) this.soon();
    await this.schedule();
  }
}

function earliest(...times: Array<number | undefined>): number | undefined {
  let min: number | undefined;
  for (const t of times) if (t !== undefined && (min === undefined || t < min)) min = t;
  return min;
}
