/**
 * The status card of a session (SPEC §12 `/status`, §6 `session_status`): key and id, model,
 * context used, thinking/verbose levels, send policy, queue depth and the last reset. Pure:
 * callers supply the entry (`StatusEntry`: the fields the card reads) and the queue depth
 * (asked of the session's actor).
 */
import type { Config } from "../config/schema";
import { chatTypeOfKey } from "../keys/session-key";
import { evaluateSendPolicy, sessionChannel } from "../policy/send-policy";
import type { QueueDepth } from "../runs/types";
import { formatInstant, formatTokens, formatUsd } from "./format";
import type { SessionEntry } from "./session";

/** What the status card reads of a session entry. */
export type StatusEntry = Pick<
  SessionEntry,
  | "key"
  | "sessionId"
  | "agentId"
  | "kind"
  | "label"
  | "chatType"
  | "channel"
  | "lastChannel"
  | "lastThreadId"
  | "sendPolicy"
  | "model"
  | "modelOverride"
  | "contextTokens"
  | "totalTokens"
  | "inputTokens"
  | "outputTokens"
  | "costUsd"
  | "compactionCount"
  | "thinkingLevel"
  | "verboseLevel"
  | "runStatus"
  | "sessionStartedAt"
  | "updatedAt"
>;

/** The model a session's next run uses: its override, else the one it last ran, else the agent's. */
export function effectiveModel(
  row: Pick<StatusEntry, "agentId" | "model" | "modelOverride">,
  config: Config,
): string {
  const agent = config.agents.list.find((a) => a.id === row.agentId);
  return row.modelOverride ?? row.model ?? agent?.model ?? config.agents.defaults.model;
}

/** The status card of an existing session (pure). */
export function statusCard(row: StatusEntry, displayKey: string, queue: QueueDepth, config: Config) {
  const { chatType, thread } = chatTypeOfKey(row.key, !!row.lastThreadId);
  const override = row.sendPolicy === "allow" || row.sendPolicy === "deny" ? row.sendPolicy : null;
  const effective = evaluateSendPolicy(
    { key: row.key, channel: sessionChannel(row), chatType, thread, override },
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
    costUsd: row.costUsd ?? 0,
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

export type StatusCard = ReturnType<typeof statusCard>;

/**
 * The card as a chat notice (SPEC §12 `/status`): reachability, key and id, model, context used,
 * levels, send policy, queue depth, last reset (in `session.timezone`), and whether the session
 * has expired (its next message starts a new one).
 */
export function statusCardText(
  card: StatusCard,
  opts: { version: string; timezone: string; expired: boolean },
): string {
  const context =
    card.contextTokens > 0
      ? `${formatTokens(card.totalTokens)} of ${formatTokens(card.contextTokens)} tokens (${card.percentUsed ?? 0}%)`
      : `${formatTokens(card.totalTokens)} tokens`;
  const policy = card.sendPolicy.override
    ? `${card.sendPolicy.effective} (set for this session)`
    : `${card.sendPolicy.effective} (inherited)`;
  const queue = `${card.queueDepth} waiting · ${card.runStatus}`;
  const lines = [
    `Switchboard ${opts.version} · reachable`,
    `Session: ${card.key}${card.label ? ` (${card.label})` : ""}`,
    `Session id: ${card.sessionId}`,
    `Model: ${card.model}`,
    `Context: ${context} · in ${formatTokens(card.inputTokens)} / out ${formatTokens(card.outputTokens)} this session · ${card.compactionCount} compaction${card.compactionCount === 1 ? "" : "s"}`,
    `Cost: ${formatUsd(card.costUsd)} this session (priced model calls)`,
    `Thinking: ${card.thinkingLevel} · Verbose: ${card.verboseLevel}`,
    `Send policy: ${policy}`,
    `Queue: ${queue}`,
    `Last reset: ${formatInstant(card.lastResetAt, opts.timezone)} ${opts.timezone}`,
  ];
  if (opts.expired) lines.push("Expired: the next message starts a new session.");
  return lines.join("\n");
}
