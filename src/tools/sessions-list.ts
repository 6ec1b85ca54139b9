/**
 * `sessions_list` (SPEC §6): the sessions this session may see, newest first, keyset-paged.
 * The page itself (scopes merged, rows shaped) is `listSessionPage`, shared with the RPC.
 */
import { z } from "zod";
import { visibilityScopes } from "../policy/visibility";
import { decodeCursor } from "../views/session";
import { listSessionPage, pageQuery, SESSION_KINDS } from "../views/session-page";
import { displayKeyFor } from "./resolve-session";
import { sanitizeMessages } from "./sessions-history";
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
      // Under scope "global" the shared `global` key is every agent's main session, shown as
      // `main`; otherwise it is a reserved key and never listed (SPEC §2, §17).
      pageQuery(args, cursor, config.session.scope === "global" ? ["unknown"] : ["global", "unknown"]),
      {
        displayKey: (row) => displayKeyFor(row.key, ctx),
        spawnedBy: (key) => displayKeyFor(key, ctx),
        messages: sanitizeMessages,
      },
    );
  },
});
