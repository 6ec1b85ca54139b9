/**
 * A session entry's lifecycle, as pure functions of the entry and the clock: a new entry, a
 * reset (new sessionId, settings kept, counters zeroed), the route and origin an inbound message
 * records, and when the entry's reset policy makes it stale. The SessionActor decides when these
 * apply; this module only says what they produce.
 */
import type { Config } from "../config/schema";
import type { DeliveryContext, Origin, SessionRow } from "../db/queries";
import { chatTypeOfKey, isSubagentKey } from "../keys/session-key";
import type { EnqueueRequest, EntryInit } from "../runs/types";
import { resolveResetPolicy, sessionExpiry } from "./freshness";

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
    compactionCount: 0,
    thinkingLevel: null,
    verboseLevel: null,
    systemSent: false,
    abortedLastRun: false,
    sendPolicy: null,
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
    compactionCount: 0,
    systemSent: false,
    abortedLastRun: false,
  };
}

/**
 * When the entry's reset policy makes it stale (SPEC §10), or null when it never does: cron,
 * hook and sub-agent sessions are not reset by time (isolated jobs get a new sessionId per run).
 */
export function entryExpiry(
  entry: Pick<
    SessionRow,
    "key" | "kind" | "channel" | "lastThreadId" | "sessionStartedAt" | "lastInteractionAt"
  >,
  config: Config,
): number | null {
  if (entry.kind === "cron" || entry.kind === "hook" || isSubagentKey(entry.key)) return null;
  const { chatType, thread } = chatTypeOfKey(entry.key, !!entry.lastThreadId);
  const policy = resolveResetPolicy(config.session, entry.channel, chatType, thread);
  return sessionExpiry(entry, policy, config.session.timezone) ?? null;
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
