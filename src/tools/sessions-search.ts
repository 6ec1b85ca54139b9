/**
 * `sessions_search` (SPEC §20): the caller's visible transcripts searched by words, best match
 * first; the search itself is views/search.ts `searchSessions` over db/search.ts, shared with
 * the RPC `sessions.search`, with this caller's visibility scopes.
 */
import { searchMessages } from "../db/search";
import { visibilityScopes } from "../policy/visibility";
import { decodeSearchCursor, SearchParams, searchSessions } from "../views/search";
import { displayKeyFor, findVisibleSession } from "./resolve-session";
import { defineTool, toolError } from "./types";

export const sessionsSearchTool = defineTool({
  name: "sessions_search",
  description:
    "Search the transcripts of the sessions you can see (before resets too) by words, best match first. " +
    "Open a hit with sessions_history { sessionKey, sessionId, aroundSeq: seq }. Pass `nextCursor` back as `cursor` for more.",
  schema: SearchParams,
  async execute(args, ctx) {
    const cursor = args.cursor ? decodeSearchCursor(args.cursor) : undefined;
    if (args.cursor && !cursor) {
      return toolError(
        "`cursor` is not a cursor returned by sessions_search; omit it to start from the best match",
      );
    }
    let sessionKey: string | undefined;
    if (args.sessionKey !== undefined) {
      const target = await findVisibleSession(args.sessionKey, ctx);
      if ("status" in target) return target;
      sessionKey = target.row.key;
    }
    const { caller, config, env } = ctx;
    return searchSessions(
      (filter) => searchMessages(env, filter),
      {
        scopes: visibilityScopes(caller, config),
        excludeKeys: config.session.scope === "global" ? ["unknown"] : ["global", "unknown"],
        displayKey: (key) => displayKeyFor(key, ctx),
      },
      { ...args, sessionKey, cursor },
    );
  },
});
