/**
 * The status card of a session (SPEC §12 `/status`, §6 `session_status`): key and id, model,
 * context used, thinking/verbose levels, send policy, queue depth and the last reset. Pure:
 * callers supply the entry and the queue depth (asked of the session's actor).
 */
import type { Config } from "../config/schema";
import type { SessionRow } from "../db/queries";
import { chatTypeOfKey } from "../keys/session-key";
import { evaluateSendPolicy } from "../policy/send-policy";
import type { QueueDepth } from "../runs/types";

/** The model a session's next run uses: its override, else the one it last ran, else the agent's. */
export function effectiveModel(
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
