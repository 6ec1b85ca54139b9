/**
 * SessionActor: one Durable Object per session key, owning the live state of that key. This
 * class is its public face — the methods the Worker, the tools and other actors call over DO
 * RPC, and the alarm — and wires together the modules that do the work:
 * - `actor-store.ts`  its DO SQLite: schema, kv, entry, dedupe and outcome records
 * - `run-queue.ts`    the durable FIFO run queue and its guarantees
 * - `admission.ts`    enqueue: dedupe, freshness and reset, triggers, collect/cap, prestart
 * - `entry.ts`        the entry's lifecycle (new, reset, route, expiry, closing), pure
 * - `commands.ts`     chat commands (`/stop`, `/status`, `/send`)
 * - `executor.ts`     running the queue head: model, tools, checkpoints, token accounting
 * - `system-prompt.ts` the run's system prompt, pure
 * - `finalize.ts`     the end of a run: delivery, outcome batch, flow hand-off
 * - `outbound.ts`     what a run posts, and deliveries made outside runs
 * - `flow-runner.ts`  sessions_send exchanges and sub-agent announcements across sessions
 * - `records.ts`      every D1 read and write, behind one interface (and its write-behind
 *                     journal, `records-journal.ts`)
 * - `context-store.ts` the turn context copy: latest summary and the messages after it
 * - `compactor.ts`    compaction runs and the memory-flush turn
 * - `waiters.ts`      server-side waits on runs
 * (`actor-context.ts` is what these modules share; `flows.ts`, `freshness.ts` and
 * `reset-trigger.ts` are the pure rules they apply; `client.ts` reaches actors from outside.)
 * The actor's work goes in steps that never overlap: one step runs at most one run and starts
 * the deliveries that are due (src/delivery/outbox.ts) in the background without waiting for
 * them. A step starts at once when a run is admitted to an idle actor or the run before it
 * ends; otherwise at the alarm, which is also the backstop of a step the process did not finish.
 */
import { DurableObject } from "cloudflare:workers";
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import type { SessionRow } from "../db/queries";
import type { DeliveryPayload } from "../delivery/deliver";
import { DeliveryOutbox } from "../delivery/outbox";
import type {
  ActorError,
  EnqueueRequest,
  EnqueueResult,
  QueueDepth,
  RunOutcome,
  WaitResult,
} from "../runs/types";
import type { ActorContext, LiveRun } from "./actor-context";
import { ActorStore } from "./actor-store";
import { admit } from "./admission";
import { commandOf, runCommand } from "./commands";
import { ContextStore, withContextCopy } from "./context-store";
import { entryExpiry, resetEntry } from "./entry";
import { abortCurrent, attemptHead } from "./executor";
import { type Announcement, recordAnnouncement } from "./flow-runner";
import { type ActorRecords, d1Records } from "./records";
import { RecordsJournal } from "./records-journal";
import { progressOf, RunQueue } from "./run-queue";
import { RunWaiters } from "./waiters";

function toWaitResult(o: RunOutcome): WaitResult {
  const status = o.status === "ok" || o.status === "error" || o.status === "aborted" ? o.status : "timeout";
  const r: WaitResult = { runId: o.runId, status, runStatus: o.status };
  if (o.startedAt !== undefined) r.startedAt = o.startedAt;
  if (o.endedAt !== undefined) r.endedAt = o.endedAt;
  if (o.error !== undefined) r.error = o.error;
  if (o.reply !== undefined) r.reply = o.reply;
  if (o.delivery !== undefined) r.delivery = o.delivery;
  return r;
}

/**
 * How late the alarm is set for a run a step is already seeing to: it fires only when the
 * process ended before the run did (or the run takes longer, and then finds it running).
 */
const STEP_BACKSTOP_MS = 10_000;

