/**
 * SessionActor: one Durable Object per session key. It owns the live state of that key:
 * the session entry (written through to D1), the run queue, the running run, waiters, and its
 * delivery outbox (src/delivery/outbox.ts), whose retries share the actor's alarm.
 *
 * Guarantees of the run queue:
 * - Runs execute one at a time, FIFO in arrival order. The queue lives in DO SQLite and is
 *   driven by alarms, so queued and interrupted runs survive eviction and restarts.
 * - A run checkpoints after every model step and tool result (before the transcript append),
 *   so a restarted run resumes from its last completed step; transcript appends are
 *   idempotent by message id, so nothing is appended twice.
 * - Enqueueing is idempotent by runId (deterministic for inbound messages and idempotency keys).
 * - Critical sections that decide state touch only synchronous DO storage; everything that
 *   awaits D1, a model or a connector happens outside them.
 */
import { DurableObject } from "cloudflare:workers";
import {
  type AgentLoopResult,
  emptyCheckpoint,
  ProviderError,
  type RunCheckpoint,
  runAgentLoop,
} from "../agent/loop";
import { languageModelFor, ModelRefError, resolveModelRef } from "../agent/models";
import { stableUuid } from "../auth/signature";
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import {
  appendMessageStatements,
  appendMessages,
  type DeliveryContext,
  deleteSessionRows,
  getSession,
  insertDeliveryStatement,
  insertRunStatement,
  listSessions,
  type Origin,
  recentMessages,
  recordInboundStatement,
  recordTranscriptStatement,
  type SessionRow,
  startRunStatement,
  updateRun,
  updateRunStatement,
  upsertSession,
  upsertSessionStatement,
  writeBatch,
} from "../db/queries";
import type { DeliveryKind, DeliveryPayload } from "../delivery/deliver";
import { type AttemptState, DeliveryOutbox, deliveryRow } from "../delivery/outbox";
import { chatTypeOfKey } from "../keys/session-key";
import { toolsForSession } from "../tools/registry";
import { entryInitOf, newSessionRow } from "./entry-init";
import {
  ANNOUNCE_SKIP,
  announceReply,
  buildAnnouncement,
  type NextRun,
  nextExchangeStep,
  REPLY_SKIP,
  spawnAnnouncePrompt,
} from "./flows";
import { evaluateFreshness, resolveResetPolicy, sessionExpiry } from "./freshness";
import { matchResetTrigger } from "./reset-trigger";
import { type TranscriptMessage, textOf } from "./transcript";
import type {
  ActorError,
  EnqueueRequest,
  EnqueueResult,
  EntryInit,
  RunInput,
  RunOutcome,
  RunStatus,
  SpawnMeta,
  WaitResult,
} from "./types";
import { transcriptPath } from "./view";

interface QueueRow {
  pos: number;
  run_id: string;
  state: "queued" | "running";
  spec: string;
  checkpoint: string | null;
  enqueued_at: number;
  [key: string]: SqlStorageValue;
}

interface QueuedRun {
  req: EnqueueRequest;
  sessionId: string;
  /** Set when this run is the greeting turn of a bare reset trigger. */
  greeting?: boolean;
  /**
   * Set when the run was enqueued on an idle actor and the enqueue batch already stored what
   * the run start writes (the run marked running, the entry, the inputs), so the run skips that
   * round trip. `hadHistory` is whether the transcript had older messages before the inputs.
   */
  prestarted?: { startedAt: number; hadHistory: boolean };
}

interface RunProgress {
  startedAt: number;
  loop: RunCheckpoint;
  /** Present once the run has ended and is being finalized (idempotent re-entry). */
  outcome?: RunOutcome;
  /**
   * The run's delivery as first attempted, and that attempt (null: an earlier flush had
   * settled it); a re-entered finalize records this payload instead of deciding again.
   */
  outgoing?: { payload: DeliveryPayload; attempt: AttemptState | null };
  /** Set once the finalize batch is written, so a re-entered finalize never writes it twice. */
  delivery?: { delivered: boolean | null };
  /** Set once the run's flow (exchange round, announce step, announcement) has been handed on. */
  continued?: boolean;
  /**
   * How many of `loop.produced` are known to be stored in D1. The final reply (an assistant
   * message without tool calls) is checkpointed but stored with the finalize batch instead of
   * on its own round trip.
   */
  stored?: number;
}

const SCHEMA_VERSION = 1;
/** How long run ids are remembered for dedupe (webhook retries come within minutes or hours). */
const RECEIVED_RETENTION_MS = 30 * 24 * 3_600_000;
const SWEEP_INTERVAL_MS = 3_600_000;
const DEFAULT_SYSTEM_PROMPT =
  "You are a helpful assistant reached through a chat gateway. Answer concisely and use tools when they help.";
const GREETING_TEXT =
  "The session was just reset. Greet the user in one short sentence and confirm the fresh start.";

/** The transcript messages of a run's inputs; ids derive from the run id, so appends are idempotent. */
function inputMessages(runId: string, inputs: RunInput[]): TranscriptMessage[] {
  return inputs.map((input, i) => ({
    id: `${runId}:u${i}`,
    role: "user",
    content: [{ type: "text", text: input.text }],
    timestamp: input.timestamp,
    runId,
    provenance: input.provenance,
  }));
}

/** drizzle wraps D1 errors (`Failed query: …`), so the constraint message is down the cause chain. */
function isUniqueViolation(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (/UNIQUE constraint failed/i.test(e.message)) return true;
  }
  return false;
}

