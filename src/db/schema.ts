/**
 * The D1 schema (drizzle), the one description of every table, column and index: the session
 * index, transcripts, runs, deliveries, and the deployment's own rows (maintenance, jobs,
 * memory, pairing, placement). Migrations are generated from it; db/columns.ts derives the
 * plain statements' columns from it. Every filter and sort column used by a query is indexed,
 * and every write has a natural unique key so that retries are idempotent.
 */
import { sql } from "drizzle-orm";
import { index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import {
  ContentSchema,
  CountsSchema,
  DeliveryContextSchema,
  json,
  NameListSchema,
  OriginSchema,
  ProvenanceSchema,
  TaskRunSchema,
  TimelineSchema,
  UsageSchema,
} from "./json-columns";

export const sessions = sqliteTable(
  "sessions",
  {
    key: text("key").primaryKey(),
    agentId: text("agent_id").notNull(),
    sessionId: text("session_id").notNull(),
    kind: text("kind").notNull(),
    chatType: text("chat_type"),
    channel: text("channel"),
    displayName: text("display_name"),
    label: text("label"),
    subject: text("subject"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    sessionStartedAt: integer("session_started_at").notNull(),
    lastInteractionAt: integer("last_interaction_at"),
    model: text("model"),
    modelOverride: text("model_override"),
    contextTokens: integer("context_tokens").notNull().default(0),
    inputTokens: integer("input_tokens").notNull().default(0),
    outputTokens: integer("output_tokens").notNull().default(0),
    totalTokens: integer("total_tokens").notNull().default(0),
    /** US dollars the priced model calls of this sessionId cost (SPEC §21); unpriced calls add nothing. */
    costUsd: real("cost_usd").notNull().default(0),
    compactionCount: integer("compaction_count").notNull().default(0),
    thinkingLevel: text("thinking_level"),
    verboseLevel: text("verbose_level"),
    systemSent: integer("system_sent", { mode: "boolean" }).notNull().default(false),
    abortedLastRun: integer("aborted_last_run", { mode: "boolean" }).notNull().default(false),
    sendPolicy: text("send_policy"),
    /** `/queue <mode>` (SPEC §20): this session's queue mode; null follows session.queue.mode. */
    queueMode: text("queue_mode"),
    /** `/usage tokens|full` (SPEC §21): the footer this session's replies get; null: none. */
    usageMode: text("usage_mode"),
    /** The newest version of the session's signal log (SPEC §20), which its actor keeps. */
    stateVersion: integer("state_version").notNull().default(0),
    lastChannel: text("last_channel"),
    lastTo: text("last_to"),
    lastAccountId: text("last_account_id"),
    lastThreadId: text("last_thread_id"),
    deliveryContext: json("delivery_context", DeliveryContextSchema),
    origin: json("origin", OriginSchema),
    spawnedBy: text("spawned_by"),
    archivedAt: integer("archived_at"),
    runStatus: text("run_status").notNull().default("idle"),
    /** When the reset policy makes this session stale; the cron sweep reads it by index. */
    expiresAt: integer("expires_at"),
    /**
     * Set once the session is closed by its reset policy (the instant it went stale): the row
     * still shows the old sessionId, and the next run under this key starts a new one.
     */
    expiredAt: integer("expired_at"),
  },
  (t) => [
    index("sessions_recent").on(t.updatedAt, t.key),
    index("sessions_agent_recent").on(t.agentId, t.updatedAt, t.key),
    index("sessions_kind_recent").on(t.kind, t.updatedAt, t.key),
    // Sub-agent sessions only: a session nobody spawned writes no row here.
    index("sessions_spawned_by").on(t.spawnedBy, t.updatedAt).where(sql`${t.spawnedBy} IS NOT NULL`),
    // The listing's `channel` filter: the chat channel a session was last reached on, else its own.
    index("sessions_channel_recent").on(sql`coalesce(${t.lastChannel}, ${t.channel})`, t.updatedAt, t.key),
    uniqueIndex("sessions_agent_label").on(t.agentId, t.label).where(sql`${t.label} IS NOT NULL`),
    // Live sessions that will go stale, by expiry: the reset sweep's index (SPEC §10, §11).
    index("sessions_due").on(t.expiresAt).where(sql`${t.expiredAt} IS NULL AND ${t.expiresAt} IS NOT NULL`),
    // Sub-agent sessions that may be due for archival (SPEC §6): only live children are indexed.
    index("sessions_subagent_archive")
      .on(t.updatedAt)
      .where(sql`${t.spawnedBy} IS NOT NULL AND ${t.archivedAt} IS NULL`),
    uniqueIndex("sessions_session_id").on(t.sessionId),
  ],
);

/** One row per sessionId ever issued, so old transcripts stay addressable after a reset. */
export const transcripts = sqliteTable(
  "transcripts",
  {
    sessionId: text("session_id").primaryKey(),
    sessionKey: text("session_key").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    index("transcripts_key").on(t.sessionKey, t.createdAt),
    index("transcripts_created").on(t.createdAt),
  ],
);

export const messages = sqliteTable(
  "messages",
  {
    sessionId: text("session_id").notNull(),
    seq: integer("seq").notNull(),
    /** Deterministic per run step (e.g. `<runId>:s2:a`), so a resumed run never appends twice. */
    id: text("id").notNull(),
    role: text("role").notNull(),
    content: json("content", ContentSchema).notNull(),
    toolCallId: text("tool_call_id"),
    toolName: text("tool_name"),
    isError: integer("is_error", { mode: "boolean" }),
    timestamp: integer("timestamp").notNull(),
    runId: text("run_id"),
    model: text("model"),
    usage: json("usage", UsageSchema),
    provenance: json("provenance", ProvenanceSchema),
    /** Compaction entries: summary text lives in content, this is the first seq kept. */
    firstKeptSeq: integer("first_kept_seq"),
  },
  (t) => [
    primaryKey({ columns: [t.sessionId, t.seq] }),
    uniqueIndex("messages_id").on(t.id),
    // Compaction entries only: the latest one of a transcript is found without scanning it.
    index("messages_compactions").on(t.sessionId, t.seq).where(sql`${t.firstKeptSeq} IS NOT NULL`),
  ],
);

export const runs = sqliteTable(
  "runs",
  {
    runId: text("run_id").primaryKey(),
    sessionKey: text("session_key").notNull(),
    sessionId: text("session_id").notNull(),
    trigger: text("trigger").notNull(),
    status: text("status").notNull(),
    createdAt: integer("created_at").notNull(),
    startedAt: integer("started_at"),
    endedAt: integer("ended_at"),
    error: text("error"),
    reply: text("reply"),
    usage: json("usage", UsageSchema),
    model: text("model"),
    deliver: integer("deliver", { mode: "boolean" }).notNull().default(false),
    delivered: integer("delivered", { mode: "boolean" }),
    idempotencyKey: text("idempotency_key"),
    /** Its model and tool spans (SPEC §21), as the agent loop recorded them; runs.get adds the rest. */
    timeline: json("timeline", TimelineSchema),
  },
  (t) => [
    uniqueIndex("runs_idempotency").on(t.idempotencyKey).where(sql`${t.idempotencyKey} IS NOT NULL`),
    index("runs_session").on(t.sessionKey, t.createdAt),
    // Runs not ended yet (the cron's nudge of a lost alarm): an ended run writes no row here; a
    // query by a terminal status reads runs_recent.
    index("runs_active").on(t.status, t.createdAt).where(sql`${t.status} IN ('queued', 'running')`),
    // `runs.list` without filters: newest first, keyset-paged on (createdAt, runId).
    index("runs_recent").on(t.createdAt, t.runId),
  ],
);

export const deliveries = sqliteTable(
  "deliveries",
  {
    deliveryId: text("delivery_id").primaryKey(),
    kind: text("kind").notNull(),
    sessionKey: text("session_key").notNull(),
    runId: text("run_id"),
    channel: text("channel").notNull(),
    accountId: text("account_id").notNull(),
    to: text("to").notNull(),
    threadId: text("thread_id"),
    replyToMessageId: text("reply_to_message_id"),
    text: text("text").notNull(),
    status: text("status").notNull(),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: integer("next_attempt_at"),
    lastError: text("last_error"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    deliveredAt: integer("delivered_at"),
    /** Parts of a split reply the platform accepted (a retry goes on from the next); null: none. */
    partsSent: integer("parts_sent"),
  },
  (t) => [
    index("deliveries_recent").on(t.createdAt, t.deliveryId),
    // Deliveries in any state but delivered (most are): a query by such a status repeats the
    // condition (db/runs.ts); delivered ones are listed from deliveries_recent.
    index("deliveries_status_recent")
      .on(t.status, t.createdAt, t.deliveryId)
      .where(sql`${t.status} != 'delivered'`),
    index("deliveries_session_recent").on(t.sessionKey, t.createdAt, t.deliveryId),
    // Deliveries still owed (the cron's backstop for lost alarms).
    index("deliveries_due").on(t.status, t.nextAttemptAt).where(sql`${t.status} IN ('pending', 'retrying')`),
  ],
);

/**
 * What the scheduled maintenance did last (one row per task: reset sweep, archival, retention,
 * scheduled jobs), so an operator sees it in the `status` RPC.
 */
export const maintenance = sqliteTable("maintenance", {
  task: text("task").primaryKey(),
  lastRunAt: integer("last_run_at").notNull(),
  /** The last invocation: when, how long, its counts (or its error). */
  lastRun: json("last_run", TaskRunSchema).notNull(),
  /** The last invocation that changed something, kept while later ones find nothing to do. */
  lastWork: json("last_work", TaskRunSchema),
});

/**
 * Scheduled-job claims: one row per job and scheduled minute, inserted before the job runs, so
 * a minute runs at most once however many trigger invocations see it.
 */
export const jobRuns = sqliteTable(
  "job_runs",
  {
    jobId: text("job_id").notNull(),
    /** The scheduled minute (epoch ms) this run is for. */
    scheduledFor: integer("scheduled_for").notNull(),
    runId: text("run_id").notNull(),
    sessionKey: text("session_key").notNull(),
    claimedAt: integer("claimed_at").notNull(),
    /** Set when the run makes up a minute missed while the gateway was down. */
    late: integer("late", { mode: "boolean" }).notNull().default(false),
    /** When its run was accepted by the session; a claim without it is retried by the next trigger. */
    queuedAt: integer("queued_at"),
    /** Why the run was not queued (e.g. the session's queue was full); null when it was. */
    skipped: text("skipped"),
  },
  (t) => [primaryKey({ columns: [t.jobId, t.scheduledFor] }), index("job_runs_claimed").on(t.claimedAt)],
);

/**
 * Agent memory (SPEC §5): durable notes an agent keeps across its sessions with `memory_write`
 * and reads with `memory_read`. Scoped per agent; a note has an optional key, unique per agent,
 * that `memory_write` replaces in place.
 */
export const memories = sqliteTable(
  "memories",
  {
    /** UUID. */
    id: text("id").primaryKey(),
    agentId: text("agent_id").notNull(),
    key: text("key"),
    text: text("text").notNull(),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    /** The session that last wrote the note. */
    sessionKey: text("session_key"),
  },
  (t) => [
    // Keyed notes are unique per agent; unkeyed notes are not indexed here.
    uniqueIndex("memories_agent_key").on(t.agentId, t.key).where(sql`${t.key} IS NOT NULL`),
    // memory_read: an agent's notes, newest first; also counts an agent's notes for the cap.
    index("memories_agent_recent").on(t.agentId, t.updatedAt),
  ],
);

/**
 * Which session a run id names (see keys/run-id.ts): a run id's first 18 characters are its
 * session key's prefix, registered when the key's actor first binds, so a run not recorded yet
 * (a connector's message is recorded behind its ack) is found through its session's actor.
 */
export const runPrefixes = sqliteTable(
  "run_prefixes",
  {
    prefix: text("prefix").notNull(),
    sessionKey: text("session_key").notNull(),
  },
  (t) => [primaryKey({ columns: [t.prefix, t.sessionKey] })],
);

/** What a usage rollup row adds up (SPEC §21): the runs, their model calls, tokens and cost. */
function usageSums() {
  return {
    runs: integer("runs").notNull().default(0),
    modelCalls: integer("model_calls").notNull().default(0),
    inputTokens: integer("input_tokens").notNull().default(0),
    outputTokens: integer("output_tokens").notNull().default(0),
    cacheReadTokens: integer("cache_read_tokens").notNull().default(0),
    cacheWriteTokens: integer("cache_write_tokens").notNull().default(0),
    costUsd: real("cost_usd").notNull().default(0),
    unpricedCalls: integer("unpriced_calls").notNull().default(0),
  };
}

/**
 * Usage and cost per day, session and model (SPEC §21 `usage.summary`): a rollup each run's
 * finalize adds to in the same batch as the run's row (db/usage.ts), so a summary reads these
 * rows, never every run. The day is the run's end in `session.timezone`. Written in the
 * session's database; summaries read every database and add up.
 */
export const usageDaily = sqliteTable(
  "usage_daily",
  {
    day: text("day").notNull(),
    sessionKey: text("session_key").notNull(),
    /** The model the run used ('' when none). */
    model: text("model").notNull(),
    agentId: text("agent_id").notNull(),
    channel: text("channel"),
    ...usageSums(),
  },
  // Keyed by day first: a summary reads a range of days (its filters apply within it). WITHOUT
  // ROWID in the migration: a day's first run of a session writes one row, no index row.
  (t) => [primaryKey({ columns: [t.day, t.sessionKey, t.model] })],
);

/**
 * The same usage per day, agent, model and channel, without the session (SPEC §21): what a
 * summary by day, agent, model or channel and a budget's agent spend read, a few rows a day
 * however many sessions there are. Written beside `usage_daily` in the run's finalize batch.
 */
export const usageAgents = sqliteTable(
  "usage_agents",
  {
    day: text("day").notNull(),
    agentId: text("agent_id").notNull(),
    /** The model the run used ('' when none). */
    model: text("model").notNull(),
    /** The session's channel ('' when none). */
    channel: text("channel").notNull(),
    ...usageSums(),
  },
  (t) => [primaryKey({ columns: [t.day, t.agentId, t.model, t.channel] })],
);

/**
 * Records a session's actor could not write: a deferred record (a connector's message, its
 * run and entry) that D1 refused on its own again and again. Kept whole, with the cause, for the
 * operator (`records.dead`), instead of being retried forever.
 */
export const deadRecords = sqliteTable(
  "dead_records",
  {
    /** The run id the record was for. */
    runId: text("run_id").primaryKey(),
    sessionKey: text("session_key").notNull(),
    /** D1's last answer. */
    error: text("error").notNull(),
    attempts: integer("attempts").notNull(),
    /** The record as the actor held it (JSON). */
    body: text("body").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("dead_records_recent").on(t.createdAt, t.runId)],
);

/**
 * Pairing codes handed to senders a connector does not know yet (SPEC §18 "Access"): one
 * pending code per sender, at most 3 pending per connector, each valid for an hour until an
 * operator approves it (`pairing.approve`).
 */
export const pairingCodes = sqliteTable(
  "pairing_codes",
  {
    channel: text("channel").notNull(),
    code: text("code").notNull(),
    accountId: text("account_id").notNull(),
    peerId: text("peer_id").notNull(),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.channel, t.code] }),
    uniqueIndex("pairing_codes_peer").on(t.channel, t.peerId),
    index("pairing_codes_expiry").on(t.channel, t.expiresAt),
  ],
);

