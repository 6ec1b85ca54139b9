/**
 * `/usage` (SPEC §21): the footer a session's replies get (`off`, `tokens`, `full`), and `cost`,
 * which answers once with what this session, and its agent today and over the last 30 days,
 * have cost. The footer's text is pure (`usageFooter`); the reply stored in the transcript never
 * carries it, only what is delivered does.
 */
import type { SessionRow } from "../../db/queries";
import { summarizeUsage } from "../../db/usage";
import { localDay } from "../../time/zones";
import type { Usage } from "../../transcript/message";
import { formatTokens, formatUsd } from "../../views/format";

export const USAGE_MODES = ["off", "tokens", "full", "cost"] as const;
export type UsageMode = (typeof USAGE_MODES)[number];

/** The footer of a reply under `mode` (none when off or unknown). */
export function usageFooter(mode: string | null | undefined, usage: Usage, model: string | null): string {
  if (mode !== "tokens" && mode !== "full") return "";
  const tokens = `— ${formatTokens(usage.inputTokens)} in / ${formatTokens(usage.outputTokens)} out`;
  if (mode === "tokens") return tokens;
  const cost = usage.costUsd === null || usage.costUsd === undefined ? "unpriced" : formatUsd(usage.costUsd);
  return `${tokens} · ${model ?? "no model"} · ${cost}`;
}

/** What `cost` answers: this session, its agent today and over the last 30 days (priced calls). */
export async function costText(env: Env, entry: SessionRow, timeZone: string, now: number): Promise<string> {
  const today = localDay(now, timeZone);
  const from = new Date(Date.parse(`${today}T00:00:00Z`) - 29 * 86_400_000).toISOString().slice(0, 10);
  const [month, day] = await Promise.all([
    summarizeUsage(env, { from, to: today, agentId: entry.agentId }, "agent"),
    summarizeUsage(env, { from: today, to: today, agentId: entry.agentId }, "agent"),
  ]);
  const usd = (rows: Array<{ costUsd: number }>) => formatUsd(rows.reduce((n, r) => n + r.costUsd, 0));
  return [
    `Cost of this session: ${formatUsd(entry.costUsd ?? 0)}`,
    `Agent ${entry.agentId}: today ${usd(day)} · last 30 days ${usd(month)} (${timeZone})`,
    "Priced model calls only; see /usage tokens or full for a footer on each reply.",
  ].join("\n");
}
