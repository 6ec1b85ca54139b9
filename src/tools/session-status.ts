/**
 * `session_status` (SPEC §6, §12): the `/status` card as JSON, for the calling session or a
 * session it may see: key and id, model, context used, thinking/verbose levels, send policy,
 * queue depth (asked of the session's actor) and the last reset.
 */
import { z } from "zod";
import type { SessionRow } from "../db/queries";
import { statusCard } from "../views/status-card";
import { callerEntry, displayKeyFor, findVisibleSession } from "./resolve-session";
import { defineTool } from "./types";

export const sessionStatusTool = defineTool({
  name: "session_status",
  description:
    "Status of this session (or another visible one): model, context used, thinking/verbose levels, send policy, queue depth, last reset.",
  schema: z.strictObject({
    sessionKey: z
      .string()
      .trim()
      .min(1)
      .optional()
      .describe("Session key, `main`, or a sessionId (default: this session)."),
  }),
  async execute(args, ctx) {
    const { caller, config } = ctx;
    let row: SessionRow | undefined;
    let displayKey: string;
    if (args.sessionKey !== undefined) {
      const target = await findVisibleSession(args.sessionKey, ctx);
      if ("status" in target) return target;
      ({ row, displayKey } = target);
    } else {
      row = await callerEntry(ctx);
      displayKey = displayKeyFor(caller.sessionKey, ctx);
    }
    if (!row) {
      // The calling session has never run (e.g. a main key addressed over HTTP): it is
      // reachable, and its first run will create it with these settings.
      const agent = config.agents.list.find((a) => a.id === caller.agentId);
      return {
        ok: true as const,
        key: displayKey,
        agentId: caller.agentId,
        created: false,
        model: agent?.model ?? config.agents.defaults.model,
        queueDepth: 0,
        runStatus: "idle",
      };
    }
    const queue = await ctx.sessions.queueDepth(row.key);
    return statusCard(row, displayKey, queue, config);
  },
});
