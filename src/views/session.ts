/**
 * JSON views of session entries (SPEC §3 entry, SPEC §6 list row). The gateway owns all
 * derived fields (kind, channel, transcriptPath), so clients never reconstruct them.
 */
import type { ListedSession, SessionRow } from "../db/queries";
import type { TranscriptMessage } from "../transcript/message";

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

/** The full entry (SPEC §3 field names). */
export function entryView(row: SessionRow) {
  return compact({ ...row, transcriptPath: transcriptPath(row.sessionId) });
}

/** `channel` per SPEC §6: groups their channel, direct chats lastChannel, internal kinds `internal`. */
export function listChannel(row: Pick<SessionRow, "kind" | "key" | "channel" | "lastChannel">): string {
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
export function expiredAtOf(row: Pick<SessionRow, "expiredAt" | "expiresAt">, now: number): number | null {
  if (row.expiredAt !== null) return row.expiredAt;
  return row.expiresAt !== null && row.expiresAt <= now ? row.expiresAt : null;
}

/**
 * A listing row (SPEC §6): every documented field, `null` when unset, so a client reads one
 * shape; then what the index adds (archived, expiry) when it says something, and the messages
 * when they were asked for.
 */
export function listRow(row: ListedSession, displayKey: string, now: number, messages?: TranscriptMessage[]) {
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
