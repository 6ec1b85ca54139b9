/**
 * SessionActor: one Durable Object per session key, owning the live state of that key. This
 * class is its public face (the methods the Worker, the tools and other actors call over DO
 * RPC, and the alarm) and wires together the modules that do the work, each through the
 * narrow port it needs (`ports.ts`):
 * - `lifecycle.ts`    the one path of a run, queued to done, with where each state is durable
 * - `actor-steps.ts`  steps that never overlap: the run started at once, the alarm as backstop
 * - `admission.ts`    enqueue: dedupe, freshness and reset, triggers, collect/cap
 * - `executor.ts`     a run's turn: model, tools, compaction, notices
 * - `actor-store.ts`  its DO SQLite: schema, kv, entry, dedupe and outcome records
 * - `run-queue.ts`    the durable FIFO run queue and a run's checkpoint
 * - `durable-state.ts` the schema and version of every JSON document it stores
 * - `records.ts`      every D1 read and write (a run's records in its finalize, before its reply)
 * - `commands.ts`     chat commands (`/stop`, `/status`, `/send`, `/context`, `/compact`)
 * - `outbound.ts`     what a run posts, and deliveries made outside runs
 * - `flow-runner.ts`  sessions_send exchanges and sub-agent announcements across sessions
 * - `context-store.ts` the turn context copy; `compactor.ts` compaction and the memory flush
 * - `waiters.ts`      server-side waits on runs
 * (`entry.ts`, `flows.ts`, `freshness.ts`, `reset-trigger.ts` and `system-prompt.ts` are the
 * pure rules they apply; `client.ts` reaches actors from outside.)
 */
import { DurableObject } from "cloudflare:workers";
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import type { SessionRow } from "../db/queries";
import type { DeliveryPayload } from "../delivery/deliver";
import { DeliveryOutbox } from "../delivery/outbox";
import type { ActorError, EnqueueRequest, EnqueueResult, QueueDepth, WaitResult } from "../runs/types";
import { ActorSteps } from "./actor-steps";
import { ActorStore } from "./actor-store";
import { admit } from "./admission";
import { commandOf, runCommand } from "./commands";
import { ContextStore, withContextCopy } from "./context-store";
import { type EntryPatch, patchEntry, resetSession } from "./entry-ops";
import { abortCurrent } from "./executor";
import { type Announcement, recordAnnouncement } from "./flow-runner";
import { attemptHead, dropQueued, queuedRunRecord } from "./lifecycle";
import { requeueDelivery } from "./outbound";
import type { ActorParts, LiveRun } from "./ports";
import { type ActorRecords, d1Records, type RunRecord } from "./records";
import { RecordsJournal } from "./records-journal";
import { progressOf, RunQueue } from "./run-queue";
import { RunWaiters, waitResultOf } from "./waiters";