export class SessionActor extends DurableObject<Env> {
  private readonly store: ActorStore;
  private readonly queue: RunQueue;
  private readonly outbox: DeliveryOutbox;
  private readonly records: ActorRecords;
  private readonly context: ContextStore;
  private readonly waiters = new RunWaiters();
  private readonly live: LiveRun = { waitingOn: new Map() };
  private readonly parts: ActorContext;
  /** This instance's first contact (see `wake`), shared by every call until it is done. */
  private waking: Promise<void> | undefined;
  private awake = false;
  /** The alarm this instance set and has not seen fire: a time, none (null), or unknown. */
  private alarmAt: number | null | undefined;
  /** The steps (see `step`) queued on this instance, in order: they never overlap. */
  private steps: Promise<void> = Promise.resolve();
  /** Steps queued or running: while one is, it sees to the queue head, whose alarm is a backstop. */
  private stepsActive = 0;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new ActorStore(ctx.storage.sql);
    this.queue = new RunQueue(ctx.storage.sql);
    this.context = new ContextStore(ctx.storage.sql, this.store);
    this.records = withContextCopy(
      d1Records(() => this.env, new RecordsJournal(ctx.storage.sql)),
      this.context,
    );
    this.outbox = new DeliveryOutbox(
      ctx.storage.sql,
      () => this.env,
      () => this.config,
      (payload, state) => this.records.deliveryAttempted(payload, state),
      () => {
        this.scheduleAlarm().catch((error) => console.error(`alarm not set: ${error}`));
      },
    );
    const actor = this;
    this.parts = {
      get env() {
        return actor.env;
      },
      get config() {
        return actor.config;
      },
      store: this.store,
      queue: this.queue,
      outbox: this.outbox,
      records: this.records,
      context: this.context,
      waiters: this.waiters,
      live: this.live,
      scheduleAlarm: () => this.scheduleAlarm(),
      enqueue: (req) => this.enqueue(req),
      abort: (key, clearQueue) => this.abort(key, clearQueue),
      remove: (key, deleteTranscript) => this.remove(key, deleteTranscript),
    };
  }

  private get config(): Config {
    return loadConfig(this.env);
  }

  /**
   * Learns this actor's key on first contact: registers the key's run-id prefix (so a run id it
   * hands out is found before D1 records the run) and loads the entry from D1 if this actor has
   * never held it (e.g. the entry was written before the actor existed). Safe to repeat. Every
   * call first waits for this instance's wake, so nothing is admitted before the records a
   * previous instance left are written.
   */
  private async bind(sessionKey: string): Promise<void> {
    if (!this.awake) {
      this.waking ??= this.wake().then(
        () => {
          this.awake = true;
        },
        (error) => {
          this.waking = undefined;
          throw error;
        },
      );
      await this.waking;
    }
    const known = this.store.kvGet("key");
    if (known === sessionKey && this.store.kvGet("bound")) return;
    if (known && known !== sessionKey) throw new Error(`actor for ${known} was addressed as ${sessionKey}`);
    await this.ctx.blockConcurrencyWhile(async () => {
      if (this.store.kvGet("bound")) return;
      const row = await this.records.keyBound(sessionKey);
      this.store.kvSet("key", sessionKey);
      // `entry_loaded`: an actor of an earlier version that has loaded its entry already.
      if (row && !this.store.kvGet("entry_loaded") && !this.store.entry()) {
        this.store.saveEntry(row);
        // Written before this actor existed (seeded, imported, or this actor's storage was
        // lost): its transcript may hold context the next turn must load.
        this.store.markHistory(row.sessionId);
      }
      this.store.kvSet("bound", "1");
    });
  }

  /**
   * First contact since this instance started (after an eviction or a restart): leftover work
   * gets an alarm, in case the previous one was lost with the process, and the records a
   * previous instance deferred are written.
   */
  private async wake(): Promise<void> {
    if (this.store.kvGet("key") && !this.live.current && (await this.ctx.storage.getAlarm()) === null)
      await this.scheduleAlarm();
    await this.records
      .flushLeftover()
      .catch((error) => console.error(`deferred records not written: ${error}`));
  }

  /**
   * Sets the alarm for the earliest due work (the queue's head, the outbox's next attempt), or
   * clears it. The alarm this instance last set is remembered until it fires, so an alarm
   * already due no later than needed is not set again (an early alarm finds nothing due and
   * sets the next one).
   */
  private async scheduleAlarm(): Promise<void> {
    const now = Date.now();
    let run = this.queue.headDueAt(now);
    // A step is under way or queued: it runs a head that is due, so the alarm only backs it up
    // (for a process that ends first).
    if (run !== undefined && run <= now && this.stepsActive > 0) run = now + STEP_BACKSTOP_MS;
    const delivery = this.outbox.nextDue();
    const next = run === undefined ? delivery : delivery === undefined ? run : Math.min(run, delivery);
    if (next === undefined) {
      if (this.alarmAt === null) return;
      this.alarmAt = undefined;
      await this.ctx.storage.deleteAlarm();
      this.alarmAt = null;
      return;
    }
    const at = Math.max(now, next);
    if (typeof this.alarmAt === "number" && this.alarmAt <= at) return;
    // Remembered once storage has it: a failed call leaves it unknown (set again next time).
    this.alarmAt = undefined;
    await this.ctx.storage.setAlarm(at);
    this.alarmAt = at;
  }

  // -------------------------------------------------------------------------------------------
  // Runs

  /**
   * Accepts a run (or a command) for this session; idempotent by `req.runId`. When nothing is
   * running or about to, the run starts at once in a step queued once admission is done (its
   * records written), not at an alarm: the step is reserved first, so the alarm admission sets
   * is only its backstop.
   */
  async enqueue(req: EnqueueRequest): Promise<EnqueueResult> {
    await this.bind(req.sessionKey);
    const command = commandOf(req);
    if (command) return runCommand(this.parts, req, command);
    const direct = !this.live.current && this.stepsActive === 0;
    if (direct) this.stepsActive++;
    try {
      return await admit(this.parts, req);
    } finally {
      if (direct) {
        this.stepsActive--;
        this.stepSoon();
      }
    }
  }

  /** Waits in the actor (not by client polling) until the run ends or `timeoutMs` passes. */
  async waitForRun(sessionKey: string, runId: string, timeoutMs: number): Promise<WaitResult | ActorError> {
    await this.bind(sessionKey);
    const done = this.store.finishedOutcome(runId);
    if (done) return toWaitResult(done);
    if (!this.queue.byRunId(runId))
      return { ok: false, code: "NOT_FOUND", message: `run not found: ${runId}` };
    const outcome = await this.waiters.wait(runId, timeoutMs);
    if (outcome) return toWaitResult(outcome);
    const still = this.queue.byRunId(runId);
    const progress = still ? progressOf(still) : undefined;
    const result: WaitResult = { runId, status: "timeout", runStatus: still?.state ?? "queued" };
    if (progress) result.startedAt = progress.startedAt;
    return result;
  }

  /**
   * Whether this session holds the run `runId` (queued, running or ended here), its records
   * written to D1 first: `recorded` (D1 shows it now), `unwritten` (D1 refused its records for
   * now; the journal's timer retries), `unknown` (not a run of this session).
   */
  async recordRun(sessionKey: string, runId: string): Promise<"recorded" | "unwritten" | "unknown"> {
    await this.bind(sessionKey);
    const held =
      !!this.store.accepted(runId) || !!this.queue.byRunId(runId) || !!this.store.finishedOutcome(runId);
    if (!held) return "unknown";
    return (await this.records.journalWritten()) ? "recorded" : "unwritten";
  }

  /** Aborts the running run; with `clearQueue`, also drops every waiting run. Returns the count. */
  async abort(sessionKey: string, clearQueue: boolean): Promise<{ aborted: number }> {
    await this.bind(sessionKey);
    let aborted = abortCurrent(this.parts) ? 1 : 0;
    if (!clearQueue) return { aborted };
    const now = Date.now();
    const dropped: string[] = [];
    for (const row of this.queue.rows()) {
      if (row.state !== "queued") continue;
      this.queue.remove(row);
      const outcome: RunOutcome = {
        runId: row.run_id,
        status: "aborted",
        endedAt: now,
        error: "aborted before start",
      };
      this.store.recordFinished(outcome, now);
      this.waiters.notify(outcome);
      dropped.push(row.run_id);
      aborted++;
    }
    await this.records.runsEnded(dropped, {
      status: "aborted",
      endedAt: now,
      error: "aborted before start",
    });
    return { aborted };
  }

  // -------------------------------------------------------------------------------------------
  // The entry

  async getEntry(sessionKey: string): Promise<SessionRow | undefined> {
    await this.bind(sessionKey);
    return this.store.entry();
  }

  async queueDepth(sessionKey: string): Promise<QueueDepth> {
    await this.bind(sessionKey);
    const rows = this.queue.rows();
    return {
      waiting: rows.filter((r) => r.state === "queued").length,
      running: rows.some((r) => r.state === "running"),
    };
  }

  async patch(
    sessionKey: string,
    fields: Partial<
      Pick<SessionRow, "label" | "modelOverride" | "thinkingLevel" | "verboseLevel" | "sendPolicy">
    >,
  ): Promise<{ ok: true; entry: SessionRow } | ActorError> {
    await this.bind(sessionKey);
    const entry = this.store.entry();
    if (!entry) return { ok: false, code: "NOT_FOUND", message: `session not found: ${sessionKey}` };
    const updatedAt = Date.now();
    if ((await this.records.entryPatched({ ...entry, ...fields, updatedAt })) === "label-taken") {
      return {
        ok: false,
        code: "CONFLICT",
        message: `label "${fields.label}" is already used by another session of agent ${entry.agentId}`,
      };
    }
    // Re-read: a run may have updated counters while D1 was being written.
    const merged = { ...(this.store.entry() ?? entry), ...fields, updatedAt };
    this.store.saveEntry(merged);
    return { ok: true, entry: merged };
  }

  async reset(sessionKey: string): Promise<{ key: string; sessionId: string } | ActorError> {
    await this.bind(sessionKey);
    const entry = this.store.entry();
    if (!entry) return { ok: false, code: "NOT_FOUND", message: `session not found: ${sessionKey}` };
    const now = Date.now();
    const next = resetEntry(entry, now);
    next.expiresAt = entryExpiry(next, this.config);
    this.store.saveEntry(next);
    await this.records.sessionStarted(next, now);
    return { key: next.key, sessionId: next.sessionId };
  }

  /** Deletes this key's entry (and, when asked, its transcripts) after aborting its runs. */
  async remove(
    sessionKey: string,
    deleteTranscript: boolean,
  ): Promise<{ deleted: boolean; aborted: number }> {
    await this.bind(sessionKey);
    const { aborted } = await this.abort(sessionKey, true);
    const existed = !!this.store.entry();
    this.store.saveEntry(undefined);
    await this.records.sessionRemoved(sessionKey, deleteTranscript);
    return { deleted: existed, aborted };
  }

  /** Records a sub-agent announcement in this (requester) session. */
  async postAnnouncement(sessionKey: string, announcement: Announcement): Promise<{ delivered: boolean }> {
    await this.bind(sessionKey);
    return recordAnnouncement(this.parts, sessionKey, announcement);
  }

  /**
   * Queues a settled delivery of this session again (the operator's `deliveries.retry`): a
   * fresh round of `delivery.maxAttempts` attempts. Idempotent: a delivery still owed here is
   * left alone (`requeued: false`).
   */
  async retryDelivery(sessionKey: string, payload: DeliveryPayload): Promise<{ requeued: boolean }> {
    await this.bind(sessionKey);
    if (this.outbox.owes(payload.deliveryId)) return { requeued: false };
    // Marked pending before the row can be attempted, so an attempt's outcome always lands after.
    await this.records.deliveryRequeued(payload, Date.now());
    this.outbox.add(payload);
    this.outbox.dispatch();
    if (!this.live.current) await this.scheduleAlarm();
    return { requeued: true };
  }

  /** Makes sure an alarm is pending when there is work (used by the cron backstop). */
  async kick(sessionKey: string): Promise<void> {
    await this.bind(sessionKey);
    // The backstop trusts storage, not what this instance remembers setting.
    this.alarmAt = undefined;
    if (!this.live.current) await this.scheduleAlarm();
  }

  // -------------------------------------------------------------------------------------------
  // Steps: at most one run each, plus due deliveries; from the alarm, or started at once.

  override async alarm(): Promise<void> {
    // The alarm that fired is gone; whatever this invocation needs next is set again.
    this.alarmAt = undefined;
    await this.queueStep();
  }

  /**
   * Queues a step after the ones before it, so the alarm's steps and the ones a run's
   * enqueue or end starts at once never overlap; settles with that step.
   */
  private queueStep(): Promise<void> {
    this.stepsActive++;
    const step = this.steps.then(() => this.step());
    this.steps = step.catch(() => {});
    return step;
  }

  /** A step started without an alarm; its failure is logged (the backstop alarm retries). */
  private stepSoon(): void {
    this.ctx.waitUntil(this.queueStep().catch((error) => console.error(`step failed: ${error}`)));
  }

  /**
   * One step of the actor's work: records a previous instance left, the deliveries that are
   * due, and at most one run (the queue head, when due). A next head that is due starts in a
   * step of its own at once; the alarm is then set for what is due later.
   */
  private async step(): Promise<void> {
    let started: string | undefined;
    try {
      if (!this.store.kvGet("key")) return;
      await this.records
        .flushLeftover()
        .catch((error) => console.error(`deferred records not written: ${error}`));
      // Deliveries go out in the background: a connector that is down or slow never holds the run.
      this.outbox.dispatch();
      const head = this.queue.head();
      // A head whose last attempt failed waits for its backoff (this step may be a delivery's).
      if (head && (head.retry_at ?? 0) <= Date.now()) {
        started = head.run_id;
        await attemptHead(this.parts, head);
      }
      this.outbox.dispatch();
      this.store.sweepRunIds(Date.now());
    } finally {
      this.stepsActive--;
    }
    // The next run starts now, unless it is the one just attempted (its retry is the alarm's).
    // An empty queue is known without a read.
    const next = started && !this.stepsActive && this.queue.count() > 0 ? this.queue.head() : undefined;
    if (next && next.run_id !== started && (next.retry_at ?? 0) <= Date.now()) this.stepSoon();
    await this.scheduleAlarm();
  }
}
