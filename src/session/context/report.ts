/**
 * `/context list` and `/context detail` (SPEC §12): what the next model call of a session would
 * carry — the system prompt by section, each tool's schema, injected notes, the compaction
 * summary and the messages after it — with token estimates (src/transcript/tokens.ts) and the
 * share of the model's window. `gatherContextReport` reads the actor's state; the text is made
 * by the pure `contextReportText`.
 */

import { ModelRefError, resolveModelRef } from "../../agent/models";
import { toolDefinitionTokens } from "../../agent/tool-calls";
import type { Config } from "../../config/schema";
import type { SessionRow } from "../../db/queries";
import { entryInitOf } from "../../runs/entry-init";
import { toolsForSession } from "../../tools/registry";
import { textOf } from "../../transcript/message";
import { estimateTokens } from "../../transcript/tokens";
import { formatTokens } from "../../views/format";
import { effectiveModel } from "../../views/status-card";
import type { ActorRecords } from "../d1/records";
import type { ContextStore } from "./copy";

/** What a report of the turn context reads. */
export interface ContextReportHost {
  readonly config: Config;
  readonly context: Pick<ContextStore, "ready" | "hydrate" | "load">;
  readonly records: Pick<ActorRecords, "turnContext">;
}

import { buildSystemPrompt } from "./system-prompt";

export interface ContextReport {
  model: string;
  contextTokens: number;
  /** The last model call's prompt + completion, as `/status` shows it. */
  lastCallTokens: number;
  sections: Array<{ name: string; tokens: number }>;
  tools: Array<{ name: string; tokens: number }>;
  summaryTokens: number | null;
  messages: { count: number; tokens: number };
  largest: Array<{ role: string; preview: string; tokens: number }>;
}

const LARGEST = 5;

/** The system prompt cut at its `## ` headings; the text before the first is the agent's prompt. */
function sections(prompt: string): Array<{ name: string; tokens: number }> {
  return prompt.split(/\n(?=## )/).map((part, i) => ({
    name:
      i === 0
        ? "agent prompt"
        : part.slice(3, part.indexOf("\n") > 0 ? part.indexOf("\n") : undefined) || "section",
    tokens: estimateTokens(part),
  }));
}

export async function gatherContextReport(a: ContextReportHost, entry: SessionRow): Promise<ContextReport> {
  const config = a.config;
  const agent = config.agents.list.find((ag) => ag.id === entry.agentId);
  const model = effectiveModel(entry, config);
  let contextTokens = entry.contextTokens;
  try {
    contextTokens = resolveModelRef(model, config).contextWindow;
  } catch (error) {
    if (!(error instanceof ModelRefError)) throw error;
  }
  if (!a.context.ready(entry.sessionId)) {
    a.context.hydrate(
      entry.sessionId,
      await a.records.turnContext(entry.sessionId, config.agents.defaults.contextMessages),
    );
  }
  const context = a.context.load(entry.sessionId);
  const prompt = buildSystemPrompt({
    base: agent?.systemPrompt ?? config.agents.defaults.systemPrompt,
    req: { sessionKey: entry.key, init: entryInitOf(entry), hasThread: !!entry.lastThreadId },
    timezone: config.session.timezone,
  });
  const largest = [...context.messages]
    .sort((x, y) => y.tokens - x.tokens)
    .slice(0, LARGEST)
    .map((m) => ({
      role: m.role === "toolResult" ? `tool result ${m.toolName ?? ""}`.trim() : m.role,
      preview: (
        textOf(m) || m.content.map((p) => (p.type === "toolCall" ? `${p.name}(…)` : "")).join(" ")
      ).slice(0, 60),
      tokens: m.tokens,
    }));
  return {
    model,
    contextTokens,
    lastCallTokens: entry.totalTokens,
    sections: sections(prompt),
    tools: toolsForSession(entry.key, agent, config).map((t) => ({
      name: t.name,
      tokens: toolDefinitionTokens(t),
    })),
    summaryTokens: context.summary?.tokens ?? null,
    messages: { count: context.messages.length, tokens: context.tokens - (context.summary?.tokens ?? 0) },
    largest,
  };
}

function percent(part: number, whole: number): string {
  return whole > 0 ? `${Math.round((part / whole) * 1000) / 10}%` : "n/a";
}

/** The report as a chat notice; `detail` adds every section, tool and the largest messages. */
export function contextReportText(r: ContextReport, detail: boolean): string {
  const sectionTokens = r.sections.reduce((n, s) => n + s.tokens, 0);
  const toolTokens = r.tools.reduce((n, t) => n + t.tokens, 0);
  const total = sectionTokens + toolTokens + (r.summaryTokens ?? 0) + r.messages.tokens;
  const lines = [
    `Context of the next call (estimated): ~${formatTokens(total)} / ${formatTokens(r.contextTokens)} tokens (${percent(total, r.contextTokens)}) · model ${r.model}`,
    `Last call: ${formatTokens(r.lastCallTokens)} / ${formatTokens(r.contextTokens)} tokens (${percent(r.lastCallTokens, r.contextTokens)}), as /status shows`,
    `System prompt: ~${formatTokens(sectionTokens)} tokens in ${r.sections.length} sections: ${r.sections.map((s) => s.name).join(", ")}`,
    `Tools (${r.tools.length}): ~${formatTokens(toolTokens)} tokens: ${r.tools.map((t) => t.name).join(", ") || "none"}`,
    "Injected notes: none (memory notes are read on demand with memory_read)",
    r.summaryTokens === null
      ? "Compaction summary: none yet"
      : `Compaction summary: ~${formatTokens(r.summaryTokens)} tokens`,
    `Messages since: ${r.messages.count}, ~${formatTokens(r.messages.tokens)} tokens`,
  ];
  if (detail) {
    lines.push("", "System prompt sections:");
    for (const s of r.sections) lines.push(`- ${s.name}: ~${s.tokens}`);
    lines.push("Tool schemas:");
    for (const t of r.tools) lines.push(`- ${t.name}: ~${t.tokens}`);
    lines.push("Largest messages:");
    for (const m of r.largest) lines.push(`- ${m.role}: ~${m.tokens} · ${JSON.stringify(m.preview)}`);
    if (r.largest.length === 0) lines.push("- none");
  }
  return lines.join("\n");
}
