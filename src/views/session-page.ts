/**
 * One page of the session index for a listing (SPEC §6 `sessions_list`, §17 `sessions.list`):
 * the listing params as a page query (agent id normalized, limits clamped), and the page's rows
 * shaped by `listRow` (with `messageLimit`, each with its newest messages) under a keyset
 * cursor. Pure: the caller reads the rows (db/session-page.ts: the union of index-bound scopes,
 * merged newest `updatedAt` first, and the rows' messages) and passes them in. The operator RPC
 * lists one unrestricted scope with canonical keys; the tool lists the caller's visibility
 * scopes with the `main` alias.
 */

import { normalizeAgentId } from "../keys/ids";
import type { TranscriptMessage } from "../transcript/message";
import { encodeCursor, type ListedEntry, listRow } from "./session";

/** Integer in [min, max] (fractions truncated); `fallback` when absent. Limits are clamped, not refused (SPEC §17). */
export function clampInt(n: number | undefined, min: number, max: number, fallback: number): number {
  if (n === undefined || Number.isNaN(n)) return fallback;
  return Math.min(max, Math.max(min, Math.trunc(n)));
}

export const SESSION_KINDS = ["main", "group", "cron", "hook", "node", "other"] as const;

/** One page of a listing: its filters and keyset cursor, and how many messages each row brings. */
export interface SessionPageQuery {
  kinds?: string[];
  agentId?: string;
  label?: string;
  channel?: string;
  /** Only sessions updated after this instant. */
  activeSince?: number;
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

/**
 * The page query for listing params: the agent id normalized, limits clamped (SPEC §17), and
 * `activeMinutes` counted back from `now`.
 */
export function pageQuery(
  p: ListParams,
  cursor: SessionPageQuery["cursor"],
  excludeKeys: string[],
  now: number,
): SessionPageQuery {
  return {
    kinds: p.kinds,
    agentId: p.agentId ? normalizeAgentId(p.agentId) : undefined,
    label: p.label,
    channel: p.channel,
    activeSince: p.activeMinutes ? now - p.activeMinutes * 60_000 : undefined,
    archived: p.archived ?? false,
    cursor,
    excludeKeys,
    limit: clampInt(p.limit, 1, 200, 50),
    messageLimit: clampInt(p.messageLimit, 0, 20, 0),
  };
}

export interface SessionPageOptions {
  /** The key a row is shown with. */
  displayKey(row: ListedEntry): string;
  /** Extra fields rewritten on the row view (e.g. `spawnedBy` in display form). */
  spawnedBy?(key: string): string;
}

/** The rows of one page as read: at most the page's limit, newest first. */
export interface SessionPageRows {
  rows: ListedEntry[];
  /** Whether more rows follow the last one. */
  more: boolean;
  /** The rows' messages by sessionId, when they were asked for (a row without any has none). */
  messages?: ReadonlyMap<string, TranscriptMessage[]>;
}

/** The page as listed: its rows shaped at `now`, and `nextCursor` when more rows follow. */
export function sessionPage(page: SessionPageRows, now: number, opts: SessionPageOptions) {
  const { rows, messages } = page;
  const sessions = rows.map((row) => {
    const view = listRow(row, opts.displayKey(row), now, messages && (messages.get(row.sessionId) ?? []));
    if (opts.spawnedBy && view.spawnedBy) view.spawnedBy = opts.spawnedBy(view.spawnedBy);
    return view;
  });
  const last = rows[rows.length - 1];
  return {
    count: sessions.length,
    sessions,
    ...(page.more && last ? { nextCursor: encodeCursor(last.updatedAt, last.key) } : {}),
  };
}
