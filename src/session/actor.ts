/**
 * SessionActor: one Durable Object per session key, owning the live state of that key. This
 * class is its public face (the methods the Worker, the tools and other actors call over DO
 * RPC, and the alarm) and wires together the modules that do the work, handing each the host
 * interface it declares (only what it uses):
 * - `scheduler.ts`      the one scheduler: passes that never overlap, and the alarm for all that is due
 * - `run/`              a run: `lifecycle.ts` (its one path, queued to recorded), `queue.ts` (the
 *                       durable queue and checkpoints), `admission.ts`, `turn.ts` (model, tools,
 *                       compaction, notices), `waiters.ts` (server-side waits)
 * - `d1/`               every D1 read and write (`records.ts`: a run's records in one batch, before
 *                       its reply), their statements, the journal earlier versions left
 * - `storage/`          its own SQLite: schema, kv, entry, run ids (`store.ts`); every JSON document
 *                       it keeps, versioned (`documents.ts`)
 * - `chat/`             what the session posts (`posts.ts`) and chat commands (`commands.ts`)
 * - `flows/`            sessions_send exchanges and sub-agent announcements (`plans.ts` pure, `handoff.ts`)
 * - `context/`          the turn context copy, its report, compaction and the memory flush, the
 *                       system prompt (pure)
 * - `entry/`            the entry's pure rules (`rules.ts`, `freshness.ts`, `reset-trigger.ts`) and
 *                       the operator's edits of it (`changes.ts`)
 * (`hosts.ts` builds the hosts from the actor's parts; `client.ts` reaches actors from outside.)
 */
import { DurableObject } from "cloudflare:workers";
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import type { SessionRow } from "../db/queries";
import type { DeliveryPayload } from "../delivery/deliver";
import { DeliveryOutbox } from "../delivery/outbox";
import type { ActorError, EnqueueRequest, EnqueueResult, QueueDepth, WaitResult } from "../runs/types";
import type { NoteMessage, SessionState } from "../tools/types";
import { commandOf, runCommand, steerOf } from "./chat/commands";
import { requeueDelivery } from "./chat/posts";
import { ContextStore, withContextCopy } from "./context/copy";
import { RecordsJournal } from "./d1/legacy-journal";
import { type ActorRecords, d1Records, type RunRecord } from "./d1/records";
import { type EntryPatch, patchEntry, resetSession } from "./entry/changes";
import { type Announcement, recordAnnouncement } from "./flows/handoff";
import { type ActorHosts, actorHosts } from "./hosts";
import { admit } from "./run/admission";
import { dropQueued } from "./run/drop";
import { type AttemptEnd, attemptHead } from "./run/lifecycle";
import { abortCurrent, type LiveRun } from "./run/live";
import { progressOf, RunQueue, specOf } from "./run/queue";
import { queuedRunRecord } from "./run/run-row";
import { RunWaiters, waitResultOf } from "./run/waiters";
import { ActorScheduler } from "./scheduler";
import { ActorStore } from "./storage/store";

