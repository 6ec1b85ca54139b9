/**
 * `sessions_list` (SPEC §6): the sessions this session may see, newest first, keyset-paged.
 * The page itself is read by `readSessionPage` (the caller's visibility scopes merged) and
 * shaped by `sessionPage`, both shared with the RPC. With `messageLimit`, the rows' messages are
 * bounded for model context like `sessions_history`'s: secrets redacted, texts cut, and the
 * whole answer kept within 80 KB by dropping the oldest messages of the fullest rows first (rows
 * are never dropped).
 */
import { z } from "zod";
import { readSessionPage } from "../db/session-page";
import { visibilityScopes } from "../policy/visibility";
import { decodeCursor } from "../views/session";
import { pageQuery, SESSION_KINDS, sessionPage } from "../views/session-page";
import { displayKeyFor } from "./resolve-session";
import { boundMessageLists, MAX_HISTORY_BYTES } from "./sessions-history";
import { defineTool, toolError } from "./types";

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
      .describe(
        "Include each session's last N messages, tool results excluded (0-20, default 0). The page stays within 80 KB: " +
          "when messages do not fit, the oldest are left out (`truncated`); read more with sessions_history.",
      ),
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
    const now = Date.now();
    const query = pageQuery(
      args,
      cursor,
      // Under scope "global" the shared `global` key is every agent's main session, shown as
      // `main`; otherwise it is a reserved key and never listed (SPEC §2, §17).
      config.session.scope === "global" ? ["unknown"] : ["global", "unknown"],
      now,
    );
    const rows = await readSessionPage(env, visibilityScopes(caller, config), query, query.messageLimit);
    const page = sessionPage(rows, now, {
      displayKey: (row) => displayKeyFor(row.key, ctx),
      spawnedBy: (key) => displayKeyFor(key, ctx),
    });
    return query.messageLimit > 0 ? withBoundedMessages(page) : page;
  },
});

/** Room kept for the flags added to the answer. */
const FLAGS_BYTES = 256;
const encoder = new TextEncoder();

type Page = ReturnType<typeof sessionPage>;

/**
 * The page with its rows' messages bounded: the messages get the room the rows leave within
 * MAX_HISTORY_BYTES (none when the rows alone fill it), and the answer says what was cut.
 */
function withBoundedMessages(page: Page) {
  const skeleton = { ...page, sessions: page.sessions.map((row) => ({ ...row, messages: [] })) };
  // The skeleton already holds each row's "[]", which the bounded lists count again.
  const room =
    MAX_HISTORY_BYTES -
    FLAGS_BYTES -
    encoder.encode(JSON.stringify(skeleton)).length +
    2 * page.sessions.length;
  const bounded = boundMessageLists(
    page.sessions.map((row) => row.messages ?? []),
    { maxBytes: Math.max(0, room) },
  );
  return {
    ...page,
    sessions: page.sessions.map((row, i) => ({ ...row, messages: bounded.lists[i] ?? [] })),
    truncated: bounded.truncated,
    droppedMessages: bounded.droppedMessages,
    contentTruncated: bounded.contentTruncated,
    contentRedacted: bounded.contentRedacted,
  };
}
