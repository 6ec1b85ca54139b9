/**
 * A session entry's lifecycle, as pure functions of the entry and the clock: a new entry, a
 * reset (new sessionId, settings kept, counters zeroed), the route and origin an inbound message
 * records, and when the entry's reset policy makes it stale. The SessionActor decides when these
 * apply; this module only says what they produce.
 */
import type { Config } from "../../config/schema";
import type { DeliveryContext, Origin } from "../../db/json-columns";
import type { DueSession } from "../../db/maintenance";
import type { SessionRow } from "../../db/queries";
import { chatTypeOfKey, isSubagentKey } from "../../keys/session-key";
import { sessionChannel } from "../../policy/send-policy";
import type { EnqueueRequest, EntryInit } from "../../runs/types";
import { evaluateFreshness, type ResetPolicy, resolveResetPolicy, sessionExpiry } from "./freshness";

/** A session entry as it is first created: the init's fields, counters zero, nothing else set. */
export function newSessionRow(
  sessionKey: string,
  init: EntryInit,
  now: number,
  sessionId: string,
): SessionRow {
  return {
    key: sessionKey,
    agentId: init.agentId,
    sessionId,
    kind: init.kind,
    chatType: init.chatType,
    channel: init.channel,
    displayName: init.displayName ?? null,
    label: init.label ?? null,
    subject: init.subject ?? null,
    createdAt: now,
    updatedAt: now,
    sessionStartedAt: now,
    lastInteractionAt: null,
    model: null,
    modelOverride: null,
    contextTokens: 0,
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    costUsd: 0,
    compactionCount: 0,
    thinkingLevel: null,
    verboseLevel: null,
    systemSent: false,
    abortedLastRun: false,
    sendPolicy: null,
    queueMode: null,
    usageMode: null,
    stateVersion: 0,
    lastChannel: null,
    lastTo: null,
    lastAccountId: null,
    lastThreadId: null,
    deliveryContext: null,
    origin: null,
    spawnedBy: init.spawnedBy ?? null,
    archivedAt: null,
    runStatus: "idle",
    expiresAt: null,
    expiredAt: null,
  };
}

/** A new sessionId under the same key (SPEC §10): settings, origin and route are kept, counters zeroed. */
export function resetEntry(
  entry: SessionRow,
  now: number,
  sessionId: string = crypto.randomUUID(),
): SessionRow {
  return {
    ...entry,
    sessionId,
    sessionStartedAt: now,
    updatedAt: now,
    lastInteractionAt: null,
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    costUsd: 0,
    compactionCount: 0,
    systemSent: false,
    abortedLastRun: false,
    expiredAt: null,
  };
}

/** What an entry's expiry depends on: what the reset sweep reads of a due session. */
export type ExpiryFields = Omit<DueSession, "expiresAt">;

/** The reset policy of the entry, or undefined for kinds that time never resets. */
function policyOf(entry: ExpiryFields, config: Config, inThread: boolean): ResetPolicy | undefined {
  // Cron, hook and sub-agent sessions are not reset by time (isolated jobs get a new sessionId per run).
  if (entry.kind === "cron" || entry.kind === "hook" || isSubagentKey(entry.key)) return undefined;
  const { chatType, thread } = chatTypeOfKey(entry.key, inThread);
  return resolveResetPolicy(config.session, sessionChannel(entry), chatType, thread);
}

/** When the entry's reset policy makes it stale (SPEC §10), or null when it never does. */
export function entryExpiry(
  entry: ExpiryFields,
  config: Config,
  /** The message at hand is in a thread (the key may not say so); default: the last route's. */
  inThread = !!entry.lastThreadId,
): number | null {
  const policy = policyOf(entry, config, inThread);
  return policy ? (sessionExpiry(entry, policy, config.session.timezone) ?? null) : null;
}

/**
 * Whether the session is stale at `now` under the current config: its next run starts a new
 * sessionId, whatever triggered the run (SPEC §10; only user messages refresh idle freshness).
 */
export function isStale(
  entry: ExpiryFields,
  config: Config,
  now: number,
  inThread = !!entry.lastThreadId,
): boolean {
  const policy = policyOf(entry, config, inThread);
  return !!policy && !evaluateFreshness(entry, policy, config.session.timezone, now).fresh;
}

/**
 * When a session was closed by its reset policy: the moment it went stale, once that moment has
 * passed. Derived from the entry alone, so the reset sweep and the session's actor always write
 * the same value and neither undoes the other.
 */
export function closedAt(entry: Pick<SessionRow, "expiresAt">, now: number): number | null {
  return entry.expiresAt !== null && entry.expiresAt <= now ? entry.expiresAt : null;
}

/** The route, origin and descriptive fields a request records on the entry (best effort, additive). */
export function applyRoute(entry: SessionRow, req: EnqueueRequest): SessionRow {
  const next = { ...entry };
  if (req.route) {
    const ctx: DeliveryContext = {
      channel: req.route.channel,
      to: req.route.to,
      accountId: req.route.accountId,
    };
    if (req.route.threadId) ctx.threadId = req.route.threadId;
    if (req.route.postTo) ctx.postTo = req.route.postTo;
    next.deliveryContext = ctx;
    next.lastChannel = req.route.channel;
    next.lastTo = req.route.to;
    next.lastAccountId = req.route.accountId;
    next.lastThreadId = req.route.threadId ?? null;
  }
  if (req.origin) {
    // Best effort and additive: a connector that only refreshes routing never wipes labels.
    const merged: Origin = { ...(entry.origin ?? {}) };
    for (const [k, v] of Object.entries(req.origin))
      if (v !== undefined && v !== "") merged[k as keyof Origin] = v;
    next.origin = merged;
  }
  if (req.init.displayName) next.displayName = req.init.displayName;
  if (req.init.subject) next.subject = req.init.subject;
  return next;
}