export class SessionActor extends DurableObject<Env> {
  private readonly store: ActorStore;
  private readonly queue: RunQueue;
  private readonly outbox: DeliveryOutbox;
  private readonly records: ActorRecords;
  private readonly context: ContextStore;
  private readonly waiters = new RunWaiters();
  private readonly live: LiveRun = { waitingOn: new Map() };
  private readonly scheduler: ActorScheduler;
  /** The modules' hosts (each the few capabilities its module declares; hosts.ts). */
  private readonly hosts: ActorHosts;
  /** This instance's first contact (see `wake`), shared by every call until it is done. */
  private waking: Promise<void> | undefined;
  private awake = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const sql = ctx.storage.sql;
    this.store = new ActorStore(sql);
    this.queue = new RunQueue(sql);
    this.context = new ContextStore(sql, this.store);
    const schedule = () => this.scheduler.schedule();
    this.outbox = new DeliveryOutbox(
      sql,
      () => this.env,
      () => this.config,
      () => {
        schedule().catch((error) => console.error(`alarm not set: ${error}`));
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
        new RecordsJournal(sql),
      ),
      this.context,
    );
    this.hosts = actorHosts({
      env: () => this.env,
      config: () => this.config,
      store: this.store,
      queue: this.queue,
      outbox: this.outbox,
      records: this.records,
      context: this.context,
      waiters: this.waiters,
      live: this.live,
      schedule,
      stop: async () => (await this.stopRuns()).aborted,
    });
    const { store, queue, outbox, records, live } = this;
    this.scheduler = new ActorScheduler({
      storage: ctx.storage,
      waitUntil: (promise) => ctx.waitUntil(promise),
      store,
      queue,
      outbox,
      records,
      attempt: async (row) => this.afterAttempt(await attemptHead(this.hosts.lifecycle, row)),
      timeOut: () => abortCurrent(live, "timeout"),
    });
  }

  private get config(): Config {
    return loadConfig(this.env);
  }

  /** What an attempt left to do: a sub-agent with cleanup "delete" goes once it has announced. */
  private async afterAttempt(end: AttemptEnd): Promise<void> {
    const key = this.store.kvGet("key");
    if (end === "remove-session" && key) await this.remove(key, true);
  }

  /** Aborts the running run and drops every waiting one; how many. */
  private async stopRuns(): Promise<{ aborted: number }> {
    // Messages waiting to steer the running run go with it.
    this.store.setSteers(undefined);
    const running = abortCurrent(this.live) ? 1 : 0;
    const { queue, store, waiters, records } = this;
    return { aborted: running + (await dropQueued({ queue, store, waiters, records })) };
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
      await this.scheduler.schedule();
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
  async enqueue(given: EnqueueRequest): Promise<EnqueueResult> {
    await this.bind(given.sessionKey);
    const req = steerOf(given) ?? given;
    const command = commandOf(req);
    if (command) return runCommand(this.hosts.commands, req, command);
    const direct = !this.live.current && !this.scheduler.busy;
    if (direct) this.scheduler.reserve();
    try {
      return await admit(this.hosts.admission, req);
    } finally {
      if (direct) this.scheduler.release();
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
    return queuedRunRecord(row, this.queue.progress(row));
  }

  /**
   * Appends a message to this session's current transcript without starting a run (sessions_send
   * `notify`, SPEC §20); idempotent by the message's id.
   */
  async note(sessionKey: string, message: NoteMessage): Promise<{ ok: true } | ActorError> {
    await this.bind(sessionKey);
    const entry = this.store.entry();
    if (!entry) return { ok: false, code: "NOT_FOUND", message: `session not found: ${sessionKey}` };
    await this.records.messagesAppended(entry.sessionId, [
      {
        id: message.id,
        role: "user",
        content: [{ type: "text", text: message.text }],
        timestamp: Date.now(),
        provenance: message.provenance,
      },
    ]);
    this.store.markHistory(entry.sessionId);
    return { ok: true };
  }

  /** The session's stateVersion and, after `since`, its signal log's events (SPEC §20). */
  async stateChanges(sessionKey: string, since: number | undefined): Promise<SessionState> {
    await this.bind(sessionKey);
    const entry = this.store.entry();
    const stateVersion = entry?.stateVersion ?? 0;
    const exists = entry !== undefined;
    return since === undefined
      ? { exists, stateVersion }
      : { exists, stateVersion, ...this.store.signals.since(since, stateVersion) };
  }

  /** What run `runId` was asked (its inputs' text) while this session holds it queued or running. */
  async runInput(sessionKey: string, runId: string): Promise<string | undefined> {
    await this.bind(sessionKey);
    const row = this.queue.byRunId(runId);
    return row
      ? specOf(row)
          .req.inputs.map((i) => i.text)
          .join("\n")
      : undefined;
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
    if (!this.live.current && !this.scheduler.busy) {
      this.scheduler.forgetAlarm();
      await this.scheduler.schedule();
    }
  }

  /** Aborts the running run; with `clearQueue`, also drops every waiting run. Returns the count. */
  async abort(sessionKey: string, clearQueue: boolean): Promise<{ aborted: number }> {
    await this.bind(sessionKey);
    if (clearQueue) return this.stopRuns();
    return { aborted: abortCurrent(this.live) ? 1 : 0 };
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
    return patchEntry(this.hosts.entry, sessionKey, fields);
  }

  async reset(sessionKey: string): Promise<{ key: string; sessionId: string } | ActorError> {
    await this.bind(sessionKey);
    return resetSession(this.hosts.entry, sessionKey);
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
    return recordAnnouncement(this.hosts.flows, sessionKey, announcement);
  }

  /**
   * Queues a settled delivery of this session again (the operator's `deliveries.retry`): a
   * fresh round of `delivery.maxAttempts` attempts. Idempotent: a delivery still owed here is
   * left alone (`requeued: false`).
   */
  async retryDelivery(sessionKey: string, payload: DeliveryPayload): Promise<{ requeued: boolean }> {
    await this.bind(sessionKey);
    return requeueDelivery(
      {
        live: this.live,
        outbox: this.outbox,
        records: this.records,
        schedule: () => this.scheduler.schedule(),
      },
      payload,
    );
  }

  /** Makes sure an alarm is pending when there is work (used by the cron backstop). */
  async kick(sessionKey: string): Promise<void> {
    await this.bind(sessionKey);
    this.scheduler.forgetAlarm();
    if (!this.live.current) await this.scheduler.schedule();
  }

  override async alarm(): Promise<void> {
    await this.scheduler.alarm();
  }
}