export class SessionActor extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly outbox: DeliveryOutbox;
  private current?: { runId: string; controller: AbortController };
  private readonly waiters = new Map<string, Set<(o: RunOutcome) => void>>();
  private woken = false;
  /** Sessions the current run is waiting on (sessions_send); in memory: it describes live waits only. */
  private readonly waitingOn = new Map<string, number>();
  private readonly kvCache = new Map<string, string | null>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.outbox = new DeliveryOutbox(
      this.sql,
      () => this.env,
      () => this.config,
    );
    // Versioned, idempotent DDL run on every wake.
    this.sql.exec(`CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)`);
    const version = Number(this.kvGet("schema_version") ?? 0);
    if (version < 1) {
      this.sql.exec(`CREATE TABLE IF NOT EXISTS queue (
        pos INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, state TEXT NOT NULL,
        spec TEXT NOT NULL, checkpoint TEXT, enqueued_at INTEGER NOT NULL)`);
      this.sql.exec(
        `CREATE TABLE IF NOT EXISTS received (run_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL)`,
      );
      this.sql.exec(
        `CREATE TABLE IF NOT EXISTS finished (run_id TEXT PRIMARY KEY, outcome TEXT NOT NULL, at INTEGER NOT NULL)`,
      );
      this.sql.exec(DeliveryOutbox.DDL);
      this.kvSet("schema_version", String(SCHEMA_VERSION));
    }
  }

  // -------------------------------------------------------------------------------------------
  // Small storage helpers (synchronous DO SQLite)

  /**
   * kv reads are served from memory after the first: this instance is the only writer of its
   * storage and every kv write goes through kvSet/kvDelete, so the copy cannot go stale.
   */
  private kvGet(k: string): string | undefined {
    if (this.kvCache.has(k)) return this.kvCache.get(k) ?? undefined;
    const v = this.sql.exec<{ v: string }>(`SELECT v FROM kv WHERE k = ?`, k).toArray()[0]?.v;
    this.kvCache.set(k, v ?? null);
    return v;
  }

  private kvSet(k: string, v: string): void {
    this.sql.exec(`INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`, k, v);
    this.kvCache.set(k, v);
  }

  private kvDelete(k: string): void {
    this.sql.exec(`DELETE FROM kv WHERE k = ?`, k);
    this.kvCache.set(k, null);
  }

  private get config(): Config {
    return loadConfig(this.env);
  }

  private entry(): SessionRow | undefined {
    const raw = this.kvGet("entry");
    return raw ? (JSON.parse(raw) as SessionRow) : undefined;
  }

  private saveEntry(entry: SessionRow | undefined): void {
    if (entry) this.kvSet("entry", JSON.stringify(entry));
    else this.kvDelete("entry");
  }

  /** Whether this actor has appended to `sessionId` before (so a turn must load older context). */
  private hasHistory(sessionId: string): boolean {
    return this.kvGet(`history:${sessionId}`) !== undefined;
  }

  private markHistory(sessionId: string): void {
    if (!this.hasHistory(sessionId)) this.kvSet(`history:${sessionId}`, "1");
  }

  private queueRows(): QueueRow[] {
    return this.sql.exec<QueueRow>(`SELECT * FROM queue ORDER BY pos`).toArray();
  }

  /** Whether any run is queued or running (without reading its spec). */
  private hasQueue(): boolean {
    return this.sql.exec(`SELECT 1 FROM queue LIMIT 1`).toArray().length > 0;
  }

  private queueHead(): QueueRow | undefined {
    return this.sql.exec<QueueRow>(`SELECT * FROM queue ORDER BY pos LIMIT 1`).toArray()[0];
  }

  private finishedOutcome(runId: string): RunOutcome | undefined {
    const row = this.sql
      .exec<{ outcome: string }>(`SELECT outcome FROM finished WHERE run_id = ?`, runId)
      .toArray()[0];
    return row ? (JSON.parse(row.outcome) as RunOutcome) : undefined;
  }

  /**
   * Learns this actor's key on first contact and loads the entry from D1 if this actor has
   * never held it (e.g. the entry was written before the actor existed). Safe to repeat.
   */
  private async bind(sessionKey: string): Promise<void> {
    const known = this.kvGet("key");
    if (!this.woken) {
      // First contact since this instance started (after an eviction or a restart): make
      // sure leftover work has an alarm, in case the previous one was lost with the process.
      this.woken = true;
      if (known && !this.current && (await this.ctx.storage.getAlarm()) === null) await this.scheduleAlarm();
    }
    if (known === sessionKey && this.kvGet("entry_loaded")) return;
    if (known && known !== sessionKey) throw new Error(`actor for ${known} was addressed as ${sessionKey}`);
    await this.ctx.blockConcurrencyWhile(async () => {
      if (this.kvGet("entry_loaded")) return;
      const row = await getSession(this.env, sessionKey);
      this.kvSet("key", sessionKey);
      if (row && !this.entry()) {
        this.saveEntry(row);
        // Written before this actor existed (seeded, imported, or this actor's storage was
        // lost): its transcript may hold context the next turn must load.
        this.markHistory(row.sessionId);
      }
      this.kvSet("entry_loaded", "1");
    });
  }

  private async scheduleAlarm(): Promise<void> {
    if (this.hasQueue()) return this.ctx.storage.setAlarm(Date.now());
    const next = this.outbox.nextDue();
    if (next !== undefined) return this.ctx.storage.setAlarm(next);
    return this.ctx.storage.deleteAlarm();
  }

  // -------------------------------------------------------------------------------------------
  // Entry lifecycle

  private newEntry(sessionKey: string, init: EntryInit, now: number, sessionId: string): SessionRow {
    return newSessionRow(sessionKey, init, now, sessionId);
  }

  /** A new sessionId under the same key; settings, origin and route are kept, counters zeroed. */
  private resetEntry(entry: SessionRow, now: number): SessionRow {
    return {
      ...entry,
      sessionId: crypto.randomUUID(),
      sessionStartedAt: now,
      updatedAt: now,
      lastInteractionAt: null,
      inputTokens: 0,
      outputTokens: 0,
      totalTokens: 0,
      compactionCount: 0,
      systemSent: false,
      abortedLastRun: false,
    };
  }

  private expiryOf(entry: SessionRow): number | null {
    const { chatType, thread } = chatTypeOfKey(entry.key, !!entry.lastThreadId);
    const policy = resolveResetPolicy(this.config.session, entry.channel, chatType, thread);
    if (entry.kind === "cron" || entry.kind === "hook" || entry.key.includes(":subagent:")) return null;
    return sessionExpiry(entry, policy, this.config.session.timezone) ?? null;
  }

  private applyRoute(entry: SessionRow, req: EnqueueRequest): SessionRow {
    const next = { ...entry };
    if (req.route) {
      const ctx: DeliveryContext = {
        channel: req.route.channel,
        to: req.route.to,
        accountId: req.route.accountId,
      };
      if (req.route.threadId) ctx.threadId = req.route.threadId;
      next.deliveryContext = ctx;
      next.lastChannel = req.route.channel;
      next.lastTo = req.route.to;
      next.lastAccountId = req.route.accountId;
      next.lastThreadId = req.route.threadId ?? null;
    }
    if (req.origin) {
      // Best effort and additive: a connector that only refreshes routing never wipes labels.
      const merged: Origin = { ...((entry.origin as Origin | null) ?? {}) };
      for (const [k, v] of Object.entries(req.origin))
        if (v !== undefined && v !== "") merged[k as keyof Origin] = v;
      next.origin = merged;
    }
    if (req.init.displayName) next.displayName = req.init.displayName;
    if (req.init.subject) next.subject = req.init.subject;
    return next;
  }

  // -------------------------------------------------------------------------------------------
  // RPC: enqueue

  async enqueue(req: EnqueueRequest): Promise<EnqueueResult> {
    await this.bind(req.sessionKey);
    const config = this.config;
    const now = Date.now();
    if (
      req.userInteraction &&
      req.inputs.length === 1 &&
      req.inputs[0]?.text.trim().toLowerCase() === "/stop"
    ) {
      return this.stop(req);
    }

    // --- critical section: synchronous storage only ---------------------------------------
    const seen = this.sql
      .exec<{ result: string }>(`SELECT result FROM received WHERE run_id = ?`, req.runId)
      .toArray()[0];
    if (seen)
      return { ...(JSON.parse(seen.result) as Extract<EnqueueResult, { ok: true }>), status: "duplicate" };

    let entry = this.entry();
    let created = false;
    let resetHappened = false;
    if (!entry) {
      entry = this.newEntry(req.sessionKey, req.init, now, crypto.randomUUID());
      created = true;
    } else if (req.userInteraction) {
      const { chatType, thread } = chatTypeOfKey(entry.key, req.hasThread);
      const policy = resolveResetPolicy(config.session, entry.channel, chatType, thread);
      if (!evaluateFreshness(entry, policy, config.session.timezone, now).fresh) {
        entry = this.resetEntry(entry, now);
        resetHappened = true;
      }
    }

    let inputs = req.inputs;
    let greeting = false;
    let status: "queued" | "command" = "queued";
    if (req.userInteraction && inputs.length === 1 && inputs[0]) {
      const trigger = matchResetTrigger(inputs[0].text, config.session.resetTriggers, config);
      if (trigger) {
        if (!created) entry = this.resetEntry(entry, now);
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

    entry = this.applyRoute(entry, req);
    entry.updatedAt = now;
    if (req.userInteraction) entry.lastInteractionAt = now;
    entry.expiresAt = this.expiryOf(entry);

    const waiting = this.sql
      .exec<{ n: number }>(`SELECT COUNT(*) AS n FROM queue WHERE state = 'queued'`)
      .one().n;
    const mode = config.session.queue.mode;
    const tail = this.sql
      .exec<QueueRow>(`SELECT * FROM queue WHERE state = 'queued' ORDER BY pos DESC LIMIT 1`)
      .toArray()[0];
    const collectInto =
      mode === "collect" && !greeting && !resetHappened && tail
        ? (JSON.parse(tail.spec) as QueuedRun)
        : undefined;

    // Nothing running or waiting: this run is next, so its start is written with the enqueue.
    const idle = !this.current && !this.hasQueue();
    let runId = req.runId;
    if (
      collectInto &&
      tail &&
      collectInto.req.trigger === req.trigger &&
      collectInto.sessionId === entry.sessionId
    ) {
      collectInto.req.inputs.push(...inputs);
      if (req.route) collectInto.req.route = req.route;
      // The merged inputs are stored when the run starts, with the others.
      delete collectInto.prestarted;
      this.sql.exec(`UPDATE queue SET spec = ? WHERE pos = ?`, JSON.stringify(collectInto), tail.pos);
      runId = tail.run_id;
    } else {
      if (waiting >= config.session.queue.cap) {
        return {
          ok: false,
          code: "RATE_LIMITED",
          message: `session queue is full (cap ${config.session.queue.cap})`,
        };
      }
      const queued: QueuedRun = { req: { ...req, inputs }, sessionId: entry.sessionId };
      if (greeting) queued.greeting = true;
      this.sql.exec(
        `INSERT INTO queue (run_id, state, spec, enqueued_at) VALUES (?, 'queued', ?, ?)`,
        runId,
        JSON.stringify(queued),
        now,
      );
      // Something is running or about to (the alarm starts the head at once; a prestarted
      // head is already recorded as running).
      entry.runStatus = "running";
    }
    this.saveEntry(entry);
    const result = {
      ok: true as const,
      runId,
      sessionKey: req.sessionKey,
      sessionId: entry.sessionId,
      status,
    };
    const waitingOn = this.current ? [...this.waitingOn.keys()] : [];
    this.sql.exec(
      `INSERT INTO received (run_id, result, at) VALUES (?, ?, ?)`,
      req.runId,
      JSON.stringify(result),
      now,
    );
    const prestart =
      idle && runId === req.runId
        ? { startedAt: now, hadHistory: this.hasHistory(entry.sessionId) }
        : undefined;
    const alarmSet = this.scheduleAlarm();
    // --- end of critical section ----------------------------------------------------------

    // Write-through to D1 so the session and run are visible at once. If this fails the run
    // still executes (it repeats these idempotent writes when it starts).
    await alarmSet;
    await this.writeThrough(entry, runId, req, entry.sessionId, now, prestart && inputs);
    if (prestart) this.markPrestarted(runId, entry.sessionId, inputs.length, prestart);
    return waitingOn.length ? { ...result, waitingOn } : result;
  }

  /** A message outside any run joined the transcript: a prestarted run must load its context. */
  private historyChanged(sessionId: string): void {
    for (const row of this.queueRows()) {
      if (row.checkpoint) continue;
      const spec = JSON.parse(row.spec) as QueuedRun;
      if (spec.sessionId !== sessionId || !spec.prestarted || spec.prestarted.hadHistory) continue;
      spec.prestarted.hadHistory = true;
      this.sql.exec(`UPDATE queue SET spec = ? WHERE pos = ?`, JSON.stringify(spec), row.pos);
    }
  }

  /**
   * Records that the enqueue batch stored the run's start, unless the run has started or taken
   * more inputs (collect mode) while the batch was in flight.
   */
  private markPrestarted(
    runId: string,
    sessionId: string,
    inputCount: number,
    prestart: NonNullable<QueuedRun["prestarted"]>,
  ) {
    const row = this.sql
      .exec<QueueRow>(`SELECT * FROM queue WHERE run_id = ? AND checkpoint IS NULL`, runId)
      .toArray()[0];
    if (!row) return;
    const spec = JSON.parse(row.spec) as QueuedRun;
    if (spec.req.inputs.length !== inputCount) return;
    spec.prestarted = prestart;
    this.sql.exec(`UPDATE queue SET spec = ? WHERE pos = ?`, JSON.stringify(spec), row.pos);
    this.markHistory(sessionId);
  }

  private async writeThrough(
    entry: SessionRow,
    runId: string,
    req: EnqueueRequest,
    sessionId: string,
    now: number,
    /** The inputs of a run that starts at once: stored now, with the run marked running. */
    startingWith?: RunInput[] | false,
  ) {
    const env = this.env;
    const run = {
      runId,
      sessionKey: req.sessionKey,
      sessionId,
      trigger: req.trigger,
      status: "queued",
      createdAt: now,
      deliver: req.deliver,
      idempotencyKey: req.idempotencyKey ?? null,
    };
    const statements = [
      upsertSessionStatement(env, entry),
      recordTranscriptStatement(env, sessionId, entry.key, now),
      ...(startingWith
        ? [
            // Insert only: applied late, it must never move a finished run back to running.
            insertRunStatement(env, { ...run, status: "running", startedAt: now }),
            ...appendMessageStatements(env, sessionId, inputMessages(runId, startingWith)),
          ]
        : [insertRunStatement(env, run)]),
    ];
    if (req.inbound) {
      statements.push(
        recordInboundStatement(env, {
          ...req.inbound,
          sessionKey: entry.key,
          sessionId,
          runId,
          status: "queued",
          createdAt: now,
        }),
      );
    }
    await writeBatch(env, statements);
  }

  // -------------------------------------------------------------------------------------------
  // RPC: queries and control

  async getEntry(sessionKey: string): Promise<SessionRow | undefined> {
    await this.bind(sessionKey);
    return this.entry();
  }

  async queueDepth(sessionKey: string): Promise<{ waiting: number; running: boolean }> {
    await this.bind(sessionKey);
    const rows = this.queueRows();
    return {
      waiting: rows.filter((r) => r.state === "queued").length,
      running: rows.some((r) => r.state === "running"),
    };
  }

  /** Waits in the actor (not by client polling) until the run ends or `timeoutMs` passes. */
  async waitForRun(sessionKey: string, runId: string, timeoutMs: number): Promise<WaitResult | ActorError> {
    await this.bind(sessionKey);
    const done = this.finishedOutcome(runId);
    if (done) return this.toWaitResult(done);
    const row = this.sql.exec<QueueRow>(`SELECT * FROM queue WHERE run_id = ?`, runId).toArray()[0];
    if (!row) return { ok: false, code: "NOT_FOUND", message: `run not found: ${runId}` };
    const outcome = await new Promise<RunOutcome | undefined>((resolve) => {
      const set = this.waiters.get(runId) ?? new Set();
      const timer = setTimeout(() => {
        set.delete(done);
        resolve(undefined);
      }, timeoutMs);
      const done = (o: RunOutcome) => {
        clearTimeout(timer);
        resolve(o);
      };
      set.add(done);
      this.waiters.set(runId, set);
    });
    if (outcome) return this.toWaitResult(outcome);
    const still = this.sql.exec<QueueRow>(`SELECT * FROM queue WHERE run_id = ?`, runId).toArray()[0];
    const progress = still?.checkpoint ? (JSON.parse(still.checkpoint) as RunProgress) : undefined;
    const result: WaitResult = { runId, status: "timeout", runStatus: still?.state ?? "queued" };
    if (progress) result.startedAt = progress.startedAt;
    return result;
  }

  private toWaitResult(o: RunOutcome): WaitResult {
    const status = o.status === "ok" || o.status === "error" || o.status === "aborted" ? o.status : "timeout";
    const r: WaitResult = { runId: o.runId, status, runStatus: o.status };
    if (o.startedAt !== undefined) r.startedAt = o.startedAt;
    if (o.endedAt !== undefined) r.endedAt = o.endedAt;
    if (o.error !== undefined) r.error = o.error;
    if (o.reply !== undefined) r.reply = o.reply;
    return r;
  }

  /** Aborts the running run; with `clearQueue`, also drops every waiting run. Returns the count. */
  async abort(sessionKey: string, clearQueue: boolean): Promise<{ aborted: number }> {
    await this.bind(sessionKey);
    let aborted = 0;
    if (this.current) {
      this.current.controller.abort(new AbortRun("aborted"));
      aborted++;
    }
    if (clearQueue) {
      const now = Date.now();
      for (const row of this.queueRows()) {
        if (row.state !== "queued") continue;
        this.sql.exec(`DELETE FROM queue WHERE pos = ?`, row.pos);
        const outcome: RunOutcome = {
          runId: row.run_id,
          status: "aborted",
          endedAt: now,
          error: "aborted before start",
        };
        this.sql.exec(
          `INSERT OR REPLACE INTO finished (run_id, outcome, at) VALUES (?, ?, ?)`,
          row.run_id,
          JSON.stringify(outcome),
          now,
        );
        this.notify(outcome);
        await updateRun(this.env, row.run_id, {
          status: "aborted",
          endedAt: now,
          error: outcome.error ?? null,
        });
        aborted++;
      }
    }
    return { aborted };
  }

  async patch(
    sessionKey: string,
    fields: Partial<
      Pick<SessionRow, "label" | "modelOverride" | "thinkingLevel" | "verboseLevel" | "sendPolicy">
    >,
  ): Promise<{ ok: true; entry: SessionRow } | ActorError> {
    await this.bind(sessionKey);
    const entry = this.entry();
    if (!entry) return { ok: false, code: "NOT_FOUND", message: `session not found: ${sessionKey}` };
    const next: SessionRow = { ...entry, ...fields, updatedAt: Date.now() };
    try {
      await upsertSession(this.env, next);
    } catch (error) {
      if (isUniqueViolation(error)) {
        return {
          ok: false,
          code: "CONFLICT",
          message: `label "${fields.label}" is already used by another session of agent ${entry.agentId}`,
        };
      }
      throw error;
    }
    // Re-read: a run may have updated counters while D1 was being written.
    const latest = this.entry() ?? entry;
    const merged = { ...latest, ...fields, updatedAt: next.updatedAt };
    this.saveEntry(merged);
    return { ok: true, entry: merged };
  }

  async reset(sessionKey: string): Promise<{ key: string; sessionId: string } | ActorError> {
    await this.bind(sessionKey);
    const entry = this.entry();
    if (!entry) return { ok: false, code: "NOT_FOUND", message: `session not found: ${sessionKey}` };
    const now = Date.now();
    const next = this.resetEntry(entry, now);
    next.expiresAt = this.expiryOf(next);
    this.saveEntry(next);
    await writeBatch(this.env, [
      upsertSessionStatement(this.env, next),
      recordTranscriptStatement(this.env, next.sessionId, next.key, now),
    ]);
    return { key: next.key, sessionId: next.sessionId };
  }

  /** Deletes this key's entry (and, when asked, its transcripts) after aborting its runs. */
  async remove(
    sessionKey: string,
    deleteTranscript: boolean,
  ): Promise<{ deleted: boolean; aborted: number }> {
    await this.bind(sessionKey);
    const { aborted } = await this.abort(sessionKey, true);
    const existed = !!this.entry();
    this.saveEntry(undefined);
    await deleteSessionRows(this.env, sessionKey, deleteTranscript);
    return { deleted: existed, aborted };
  }

  /** Makes sure an alarm is pending when there is work (used by the cron backstop). */
  async kick(sessionKey: string): Promise<void> {
    await this.bind(sessionKey);
    if (!this.current) await this.scheduleAlarm();
  }

  // -------------------------------------------------------------------------------------------
  // Alarm: one run per invocation, plus due deliveries.

  override async alarm(): Promise<void> {
    const key = this.kvGet("key");
    if (!key) return;
    // A run that started before this alarm may be between its first delivery attempt and its
    // finalize batch: its delivery is finalize's to record, not the flush's.
    const started = this.sql
      .exec<{ run_id: string }>(`SELECT run_id FROM queue WHERE checkpoint IS NOT NULL ORDER BY pos LIMIT 1`)
      .toArray()[0];
    await this.outbox.flush(started?.run_id);
    // Read after the flush's awaits: a merge, abort or delete may have changed the queue.
    const head = this.queueHead();
    if (head) await this.execute(head);
    await this.outbox.flush();
    this.sweepRetention();
    await this.scheduleAlarm();
  }

  /** Forgets old run ids (dedupe and wait records), at most hourly: each sweep scans both tables. */
  private sweepRetention(): void {
    const now = Date.now();
    if (now - Number(this.kvGet("swept_at") ?? 0) < SWEEP_INTERVAL_MS) return;
    this.sql.exec(`DELETE FROM received WHERE at < ?`, now - RECEIVED_RETENTION_MS);
    this.sql.exec(`DELETE FROM finished WHERE at < ?`, now - RECEIVED_RETENTION_MS);
    this.kvSet("swept_at", String(now));
  }

  private async execute(row: QueueRow): Promise<void> {
    const spec = JSON.parse(row.spec) as QueuedRun;
    const runId = row.run_id;
    const progress: RunProgress = row.checkpoint
      ? (JSON.parse(row.checkpoint) as RunProgress)
      : { startedAt: spec.prestarted?.startedAt ?? Date.now(), loop: emptyCheckpoint() };
    if (!row.checkpoint) {
      this.sql.exec(
        `UPDATE queue SET state = 'running', checkpoint = ? WHERE pos = ?`,
        JSON.stringify(progress),
        row.pos,
      );
    }
    const save = () =>
      this.sql.exec(`UPDATE queue SET checkpoint = ? WHERE pos = ?`, JSON.stringify(progress), row.pos);

    if (!progress.outcome) {
      progress.outcome = await this.runTurn(spec, runId, progress, save);
      // Account the run on the entry in the same synchronous step that records the outcome,
      // so a finalization repeated after a restart never counts tokens twice.
      const entry = this.entry();
      if (entry && entry.sessionId === spec.sessionId) {
        entry.inputTokens += progress.loop.inputTokens;
        entry.outputTokens += progress.loop.outputTokens;
        if (progress.loop.lastCallTokens) entry.totalTokens = progress.loop.lastCallTokens;
        entry.abortedLastRun = progress.outcome.status === "aborted" || progress.outcome.status === "timeout";
        entry.systemSent = true;
        entry.runStatus = this.queueRows().some((r) => r.state === "queued") ? "queued" : "idle";
        this.saveEntry(entry);
      }
      save();
    }
    await this.finalize(row, spec, progress, progress.outcome);
  }

  private async runTurn(
    spec: QueuedRun,
    runId: string,
    progress: RunProgress,
    save: () => void,
  ): Promise<RunOutcome> {
    const { req } = spec;
    const config = this.config;
    const env = this.env;
    const startedAt = progress.startedAt;
    const controller = new AbortController();
    this.current = { runId, controller };
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (req.timeoutSeconds && req.timeoutSeconds > 0) {
      const remaining = startedAt + req.timeoutSeconds * 1000 - Date.now();
      timer = setTimeout(() => controller.abort(new AbortRun("timeout")), Math.max(0, remaining));
    }
    try {
      const entry = this.entry();
      const agent = config.agents.list.find((a) => a.id === req.init.agentId);
      const inputs = inputMessages(runId, req.inputs);
      const hadHistory = spec.prestarted?.hadHistory ?? this.hasHistory(spec.sessionId);
      // One round trip: the run is marked running (created if the enqueue write was lost), the
      // entry shows it, and the inputs are appended. On a resumed run this also re-appends what
      // the checkpoint holds; appends are idempotent by id, so stored messages are skipped.
      // A run whose enqueue batch already did this (and that produced nothing yet) skips it.
      if (!spec.prestarted || progress.loop.produced.length > 0) {
        await writeBatch(env, [
          startRunStatement(env, {
            runId,
            sessionKey: req.sessionKey,
            sessionId: spec.sessionId,
            trigger: req.trigger,
            status: "running",
            createdAt: startedAt,
            startedAt,
            deliver: req.deliver,
            idempotencyKey: req.idempotencyKey ?? null,
          }),
          ...(entry ? [upsertSessionStatement(env, { ...entry, runStatus: "running" })] : []),
          ...appendMessageStatements(env, spec.sessionId, [...inputs, ...progress.loop.produced]),
        ]);
        this.markHistory(spec.sessionId);
      }

      const modelRef = req.model ?? entry?.modelOverride ?? agent?.model ?? config.agents.defaults.model;
      const resolved = resolveModelRef(modelRef, config);
      const model = languageModelFor(resolved, env as unknown as Record<string, unknown>);
      if (entry && (entry.model !== resolved.ref || entry.contextTokens !== resolved.contextWindow)) {
        this.saveEntry({ ...entry, model: resolved.ref, contextTokens: resolved.contextWindow });
      }
      // A transcript this actor never wrote to before this run has nothing older to load.
      const history = hadHistory
        ? await recentMessages(env, spec.sessionId, config.agents.defaults.contextMessages, {
            excludeRunId: runId,
          })
        : [];
      const result: AgentLoopResult = await runAgentLoop({
        runId,
        model,
        modelRef: resolved.ref,
        system: this.systemPrompt(req, agent?.systemPrompt ?? config.agents.defaults.systemPrompt),
        history: [...history, ...inputs],
        tools: toolsForSession(req.sessionKey, agent, config),
        maxSteps: config.agents.defaults.maxSteps,
        keepToolResults: config.agents.defaults.contextPruning.keepToolResults,
        retry: config.models.retry,
        signal: controller.signal,
        checkpoint: progress.loop,
        toolContext: {
          caller: {
            sessionKey: req.sessionKey,
            agentId: req.init.agentId,
            entry: this.entry(),
            runId,
            trigger: req.trigger,
            ...(req.flow ? { flow: { flowId: req.flow.flowId, hop: req.flow.hop } } : {}),
          },
          config,
          env,
          onWait: (targetKey) => {
            this.waitingOn.set(targetKey, (this.waitingOn.get(targetKey) ?? 0) + 1);
            return () => {
              const n = (this.waitingOn.get(targetKey) ?? 1) - 1;
              if (n > 0) this.waitingOn.set(targetKey, n);
              else this.waitingOn.delete(targetKey);
            };
          },
        },
        persist: async (cp, appended) => {
          progress.loop = cp;
          save();
          const final =
            appended.length === 1 && appended[0]?.role === "assistant" && !hasToolCall(appended[0]);
          if (final) return; // stored by the finalize batch, one round trip later
          await writeBatch(env, appendMessageStatements(env, spec.sessionId, appended));
          progress.stored = cp.produced.length;
          save();
        },
      });
      return { runId, status: "ok", startedAt, endedAt: Date.now(), reply: result.reply };
    } catch (error) {
      const endedAt = Date.now();
      if (controller.signal.aborted) {
        const reason = controller.signal.reason;
        const status: RunStatus =
          reason instanceof AbortRun && reason.kind === "timeout" ? "timeout" : "aborted";
        return {
          runId,
          status,
          startedAt,
          endedAt,
          error: status === "timeout" ? `run timed out after ${req.timeoutSeconds}s` : "run aborted",
        };
      }
      if (error instanceof ProviderError || error instanceof ModelRefError) {
        return { runId, status: "error", startedAt, endedAt, error: error.message };
      }
      // Infrastructure failures (D1 unavailable…) propagate: the alarm is retried and the run
      // resumes from its checkpoint instead of being recorded as failed.
      throw error;
    } finally {
      if (timer) clearTimeout(timer);
      this.current = undefined;
    }
  }

  private systemPrompt(req: EnqueueRequest, base: string | undefined): string {
    const lines = [
      base ?? DEFAULT_SYSTEM_PROMPT,
      "",
      "## Session",
      `- session key: ${req.sessionKey}`,
      `- agent: ${req.init.agentId}`,
      `- chat type: ${req.init.chatType}${req.hasThread ? " (thread)" : ""}`,
    ];
    if (req.init.channel) lines.push(`- channel: ${req.init.channel}`);
    lines.push(`- timezone: ${this.config.session.timezone}`);
    const flow = req.flow;
    if (flow) {
      lines.push(
        "",
        "## Agent-to-agent",
        `- requester session: ${flow.requesterKey}`,
        `- target session: ${flow.targetKey}`,
      );
      if (flow.phase === "primary") {
        lines.push("The message below was sent by the requester session; your reply is returned to it.");
      } else if (flow.phase === "reply") {
        lines.push(
          `This is reply-back round ${flow.round} of at most ${flow.maxRounds}. Reply exactly ${REPLY_SKIP} to end the exchange.`,
        );
      } else {
        lines.push(`This is the announce step. Reply exactly ${ANNOUNCE_SKIP} to stay silent.`);
      }
    }
    if (req.spawn) {
      lines.push("", "## Sub-agent", `- spawned by: ${req.spawn.requesterKey}`);
      lines.push(
        req.spawn.phase === "task"
          ? "Complete the task below; your final reply is reported to the session that spawned you."
          : `This is the announce step. Reply exactly ${ANNOUNCE_SKIP} to stay silent.`,
      );
    }
    return lines.join("\n");
  }

  /** What a finished run posts to its chat, if anything. */
  private outbound(
    req: EnqueueRequest,
    outcome: RunOutcome,
  ): { kind: DeliveryKind; text: string } | undefined {
    if (req.flow?.phase === "announce") {
      const text = announceReply(outcome);
      return text ? { kind: "announce", text } : undefined;
    }
    if (!req.deliver || req.flow || req.spawn) return undefined;
    if (outcome.status === "ok") return outcome.reply ? { kind: "reply", text: outcome.reply } : undefined;
    if (outcome.status === "error") return { kind: "notice", text: `⚠️ ${outcome.error ?? "run failed"}` };
    return undefined;
  }

  /** Writes the delivery to D1, then its local retry row; false when send policy blocked it. */
  private async queueDelivery(
    deliveryId: string,
    out: { kind: DeliveryKind; text: string },
    route: DeliveryContext & { replyToMessageId?: string },
    entry: SessionRow | undefined,
    sessionKey: string,
  ): Promise<boolean> {
    const payload = this.outbox.payload(deliveryId, out, route, entry, sessionKey);
    if (!payload) return false;
    await writeBatch(this.env, [insertDeliveryStatement(this.env, deliveryRow(payload))]);
    this.outbox.add(payload);
    await this.scheduleAlarm();
    return true;
  }

  private async finalize(
    row: QueueRow,
    spec: QueuedRun,
    progress: RunProgress,
    outcome: RunOutcome,
  ): Promise<void> {
    const { req } = spec;
    const env = this.env;
    if (!progress.delivery) {
      const entry = this.entry();
      const out = this.outbound(req, outcome);
      const route = req.route ?? (entry?.deliveryContext as DeliveryContext | null) ?? undefined;
      const payload =
        progress.outgoing?.payload ??
        (out && route
          ? this.outbox.payload(`${row.run_id}:${out.kind}`, out, route, entry, req.sessionKey)
          : undefined);
      // The reply goes out before the run is written to D1: the local outbox row makes it
      // durable, the user gets it one round trip sooner, and the `deliveries` row below is
      // written once with the outcome of this first attempt. A restart between the attempt and
      // its checkpoint may repeat the POST (at least once; connectors dedupe by deliveryId).
      if (payload && !progress.outgoing) {
        this.outbox.add(payload);
        const first = (await this.outbox.attemptNow(payload.deliveryId)) ?? null;
        progress.outgoing = { payload, attempt: first };
        this.sql.exec(`UPDATE queue SET checkpoint = ? WHERE pos = ?`, JSON.stringify(progress), row.pos);
      }
      const attempt = progress.outgoing?.attempt ?? undefined;
      // false: blocked by send policy or dead on its only attempt; null: still being retried.
      const delivered =
        out && route && !payload
          ? false
          : attempt
            ? { delivered: true, dead: false, retrying: null }[attempt.status]
            : null;
      // One round trip: the final reply, the delivery and its first attempt, the run's outcome, the entry.
      await writeBatch(env, [
        ...appendMessageStatements(env, spec.sessionId, progress.loop.produced.slice(progress.stored ?? 0)),
        ...(payload ? [insertDeliveryStatement(env, { ...deliveryRow(payload), ...attempt })] : []),
        updateRunStatement(env, row.run_id, {
          status: outcome.status,
          startedAt: outcome.startedAt ?? null,
          endedAt: outcome.endedAt ?? null,
          error: outcome.error ?? null,
          reply: outcome.reply ?? null,
          model: entry?.model ?? null,
          usage: {
            inputTokens: progress.loop.inputTokens,
            outputTokens: progress.loop.outputTokens,
            // SPEC §17: totalTokens is the last model call's prompt + completion (the context size).
            totalTokens: progress.loop.lastCallTokens,
          },
          delivered,
        }),
        ...(entry ? [upsertSessionStatement(env, entry)] : []),
      ]);
      progress.delivery = { delivered };
      this.sql.exec(`UPDATE queue SET checkpoint = ? WHERE pos = ?`, JSON.stringify(progress), row.pos);
    }
    if (!progress.continued) {
      await this.continueFlows(row.run_id, spec, progress, outcome);
      progress.continued = true;
      this.sql.exec(`UPDATE queue SET checkpoint = ? WHERE pos = ?`, JSON.stringify(progress), row.pos);
    }
    // Done: the run leaves the queue in one synchronous step.
    this.sql.exec(`DELETE FROM queue WHERE pos = ?`, row.pos);
    this.sql.exec(
      `INSERT OR REPLACE INTO finished (run_id, outcome, at) VALUES (?, ?, ?)`,
      row.run_id,
      JSON.stringify(outcome),
      Date.now(),
    );
    this.notify(outcome);
    if (req.spawn?.phase === "announce" && req.spawn.cleanup === "delete") {
      // The announcement is recorded in the requester: the child can go.
      await this.remove(req.sessionKey, true);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Flows: sessions_send exchanges and sub-agent announcements

  private async continueFlows(runId: string, spec: QueuedRun, progress: RunProgress, outcome: RunOutcome) {
    const { req } = spec;
    if (req.flow) {
      const next = nextExchangeStep(req.flow, req.sessionKey, outcome);
      if (next) await this.enqueueFlowStep(next, req);
    }
    if (req.spawn?.phase === "task") {
      const lastTool = [...progress.loop.produced].reverse().find((m) => m.role === "toolResult");
      const task: NonNullable<SpawnMeta["task"]> = {
        runId,
        status: outcome.status,
        startedAt: outcome.startedAt ?? progress.startedAt,
        endedAt: outcome.endedAt ?? Date.now(),
        inputTokens: progress.loop.inputTokens,
        outputTokens: progress.loop.outputTokens,
      };
      if (outcome.error) task.error = outcome.error;
      if (outcome.reply) task.reply = outcome.reply;
      if (lastTool) task.lastToolResult = textOf(lastTool);
      const announce: EnqueueRequest = {
        sessionKey: req.sessionKey,
        runId: await stableUuid(`${runId}:announce`),
        trigger: "announce",
        inputs: [
          { text: spawnAnnouncePrompt(task), provenance: { kind: "internal_system" }, timestamp: Date.now() },
        ],
        deliver: false,
        init: req.init,
        userInteraction: false,
        hasThread: false,
        spawn: { ...req.spawn, phase: "announce", task },
      };
      if (req.model) announce.model = req.model;
      const result = await this.enqueue(announce);
      if (!result.ok) throw new Error(`could not queue the announce step: ${result.message}`);
    }
    if (req.spawn?.phase === "announce" && req.spawn.task) {
      const entry = this.entry();
      const text = buildAnnouncement({
        task: req.spawn.task,
        announce: outcome,
        childKey: req.sessionKey,
        childSessionId: spec.sessionId,
        transcriptPath: transcriptPath(spec.sessionId),
      });
      if (text !== undefined) {
        await this.env.SESSION_ACTOR.getByName(req.spawn.requesterKey).postAnnouncement(
          req.spawn.requesterKey,
          {
            id: `${runId}:announcement`,
            text,
            sourceSessionKey: req.sessionKey,
            init: req.spawn.requesterInit,
            ...(req.spawn.requesterRoute ? { route: req.spawn.requesterRoute } : {}),
          },
        );
      }
      if (entry) this.saveEntry({ ...entry, runStatus: "idle" });
    }
  }

  private async enqueueFlowStep(next: NextRun, from: EnqueueRequest): Promise<void> {
    const flow = next.flow;
    const target = next.sessionKey;
    const init =
      target === flow.requesterKey ? flow.requesterInit : target === from.sessionKey ? from.init : undefined;
    const stub = this.env.SESSION_ACTOR.getByName(target);
    const entryInit = init ?? (await stub.getEntry(target).then((e) => (e ? entryInitOf(e) : undefined)));
    if (!entryInit) return; // the other side was deleted meanwhile: the exchange ends here
    const req: EnqueueRequest = {
      sessionKey: target,
      runId: await stableUuid(next.idSeed),
      trigger: next.trigger,
      inputs: [
        {
          text: next.text,
          provenance: {
            kind: "inter_session",
            sourceSessionKey: from.sessionKey,
            sourceTool: "sessions_send",
          },
          timestamp: Date.now(),
        },
      ],
      deliver: next.deliver,
      init: entryInit,
      userInteraction: false,
      hasThread: false,
      flow,
    };
    const result = target === from.sessionKey ? await this.enqueue(req) : await stub.enqueue(req);
    if (!result.ok && result.code !== "RATE_LIMITED")
      throw new Error(`could not continue the exchange: ${result.message}`);
  }

  /**
   * Records a sub-agent announcement in this (requester) session: appended to its current
   * transcript with `subagent_announce` provenance, and posted to its chat route when it has one.
   */
  async postAnnouncement(
    sessionKey: string,
    a: { id: string; text: string; sourceSessionKey: string; route?: DeliveryContext; init: EntryInit },
  ): Promise<{ delivered: boolean }> {
    await this.bind(sessionKey);
    const now = Date.now();
    let entry = this.entry();
    if (!entry) {
      // A requester that never ran (e.g. /tools/invoke on a fresh key) still gets the
      // announcement: an announcement is never lost.
      entry = this.newEntry(sessionKey, a.init, now, crypto.randomUUID());
      entry.expiresAt = this.expiryOf(entry);
      this.saveEntry(entry);
      await writeBatch(this.env, [
        upsertSessionStatement(this.env, entry),
        recordTranscriptStatement(this.env, entry.sessionId, sessionKey, now),
      ]);
    }
    this.markHistory(entry.sessionId);
    this.historyChanged(entry.sessionId);
    await appendMessages(this.env, entry.sessionId, [
      {
        id: a.id,
        role: "user",
        content: [{ type: "text", text: a.text }],
        timestamp: now,
        provenance: {
          kind: "subagent_announce",
          sourceSessionKey: a.sourceSessionKey,
          sourceTool: "sessions_spawn",
        },
      },
    ]);
    const route = (entry.deliveryContext as DeliveryContext | null) ?? a.route;
    let delivered = false;
    if (route) {
      delivered = await this.queueDelivery(
        `${a.id}:announce`,
        { kind: "announce", text: a.text },
        route,
        entry,
        sessionKey,
      );
      await this.scheduleAlarm();
    }
    return { delivered };
  }

  /** `/stop`: aborts the current run, clears waiting runs, aborts sub-agent runs this session spawned. */
  private async stop(req: EnqueueRequest): Promise<EnqueueResult> {
    const entry = this.entry();
    const seen = this.sql
      .exec<{ result: string }>(`SELECT result FROM received WHERE run_id = ?`, req.runId)
      .toArray()[0];
    if (seen)
      return { ...(JSON.parse(seen.result) as Extract<EnqueueResult, { ok: true }>), status: "duplicate" };
    const result = {
      ok: true as const,
      runId: req.runId,
      sessionKey: req.sessionKey,
      sessionId: entry?.sessionId ?? "",
      status: "command" as const,
    };
    this.sql.exec(
      `INSERT INTO received (run_id, result, at) VALUES (?, ?, ?)`,
      req.runId,
      JSON.stringify(result),
      Date.now(),
    );
    const own = await this.abort(req.sessionKey, true);
    const children = await listSessions(this.env, {
      spawnedBy: req.sessionKey,
      archived: "all",
      limit: 200,
    });
    let subRuns = 0;
    await Promise.all(
      children
        .filter((c) => c.runStatus === "queued" || c.runStatus === "running")
        .map(async (c) => {
          const r = await this.env.SESSION_ACTOR.getByName(c.key).abort(c.key, true);
          subRuns += r.aborted;
        }),
    );
    const route = req.route ?? (entry?.deliveryContext as DeliveryContext | null) ?? undefined;
    if (route) {
      const text = `Stopped ${own.aborted} run${own.aborted === 1 ? "" : "s"} in this session and ${subRuns} sub-agent run${
        subRuns === 1 ? "" : "s"
      }.`;
      await this.queueDelivery(`${req.runId}:notice`, { kind: "notice", text }, route, entry, req.sessionKey);
      await this.scheduleAlarm();
    }
    return result;
  }

  private notify(outcome: RunOutcome): void {
    const set = this.waiters.get(outcome.runId);
    this.waiters.delete(outcome.runId);
    for (const resolve of set ?? []) resolve(outcome);
  }
}

function hasToolCall(m: TranscriptMessage): boolean {
  return m.content.some((p) => p.type === "toolCall");
}

class AbortRun extends Error {
  constructor(readonly kind: "aborted" | "timeout") {
    super(kind === "timeout" ? "run timed out" : "run aborted");
  }
}