export class SessionActor extends DurableObject<Env> {
  private readonly store: ActorStore;
  private readonly queue: RunQueue;
  private readonly outbox: DeliveryOutbox;
  private readonly records: ActorRecords;
  private readonly waiters = new RunWaiters();
  private readonly live: LiveRun = { waitingOn: new Map() };
  private readonly steps: ActorSteps;
  private readonly parts: ActorParts;
  /** This instance's first contact (see `wake`), shared by every call until it is done. */
  private waking: Promise<void> | undefined;
  private awake = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new ActorStore(ctx.storage.sql);
    this.queue = new RunQueue(ctx.storage.sql);
    const context = new ContextStore(ctx.storage.sql, this.store);
    this.outbox = new DeliveryOutbox(
      ctx.storage.sql,
      () => this.env,
      () => this.config,
      () => {
        this.steps.scheduleAlarm().catch((error) => console.error(`alarm not set: ${error}`));
      },
    );
    this.records = withContextCopy(
      d1Records(
        () => this.env,
        () => this.store.kvGet("key") ?? undefined,
        this.outbox,
        {
          get: () => this.store.kvGet("transcript_recorded"),
          set: (sessionId) => this.store.kvSet("transcript_recorded", sessionId),
        },
        new RecordsJournal(ctx.storage.sql),
      ),
      context,
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
      context,
      waiters: this.waiters,
      live: this.live,
      scheduleAlarm: () => this.steps.scheduleAlarm(),
      enqueue: (req) => this.enqueue(req),
      abort: (key, clearQueue) => this.abort(key, clearQueue),
      remove: (key, deleteTranscript) => this.remove(key, deleteTranscript),
    };
    this.steps = new ActorSteps({
      storage: ctx.storage,
      waitUntil: (promise) => ctx.waitUntil(promise),
      store: this.store,
      queue: this.queue,
      outbox: this.outbox,
      records: this.records,
      attempt: (row) => attemptHead(this.parts, row),
    });
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
      await this.steps.scheduleAlarm();
    await this.records
      .flushLeftover()
      .catch((error) => console.error(`deferred records not written: ${error}`));
  }

  // -------------------------------------------------------------------------------------------
  // Runs

  /**
   * Accepts a run (or a command) for this session; idempotent by `req.runId`. When nothing is
   * running or about to, the run starts at once in a step reserved before admission and
   * started once admission is done (its records taken), not at an alarm.
   */
  async enqueue(req: EnqueueRequest): Promise<EnqueueResult> {
    await this.bind(req.sessionKey);
    const command = commandOf(req);
    if (command) return runCommand(this.parts, req, command);
    const direct = !this.live.current && !this.steps.busy;
    if (direct) this.steps.reserve();
    try {
      return await admit(this.parts, req);
    } finally {
      if (direct) this.steps.release();
    }
  }

  /** Waits in the actor (not by client polling) until the run ends or `timeoutMs` passes. */
  async waitForRun(sessionKey: string, runId: string, timeoutMs: number): Promise<WaitResult | ActorError> {
    await this.bind(sessionKey);
    // An ended run's records are in D1 (its finalize is written before it is done), so a read
    // after the answer (chat.history, runs.get) sees them.
    const done = this.store.finishedOutcome(runId);
    if (done) return waitResultOf(done);
    if (!this.queue.byRunId(runId))
      return { ok: false, code: "NOT_FOUND", message: `run not found: ${runId}` };
    const outcome = await this.waiters.wait(runId, timeoutMs);
    if (outcome) return waitResultOf(outcome);
    const still = this.queue.byRunId(runId);
    const progress = still ? progressOf(still) : undefined;
    const result: WaitResult = { runId, status: "timeout", runStatus: still?.state ?? "queued" };
    if (progress) result.startedAt = progress.startedAt;
    return result;
  }

  /**
   * The run `runId` as this session holds it: `ended` (its records are in D1), its row as far
   * as it went while it waits or runs (D1 gets it with its finalize), or `unknown` (not a run
   * of this session).
   */
  async runView(sessionKey: string, runId: string): Promise<RunRecord | "ended" | "unknown"> {
    await this.bind(sessionKey);
    if (this.store.finishedOutcome(runId)) return "ended";
    const row = this.queue.byRunId(runId);
    if (!row) return "unknown";
    return queuedRunRecord(row);
  }

  /**
   * Writes the outcomes of this session's deliveries that D1 does not show yet (they wait for
   * the session's next write, see records.ts), so a read of its deliveries after this sees how
   * each attempt went.
   */
  async recordOutcomes(sessionKey: string): Promise<void> {
    await this.bind(sessionKey);
    await this.records.writeOutcomes();
    // The alarm set for them is no longer needed: set for what is due now.
    if (!this.live.current && !this.steps.busy) {
      this.steps.forgetAlarm();
      await this.steps.scheduleAlarm();
    }
  }

  /** Aborts the running run; with `clearQueue`, also drops every waiting run. Returns the count. */
  async abort(sessionKey: string, clearQueue: boolean): Promise<{ aborted: number }> {
    await this.bind(sessionKey);
    const running = abortCurrent(this.parts) ? 1 : 0;
    return { aborted: running + (clearQueue ? await dropQueued(this.parts) : 0) };
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

  async patch(sessionKey: string, fields: EntryPatch): Promise<{ ok: true; entry: SessionRow } | ActorError> {
    await this.bind(sessionKey);
    return patchEntry(this.parts, sessionKey, fields);
  }

  async reset(sessionKey: string): Promise<{ key: string; sessionId: string } | ActorError> {
    await this.bind(sessionKey);
    return resetSession(this.parts, sessionKey);
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
    return requeueDelivery(this.parts, payload);
  }

  /** Makes sure an alarm is pending when there is work (used by the cron backstop). */
  async kick(sessionKey: string): Promise<void> {
    await this.bind(sessionKey);
    this.steps.forgetAlarm();
    if (!this.live.current) await this.steps.scheduleAlarm();
  }

  override async alarm(): Promise<void> {
    await this.steps.alarm();
  }
}
