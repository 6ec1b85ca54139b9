/**
 * The reads of one page of a session listing (SPEC §6 `sessions_list`, §17 `sessions.list`):
 * the union of index-bound scopes with the same filters and keyset cursor, in one D1 round
 * trip per database, merged newest `updatedAt` first; and, when asked for, the page's newest messages, for
 * the whole page with one more query. The rows are shaped by views/session-page.ts.
 */
import type { TranscriptMessage } from "../transcript/message";
import { recentMessagesOf } from "./messages";
import {
  LISTED_COLUMNS,
  type ListedSession,
  listSessionsBatch,
  newestFirst,
  type SessionListFilter,
} from "./queries";

/**
 * One index-bound slice of the session index (policy/visibility.ts's scopes: by keys, by
 * `spawnedBy`, by agent); `{}` is the whole index.
 */
export type ListingScope = Pick<SessionListFilter, "keys" | "spawnedBy" | "agentId">;

export interface ListingPage {
  /** At most `limit` rows, newest first. */
  rows: ListedSession[];
  /** Whether more rows follow the last one. */
  more: boolean;
  /** The rows' newest messages (tool results left out) by sessionId, when they were asked for. */
  messages?: Map<string, TranscriptMessage[]>;
}

/**
 * One page (`filter.limit` rows) of the union of `scopes`, each an index-bound query with the
 * same filter and cursor, merged and deduplicated by key, newest `updatedAt` first; with
 * `messageLimit` > 0, each row's newest messages too.
 */
export async function readSessionPage(
  env: Env,
  scopes: ListingScope[],
  filter: SessionListFilter,
  messageLimit: number,
): Promise<ListingPage> {
  // One row more than the page tells whether more follow.
  const base: SessionListFilter = { ...filter, limit: filter.limit + 1 };
  // A scope for another agent than the one asked for selects nothing: skip its query.
  // All of them in one D1 round trip per database.
  const results = await listSessionsBatch(
    env,
    scopes
      .filter((s) => !(s.agentId && filter.agentId && s.agentId !== filter.agentId))
      .map((s) => ({ ...base, ...s })),
    LISTED_COLUMNS,
  );
  const seen = new Set<string>();
  // One scope is already in index order; several are merged in the same order.
  const merged =
    results.length === 1
      ? (results[0] ?? [])
      : results
          .flat()
          .filter((r) => !seen.has(r.key) && seen.add(r.key))
          .sort(newestFirst)
          .slice(0, base.limit);
  const rows = merged.slice(0, filter.limit);
  // Every row's messages in one round trip, not one query per row (up to 200 of them).
  const messages =
    messageLimit > 0
      ? await recentMessagesOf(env, rows, messageLimit, { excludeToolResults: true })
      : undefined;
  return { rows, more: merged.length > filter.limit, ...(messages ? { messages } : {}) };
}
