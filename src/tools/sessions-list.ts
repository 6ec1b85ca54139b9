/**
 * `sessions_list` (SPEC §6): the sessions this session may see, newest first, keyset-paged.
 * Also owns the listing page shared with the operator RPC `sessions.list` (SPEC §17: "the
 * `sessions_list` params plus `includeGlobal?`"): the RPC lists one unrestricted scope with
 * canonical keys, the tool lists the caller's visibility scopes with the `main` alias.
 */
import { z } from "zod";
import { listSessions, recentMessages, type SessionListFilter, type SessionRow } from "../db/queries";
import { normalizeAgentId } from "../keys/session-key";
import { type VisibilityScope, visibilityScopes } from "../policy/visibility";
import type { TranscriptMessage } from "../session/transcript";
import { decodeCursor, encodeCursor, listRow } from "../session/view";
import { clampInt, displayKeyFor } from "./resolve-session";
import { sanitizeMessages } from "./sessions-history";
import { defineTool, toolError } from "./types";

export const SESSION_KINDS = ["main", "group", "cron", "hook", "node", "other"] as const;

export interface SessionPageQuery {
  kinds?: string[];
  agentId?: string;
  label?: string;
  activeMinutes?: number;
  archived: boolean | "all";
  cursor?: { updatedAt: number; key: string };
  excludeKeys: string[];
  /** Already clamped. */
  limit: number;
  /** Already clamped; 0 = no messages. */
  messageLimit: number;
}

export interface SessionPageOptions {
  /** The key a row is shown with. */
  displayKey(row: SessionRow): string;
  /** Rewrites each row's recent messages (e.g. redaction for model context). */
  messages?(messages: TranscriptMessage[]): TranscriptMessage[];
  /** Extra fields rewritten on the row view (e.g. `spawnedBy` in display form). */
  spawnedBy?(key: string): string;
}

function newestFirst(a: SessionRow, b: SessionRow): number {
  return b.updatedAt - a.updatedAt || (a.key < b.key ? 1 : a.key > b.key ? -1 : 0);
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
  const base: SessionListFilter = {
    kinds: q.kinds,
    agentId: q.agentId,
    label: q.label,
    activeSince: q.activeMinutes ? Date.now() - q.activeMinutes * 60_000 : undefined,
    archived: q.archived,
    excludeKeys: q.excludeKeys,
    limit: q.limit + 1,
    cursor: q.cursor,
  };
  // A scope for another agent than the one asked for selects nothing: skip its query.
  const queries = scopes
    .filter((s) => !(s.agentId && q.agentId && s.agentId !== q.agentId))
    .map((s) => listSessions(env, { ...base, ...s }));
  const results = await Promise.all(queries);
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
  const sessions = await Promise.all(
    page.map(async (row) => {
      let msgs: TranscriptMessage[] | undefined;
      if (q.messageLimit > 0) {
        msgs = await recentMessages(env, row.sessionId, q.messageLimit, { excludeToolResults: true });
        if (opts.messages) msgs = opts.messages(msgs);
      }
      const view = listRow(row, opts.displayKey(row), msgs);
      if (opts.spawnedBy && view.spawnedBy) view.spawnedBy = opts.spawnedBy(view.spawnedBy);
      return view;
    }),
  );
  const last = page[page.length - 1];
  return {
    count: sessions.length,
    sessions,
    ...(rows.length > q.limit && last ? { nextCursor: encodeCursor(last.updatedAt, last.key) } : {}),
  };
}

export const sessionsListTool = defineTool({
  name: "sessions_list",
  description:
    "List the sessions you can see (yours, the ones you spawned, and more if the gateway's visibility setting allows), newest first. " +
    "Pass `nextCursor` back as `cursor` for the next page. Your own main session is shown as `main`.",
  schema: z.strictObject({
    kinds: z
      .array(z.enum(SESSION_KINDS))
      .optional()
      .describe("Only these kinds: main, group, cron, hook, node, other."),
    limit: z.number().optional().describe("Rows per page, 1-200 (default 50)."),
    activeMinutes: z.number().positive().optional().describe("Only sessions updated in the last N minutes."),
    messageLimit: z
      .number()
      .min(0)
      .optional()
      .describe("Include each session's last N messages, tool results excluded (0-20, default 0)."),
    agentId: z.string().trim().min(1).optional().describe("Only sessions of this agent."),
    label: z.string().trim().min(1).optional().describe("Only the session with this label."),
    archived: z
      .union([z.boolean(), z.literal("all")])
      .optional()
      .describe('true: archived sessions only; "all": both; default false.'),
    cursor: z.string().min(1).optional().describe("`nextCursor` from the previous page."),
  }),
  async execute(args, ctx) {
    const { caller, config, env } = ctx;
    const cursor = args.cursor ? decodeCursor(args.cursor) : undefined;
    if (args.cursor && !cursor) {
      return toolError(
        "`cursor` is not a cursor returned by sessions_list; omit it to start from the newest",
      );
    }
    return listSessionPage(
      env,
      visibilityScopes(caller, config),
      {
        kinds: args.kinds,
        agentId: args.agentId ? normalizeAgentId(args.agentId) : undefined,
        label: args.label,
        activeMinutes: args.activeMinutes,
        archived: args.archived ?? false,
        cursor,
        excludeKeys: ["global", "unknown"],
        limit: clampInt(args.limit, 1, 200, 50),
        messageLimit: clampInt(args.messageLimit, 0, 20, 0),
      },
      {
        displayKey: (row) => displayKeyFor(row.key, ctx),
        spawnedBy: (key) => displayKeyFor(key, ctx),
        messages: sanitizeMessages,
      },
    );
  },
});