/** Senders an operator approved on a connector (by pairing code), until revoked. */
export const pairedSenders = sqliteTable(
  "paired_senders",
  {
    channel: text("channel").notNull(),
    peerId: text("peer_id").notNull(),
    approvedAt: integer("approved_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.channel, t.peerId] })],
);

/** Messages a connector's access rules refused, counted per channel and reason (`status`). */
export const accessRefusals = sqliteTable(
  "access_refusals",
  {
    channel: text("channel").notNull(),
    reason: text("reason").notNull(),
    count: integer("count").notNull(),
    lastAt: integer("last_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.channel, t.reason] })],
);

/**
 * The list of D1 bindings (`storage.d1`, SPEC §19) a database's rows were placed with, kept in
 * each database (one row): a start with another list is refused until `switchboard storage
 * rebalance` moved the sessions (db/placement-check.ts), and the rebalance's progress (the
 * list it moves to, and the row counts it started from, which its verify step compares).
 */
export const storagePlacement = sqliteTable("storage_placement", {
  id: integer("id").primaryKey(),
  databases: json("databases", NameListSchema).notNull(),
  /** While a rebalance runs (in the home database): the list it moves to. */
  movingTo: json("moving_to", NameListSchema),
  /** The row counts, per table, over all databases when the rebalance began. */
  counts: json("counts", CountsSchema),
  updatedAt: integer("updated_at").notNull(),
});
