/**
 * How a SessionActor's work is scheduled: in steps that never overlap. A step writes the
 * records a previous instance left, starts the deliveries that are due (in the background, see
 * delivery/outbox.ts) and attempts at most one run, the queue head (lifecycle.ts). A step
 * starts at once when a run is admitted to an idle actor or the run before it is done; the
 * alarm is the backstop of a step the process did not finish, and the timer of what is due
 * later (a run's retry after its backoff, a delivery's next attempt, delivery outcomes to be
 * recorded in D1). This is the only way a run starts.
 */
import type { DeliveryOutbox } from "../delivery/outbox";
import type { ActorStore } from "./actor-store";
import type { ActorRecords } from "./records";
import type { QueueRow, RunQueue } from "./run-queue";

/**
 * How late the alarm is set for a run a step is already seeing to: it fires only when the
 * process ended before the run did (or the run takes longer, and then finds it running).
 */
const STEP_BACKSTOP_MS = 10_000;

/** What the steps use of the actor. */
export interface StepsPort {
  readonly storage: Pick<DurableObjectStorage, "getAlarm" | "setAlarm" | "deleteAlarm">;
  waitUntil(promise: Promise<unknown>): void;
  readonly store: Pick<ActorStore, "kvGet" | "sweepRunIds">;
  readonly queue: Pick<RunQueue, "head" | "headDueAt" | "count">;
  readonly outbox: Pick<DeliveryOutbox, "dispatch" | "nextDue">;
  readonly records: Pick<ActorRecords, "flushLeftover" | "writeDue">;
  /** Attempts the queue head (lifecycle.ts `attemptHead`). */
  attempt(row: QueueRow): Promise<void>;
}

export class ActorSteps {
  /** The alarm this instance set and has not seen fire: a time, none (null), or unknown. */
  private alarmAt: number | null | undefined;
  /** The steps queued on this instance, in order: they never overlap. */
  private chain: Promise<void> = Promise.resolve();
  /** Steps queued, running or reserved: while one is, it sees to the queue head, whose alarm is a backstop. */
  private active = 0;

  constructor(private readonly port: StepsPort) {}

  /** Whether a step is queued, running or reserved. */
  get busy(): boolean {
    return this.active > 0;
  }

  /**
   * Reserves the next step while a run is being admitted to an idle actor (so the alarm that
   * admission sets is only the backstop); `release` then starts it.
   */
  reserve(): void {
    this.active++;
  }

  release(): void {
    this.active--;
    this.soon();
  }

  /** The alarm fired: the step it asks for. */
  alarm(): Promise<void> {
    // The alarm that fired is gone; whatever this invocation needs next is set again.
    this.alarmAt = undefined;
    return this.queue();
  }

  /** Forgets the alarm this instance remembers setting (the cron backstop trusts storage). */
  forgetAlarm(): void {
    this.alarmAt = undefined;
  }

  /**
   * Sets the alarm for the earliest due work (the queue's head, the outbox's next attempt or
   * outcome to record), or
   * clears it. The alarm this instance last set is remembered until it fires, so an alarm
   * already due no later than needed is not set again (an early alarm finds nothing due and
   * sets the next one).
   */
  async scheduleAlarm(): Promise<void> {
    const { storage, queue, outbox } = this.port;
    const now = Date.now();
    let run = queue.headDueAt(now);
    // A step is under way or queued: it runs a head that is due, so the alarm only backs it up.
    if (run !== undefined && run <= now && this.active > 0) run = now + STEP_BACKSTOP_MS;
    const delivery = outbox.nextDue();
    const next = run === undefined ? delivery : delivery === undefined ? run : Math.min(run, delivery);
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

  /** Queues a step after the ones before it; settles with that step. */
  private queue(): Promise<void> {
    this.active++;
    const step = this.chain.then(() => this.step());
    this.chain = step.catch(() => {});
    return step;
  }

  /** A step started without an alarm; its failure is logged (the backstop alarm retries). */
  private soon(): void {
    this.port.waitUntil(this.queue().catch((error) => console.error(`step failed: ${error}`)));
  }

  /**
   * One step: records a previous instance left, the deliveries that are due, and at most one
   * run (the queue head, when due). A next head that is due starts in a step of its own at
   * once; the alarm is then set for what is due later.
   */
  private async step(): Promise<void> {
    const { store, queue, outbox, records } = this.port;
    let started: string | undefined;
    try {
      if (!store.kvGet("key")) return;
      await records.flushLeftover().catch((error) => console.error(`deferred records not written: ${error}`));
      // Deliveries go out in the background: a connector that is down or slow never holds the run.
      outbox.dispatch();
      // Outcomes of deliveries no write has carried to D1 within their delay.
      await records.writeDue();
      const head = queue.head();
      // A head whose last attempt failed waits for its backoff (this step may be a delivery's).
      if (head && (head.retry_at ?? 0) <= Date.now()) {
        started = head.run_id;
        await this.port.attempt(head);
      }
      outbox.dispatch();
      store.sweepRunIds(Date.now());
    } finally {
      this.active--;
    }
    // The next run starts now, unless it is the one just attempted (its retry is the alarm's).
    // An empty queue is known without a read.
    const next = started && !this.active && queue.count() > 0 ? queue.head() : undefined;
    if (next && next.run_id !== started && (next.retry_at ?? 0) <= Date.now()) this.soon();
    await this.scheduleAlarm();
  }
}
