/**
 * Transcript search's pages (SPEC §20 `sessions_search`, RPC `sessions.search`): the params,
 * the cursor, and `searchSessions`, which makes the query an FTS5 match (transcript/search.ts),
 * asks the injected reader (db/search.ts `searchMessages`: visibility is inside its statement,
 * so a page is never short because of hidden rows) and shapes the hits: each excerpt redacted
 * before its words are marked, the whole result at most 20 KB. No I/O of its own.
 */
import { z } from "zod";
import { normalizeAgentId } from "../keys/ids";
import type { ContentPart } from "../transcript/message";
import { redactSecrets } from "../transcript/redaction";
import { excerptOf, searchTerms } from "../transcript/search";
import { clampInt, SESSION_KINDS } from "./session-page";

/** A hit as the reader returns it (db/search.ts `SearchHit`). */
export interface SearchHitRow extends SearchCursor {
  sessionKey: string;
  sessionId: string;
  seq: number;
  role: "user" | "assistant";
  agentId: string;
  channel: string | null;
  /** The message's `content` column (JSON parts). */
  content: string;
}

/** Where a page ended: its last hit's order key (rank, newest first, database, rowid). */
export interface SearchCursor {
  rank: number;
  timestamp: number;
  db: number;
  rowid: number;
}

/** What the reader is asked (db/search.ts `SearchFilter`). */
export interface SearchRead {
  match: string;
  scopes: Array<{ keys?: string[]; spawnedBy?: string; agentId?: string }>;
  excludeKeys: string[];
  agentId?: string | undefined;
  kinds?: string[] | undefined;
  sessionKey?: string | undefined;
  roles: Array<"user" | "assistant">;
  since?: number | undefined;
  until?: number | undefined;
  archived: boolean | "all";
  limit: number;
  cursor?: SearchCursor | undefined;
}

export type SearchReader = (read: SearchRead) => Promise<{ hits: SearchHitRow[]; more: boolean }>;

/** The most bytes a search result takes (its JSON). */
export const MAX_SEARCH_BYTES = 20 * 1024;

export const SearchParams = z.strictObject({
  query: z.string().min(1).max(200).describe('Words to find; `"quoted words"` match as a phrase.'),
  limit: z.number().optional().describe("Results per page, 1-50 (default 10)."),
  agentId: z.string().trim().min(1).optional().describe("Only sessions of this agent."),
  kinds: z
    .array(z.enum(SESSION_KINDS))
    .optional()
    .describe("Only these kinds: main, group, cron, hook, node, other."),
  sessionKey: z
    .string()
    .trim()
    .min(1)
    .optional()
    .describe("Only this session: every transcript it had, before resets too."),
  roles: z
    .array(z.enum(["user", "assistant"]))
    .min(1)
    .optional()
    .describe("Only messages of these roles (default both)."),
  since: z.number().optional().describe("Only messages at or after this time (epoch ms)."),
  until: z.number().optional().describe("Only messages at or before this time (epoch ms)."),
  archived: z
    .union([z.boolean(), z.literal("all")])
    .optional()
    .describe('true: archived sessions only; "all": both; default false.'),
  cursor: z.string().min(1).optional().describe("`nextCursor` from the previous page."),
});
export type SearchParams = z.infer<typeof SearchParams>;

export interface SearchResult {
  sessionKey: string;
  sessionId: string;
  seq: number;
  role: "user" | "assistant";
  timestamp: number;
  agentId: string;
  channel: string | null;
  excerpt: string;
}

export function encodeSearchCursor(c: SearchCursor): string {
  return btoa(JSON.stringify([c.rank, c.timestamp, c.db, c.rowid])).replace(/=+$/, "");
}

export function decodeSearchCursor(cursor: string): SearchCursor | undefined {
  try {
    const v = JSON.parse(atob(cursor)) as unknown;
    if (Array.isArray(v) && v.length === 4 && v.every((n) => typeof n === "number" && Number.isFinite(n))) {
      const [rank, timestamp, db, rowid] = v as number[];
      return {
        rank: rank as number,
        timestamp: timestamp as number,
        db: db as number,
        rowid: rowid as number,
      };
    }
  } catch {
    // fall through
  }
  return undefined;
}

function textOfContent(raw: string): string {
  try {
    const parts = JSON.parse(raw) as ContentPart[];
    return parts
      .filter((p): p is { type: "text"; text: string } => p.type === "text")
      .map((p) => p.text)
      .join(" ");
  } catch {
    return "";
  }
}

const encoder = new TextEncoder();

export interface SearchScope {
  scopes: SearchRead["scopes"];
  excludeKeys: string[];
  /** How a stored key is shown to this caller. */
  displayKey(key: string): string;
}

/**
 * One page of a search within `scope`; `sessionKey` is already resolved to a stored key. Throws
 * nothing for any query text: a query without a word finds nothing.
 */
export async function searchSessions(
  read: SearchReader,
  scope: SearchScope,
  p: Omit<SearchParams, "cursor" | "sessionKey"> & { sessionKey?: string; cursor?: SearchCursor },
) {
  const terms = searchTerms(p.query);
  const limit = clampInt(p.limit, 1, 50, 10);
  if (!terms.match) return { query: p.query, count: 0, results: [] as SearchResult[] };
  const { hits, more } = await read({
    match: terms.match,
    scopes: scope.scopes,
    excludeKeys: scope.excludeKeys,
    agentId: p.agentId ? normalizeAgentId(p.agentId) : undefined,
    kinds: p.kinds,
    sessionKey: p.sessionKey,
    roles: p.roles ?? ["user", "assistant"],
    since: p.since,
    until: p.until,
    archived: p.archived ?? false,
    limit,
    cursor: p.cursor,
  });
  const results: SearchResult[] = [];
  let kept: SearchHitRow | undefined;
  let bytes = 256;
  for (const hit of hits) {
    const result: SearchResult = {
      sessionKey: scope.displayKey(hit.sessionKey),
      sessionId: hit.sessionId,
      seq: hit.seq,
      role: hit.role,
      timestamp: hit.timestamp,
      agentId: hit.agentId,
      channel: hit.channel,
      excerpt: excerptOf(redactSecrets(textOfContent(hit.content)).text, terms.words),
    };
    bytes += encoder.encode(JSON.stringify(result)).length + 1;
    if (bytes > MAX_SEARCH_BYTES) break;
    results.push(result);
    kept = hit;
  }
  const cut = results.length < hits.length;
  const next = (more || cut) && kept ? encodeSearchCursor(kept) : undefined;
  return { query: p.query, count: results.length, results, ...(next ? { nextCursor: next } : {}) };
}
