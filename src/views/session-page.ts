/**
 * One page of the session index for a listing (SPEC §6 `sessions_list`, §17 `sessions.list`):
 * the union of index-bound scopes with the same filters and keyset cursor, merged newest
 * `updatedAt` first, each row shaped by `listRow` (with `messageLimit`, the rows' newest messages,
 * read for the whole page with one query). The operator RPC lists one unrestricted scope with
 * canonical keys; the tool lists the caller's visibility scopes with the `main` alias.
 */

import { recentMessagesOf } from "../db/messages";
import {
  LISTED_COLUMNS,
  type ListedSession,
  listSessionsBatch,
  newestFirst,
  type SessionListFilter,
} from "../db/queries";
import { normalizeAgentId } from "../keys/session-key";
import type { VisibilityScope } from "../policy/visibility";
import type { TranscriptMessage } from "../transcript/message";
import { encodeCursor, listRow } from "./session";

/** Integer in [min, max] (fractions truncated); `fallback` when absent. Limits are clamped, not refused (SPEC §17). */
export function clampInt(n: number | undefined, min: number, max: number, fallback: number): number {
  if (n === undefined || Number.isNaN(n)) return fallback;
  return Math.min(max, Math.max(min, Math.trunc(n)));
}

export const SESSION_KINDS = ["main", "group", "cron", "hook", "node", "other"] as const;

export interface SessionPageQuery {
  kinds?: string[];
  agentId?: string;
  label?: string;
  channel?: string;
  activeMinutes?: number;
  archived: boolean | "all";
  cursor?: { updatedAt: number; key: string };
  excludeKeys: string[];
  /** Already clamped. */
  limit: number;
  /** Already clamped; 0 = no messages. */
  messageLimit: number;
}

/** The `sessions_list` params (SPEC §6) as a caller gives them; the RPC takes the same. */
export interface ListParams {
  kinds?: string[];
  limit?: number;
  activeMinutes?: number;
  messageLimit?: number;
  agentId?: string;
  label?: string;
  channel?: string;
  archived?: boolean | "all";
}

/** The page query for listing params: the agent id normalized, limits clamped (SPEC §17). */
export function pageQuery(
  p: ListParams,
  cursor: SessionPageQuery["cursor"],
  excludeKeys: string[],
): SessionPageQuery {
  return {
    kinds: p.kinds,
    agentId: p.agentId ? normalizeAgentId(p.agentId) : undefined,
    label: p.label,
    channel: p.channel,
    activeMinutes: p.activeMinutes,
    archived: p.archived ?? false,
    cursor,
    excludeKeys,
    limit: clampInt(p.limit, 1, 200, 50),
    messageLimit: clampInt(p.messageLimit, 0, 20, 0),
  };
}

export interface SessionPageOptions {
  /** The key a row is shown with. */
  displayKey(row: ListedSession): string;
  /** Extra fields rewritten on the row view (e.g. `spawnedBy` in display form). */
  spawnedBy?(key: string): string;
}

/**
 * One page of the union of `scopes` (each an index-bound query with the same filters and cursor,
 * merged and deduplicated by key), newest `updatedAt` first; `nextCursor` when more rows follow.
 */
export async function listSessionPage(
  env: Env,
  scopes: VisibilityScope[],
  q: SessionPageQuery,
  opts: SessionPageOptions,
) {
  const now = Date.now();
  const base: SessionListFilter = {
    kinds: q.kinds,
    agentId: q.agentId,
    label: q.label,
    channel: q.channel,
    activeSince: q.activeMinutes ? now - q.activeMinutes * 60_000 : undefined,
    archived: q.archived,
    excludeKeys: q.excludeKeys,
    limit: q.limit + 1,
    cursor: q.cursor,
  };
  // A scope for another agent than the one asked for selects nothing: skip its query.
  // All of them in one D1 round trip.
  const results = await listSessionsBatch(
    env,
    scopes
      .filter((s) => !(s.agentId && q.agentId && s.agentId !== q.agentId))
      .map((s) => ({ ...base, ...s })),
    LISTED_COLUMNS,
  );
  const seen = new Set<string>();
  // One scope is already in index order; several are merged in the same order.
  const rows =
    results.length === 1
      ? (results[0] ?? [])
      : results
          .flat()
          .filter((r) => !seen.has(r.key) && seen.add(r.key))
          .sort(newestFirst)
          .slice(0, q.limit + 1);
  const page = rows.slice(0, q.limit);
  // Every row's messages in one round trip, not one query per row (up to 200 of them).
  const messages: Map<string, TranscriptMessage[]> | undefined =
    q.messageLimit > 0
      ? await recentMessagesOf(
          env,
          page.map((row) => row.sessionId),
          q.messageLimit,
          { excludeToolResults: true },
        )
      : undefined;
  const sessions = page.map((row) => {
    const view = listRow(row, opts.displayKey(row), now, messages && (messages.get(row.sessionId) ?? []));
    if (opts.spawnedBy && view.spawnedBy) view.spawnedBy = opts.spawnedBy(view.spawnedBy);
    return view;
  });
  const last = page[page.length - 1];
  return {
    count: sessions.length,
    sessions,
    ...(rows.length > q.limit && last ? { nextCursor: encodeCursor(last.updatedAt, last.key) } : {}),
  };
}
