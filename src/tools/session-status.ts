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
    changesSince: z
      .number()
      .min(0)
      .optional()
      .describe(
        "A stateVersion you saw before: the changes since then (`stateChanges`: events oldest first, historyGap when some are no longer kept).",
      ),
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
        stateVersion: 0,
        ...(args.changesSince !== undefined ? { stateChanges: { events: [], historyGap: false } } : {}),
      };
    }
    const [queue, state] = await Promise.all([
      ctx.sessions.queueDepth(row.key),
      ctx.sessions.stateChanges(
        row.key,
        args.changesSince === undefined ? undefined : Math.trunc(args.changesSince),
      ),
    ]);
    const card = { ...statusCard(row, displayKey, queue, config), stateVersion: state.stateVersion };
    if (args.changesSince === undefined) return card;
    return { ...card, stateChanges: { events: state.events ?? [], historyGap: state.historyGap ?? false } };
  },
});
