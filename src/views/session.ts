/**
 * JSON views of session entries (SPEC §3 entry, SPEC §6 list row). The gateway owns all
 * derived fields (kind, channel, transcriptPath), so clients never reconstruct them. Pure:
 * callers read the entries and pass them in; the views name the fields they show
 * (`SessionEntry`), which an index row has as it is.
 */
import type { TranscriptMessage } from "../transcript/message";

/**
 * A session entry as the views read it (SPEC §3 field names), typed as the index stores it, so
 * an index row is one. The views use these fields and no others.
 */
export interface SessionEntry {
  key: string;
  agentId: string;
  sessionId: string;
  kind: string;
  chatType: string | null;
  channel: string | null;
  displayName: string | null;
  label: string | null;
  updatedAt: number;
  sessionStartedAt: number;
  model: string | null;
  modelOverride: string | null;
  contextTokens: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  /** US dollars the priced model calls of this sessionId cost (SPEC §21). */
  costUsd: number;
  compactionCount: number;
  thinkingLevel: string | null;
  verboseLevel: string | null;
  systemSent: boolean;
  abortedLastRun: boolean;
  sendPolicy: string | null;
  lastChannel: string | null;
  lastTo: string | null;
  lastThreadId: string | null;
  deliveryContext: unknown;
  spawnedBy: string | null;
  archivedAt: number | null;
  runStatus: string;
  expiresAt: number | null;
  expiredAt: number | null;
  /** The newest version of the session's signal log (SPEC §20); 0 when none. */
  stateVersion: number;
}

/** What a listing row shows of an entry (SPEC §6): the columns a listing page reads. */
export type ListedEntry = Pick<
  SessionEntry,
  | "key"
  | "agentId"
  | "sessionId"
  | "kind"
  | "channel"
  | "displayName"
  | "label"
  | "updatedAt"
  | "model"
  | "contextTokens"
  | "totalTokens"
  | "costUsd"
  | "thinkingLevel"
  | "verboseLevel"
  | "systemSent"
  | "abortedLastRun"
  | "sendPolicy"
  | "lastChannel"
  | "lastTo"
  | "deliveryContext"
  | "spawnedBy"
  | "archivedAt"
  | "runStatus"
  | "expiresAt"
  | "expiredAt"
  | "stateVersion"
>;

export function transcriptPath(sessionId: string): string {
  return `/v1/transcripts/${sessionId}.jsonl`;
}

/**
 * `o` without its null and undefined fields. A new object rather than `delete`s, which would
 * turn each row into a slow dictionary-mode object (for the JSON answer too).
 */
function compact<T extends Record<string, unknown>>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const k in o) {
    const v = o[k];
    if (v !== null && v !== undefined) out[k] = v;
  }
  return out as T;
}

/** The full entry (SPEC §3 field names): every field of the row, unset ones left out. */
export function entryView<R extends Pick<SessionEntry, "sessionId">>(row: R) {
  return compact({ ...row, transcriptPath: transcriptPath(row.sessionId) });
}

/** `channel` per SPEC §6: groups their channel, direct chats lastChannel, internal kinds `internal`. */
export function listChannel(row: Pick<SessionEntry, "kind" | "key" | "channel" | "lastChannel">): string {
  if (row.kind === "cron" || row.kind === "hook" || row.kind === "node") return "internal";
  if (row.key.includes(":subagent:")) return "unknown";
  if (row.kind === "group") return row.channel ?? "unknown";
  return row.lastChannel ?? row.channel ?? "unknown";
}

/**
 * When the session was closed by its reset policy, or null while it is current. The reset sweep
 * records it within a minute; until then the expiry itself says so, so a list never shows a
 * stale session as current.
 */
export function expiredAtOf(row: Pick<SessionEntry, "expiredAt" | "expiresAt">, now: number): number | null {
  if (row.expiredAt !== null) return row.expiredAt;
  return row.expiresAt !== null && row.expiresAt <= now ? row.expiresAt : null;
}

/**
 * A listing row (SPEC §6): every documented field, `null` when unset, so a client reads one
 * shape; then what the index adds (archived, expiry) when it says something, and the messages
 * when they were asked for.
 */
export function listRow(row: ListedEntry, displayKey: string, now: number, messages?: TranscriptMessage[]) {
  const expiredAt = expiredAtOf(row, now);
  return {
    key: displayKey,
    kind: row.kind,
    channel: listChannel(row),
    displayName: row.displayName,
    label: row.label,
    updatedAt: row.updatedAt,
    sessionId: row.sessionId,
    agentId: row.agentId,
    model: row.model,
    contextTokens: row.contextTokens,
    totalTokens: row.totalTokens,
    costUsd: row.costUsd,
    thinkingLevel: row.thinkingLevel,
    verboseLevel: row.verboseLevel,
    systemSent: row.systemSent,
    abortedLastRun: row.abortedLastRun,
    sendPolicy: row.sendPolicy,
    lastChannel: row.lastChannel,
    lastTo: row.lastTo,
    deliveryContext: row.deliveryContext,
    spawnedBy: row.spawnedBy,
    runStatus: row.runStatus,
    stateVersion: row.stateVersion ?? 0,
    transcriptPath: transcriptPath(row.sessionId),
    ...compact({
      archivedAt: row.archivedAt,
      // Closed sessions keep their last sessionId (its transcript stays readable); the next
      // message under the key starts a new one.
      expired: expiredAt !== null,
      expiredAt,
      expiresAt: expiredAt === null ? row.expiresAt : null,
      messages,
    }),
  };
}

/** Opaque keyset cursor over (updatedAt, key). */
export function encodeCursor(updatedAt: number, key: string): string {
  return btoa(JSON.stringify([updatedAt, key])).replace(/=+$/, "");
}

export function decodeCursor(cursor: string): { updatedAt: number; key: string } | undefined {
  try {
    const [updatedAt, key] = JSON.parse(atob(cursor)) as [unknown, unknown];
    if (typeof updatedAt === "number" && typeof key === "string") return { updatedAt, key };
  } catch {
    // fall through
  }
  return undefined;
}
