/**
 * `session_status` (SPEC §6, §12): the `/status` card as JSON, for the calling session or a
 * session it may see: key and id, model, context used, thinking/verbose levels, send policy,
 * queue depth (asked of the session's actor) and the last reset.
 */
import { z } from "zod";
import type { Config } from "../config/schema";
import { getSession, type SessionRow } from "../db/queries";
import { chatTypeOfKey } from "../keys/session-key";
import { evaluateSendPolicy } from "../policy/send-policy";
import { actorFor } from "../session/client";
import { displayKeyFor, findVisibleSession } from "./resolve-session";
import { defineTool } from "./types";

export interface QueueDepth {
  waiting: number;
  running: boolean;
}

/** The model a session's next run uses: its override, else the one it last ran, else the agent's. */
function effectiveModel(
  row: Pick<SessionRow, "agentId" | "model" | "modelOverride">,
  config: Config,
): string {
  const agent = config.agents.list.find((a) => a.id === row.agentId);
  return row.modelOverride ?? row.model ?? agent?.model ?? config.agents.defaults.model;
}

/** The status card of an existing session (pure). */
export function statusCard(row: SessionRow, displayKey: string, queue: QueueDepth, config: Config) {
  const { chatType, thread } = chatTypeOfKey(row.key, !!row.lastThreadId);
  const override = row.sendPolicy === "allow" || row.sendPolicy === "deny" ? row.sendPolicy : null;
  const effective = evaluateSendPolicy(
    { key: row.key, channel: row.channel, chatType, thread, override },
    config.session.sendPolicy,
  );
  const percentUsed =
    row.contextTokens > 0 ? Math.round((row.totalTokens / row.contextTokens) * 1000) / 10 : null;
  return {
    ok: true as const,
    key: displayKey,
    sessionId: row.sessionId,
    agentId: row.agentId,
    kind: row.kind,
    ...(row.label ? { label: row.label } : {}),
    model: effectiveModel(row, config),
    ...(row.modelOverride ? { modelOverride: row.modelOverride } : {}),
    contextTokens: row.contextTokens,
    totalTokens: row.totalTokens,
    inputTokens: row.inputTokens,
    outputTokens: row.outputTokens,
    percentUsed,
    compactionCount: row.compactionCount,
    thinkingLevel: row.thinkingLevel ?? "off",
    verboseLevel: row.verboseLevel ?? "off",
    sendPolicy: { effective, override },
    queueDepth: queue.waiting,
    runStatus: queue.running ? "running" : row.runStatus,
    lastResetAt: row.sessionStartedAt,
    updatedAt: row.updatedAt,
  };
}

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
    const { caller, config, env } = ctx;
    let row: SessionRow | undefined;
    let displayKey: string;
    if (args.sessionKey !== undefined) {
      const target = await findVisibleSession(args.sessionKey, ctx);
      if ("status" in target) return target;
      ({ row, displayKey } = target);
    } else {
      row = caller.entry ?? (await getSession(env, caller.sessionKey));
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
    const queue = await actorFor(env, row.key).queueDepth(row.key);
    return statusCard(row, displayKey, queue, config);
  },
});
