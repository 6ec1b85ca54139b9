/**
 * Transcript messages → AI SDK model messages for one model call. Pruning (SPEC §5) happens
 * here: tool results older than the last `keepToolResults` are replaced by a placeholder in the
 * in-memory context only; stored rows are never rewritten.
 */
import type { ModelMessage } from "ai";
import { type TranscriptMessage, textOf } from "../transcript/message";

export const PRUNED_PLACEHOLDER = "[older tool result pruned from context; read it with sessions_history]";

function parseJsonOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** What a tool call without a stored result answers in the context (the run ended before it). */
export const MISSING_RESULT = "[no result: the run ended before this tool answered]";

type ToolResultPart = Extract<
  Extract<ModelMessage, { role: "tool" }>["content"][number],
  { type: "tool-result" }
>;

/**
 * Builds model messages from transcript messages. Tool results older than the last
 * `keepToolResults` are replaced by a placeholder (context pruning, SPEC §5).
 *
 * Providers require each assistant tool call to be answered by its result right after it. The
 * transcript is append-only and other messages can land between a call and its result (a
 * sub-agent's announcement arriving while a run waits on a tool), so results are placed right
 * after their call and whatever came between follows them. A call whose result was never
 * stored (a run aborted mid-tool) gets a short placeholder result; a result whose call is not
 * in view (cut off by the window) is dropped.
 */
export function toModelMessages(messages: TranscriptMessage[], keepToolResults: number): ModelMessage[] {
  const toolResultIndexes = messages.flatMap((m, i) => (m.role === "toolResult" ? [i] : []));
  const pruneBefore =
    toolResultIndexes.length > keepToolResults
      ? (toolResultIndexes[toolResultIndexes.length - keepToolResults] ?? Number.POSITIVE_INFINITY)
      : -1;
  const resultOf = new Map<string, number>();
  for (const i of toolResultIndexes) {
    const id = messages[i]?.toolCallId;
    if (id && !resultOf.has(id)) resultOf.set(id, i);
  }
  const out: ModelMessage[] = [];
  for (const [i, m] of messages.entries()) {
    switch (m.role) {
      case "user":
        out.push({ role: "user", content: textOf(m) });
        break;
      case "system":
        out.push({ role: "user", content: `[system] ${textOf(m)}` });
        break;
      case "assistant": {
        const parts: Exclude<Extract<ModelMessage, { role: "assistant" }>["content"], string> = [];
        const results: ToolResultPart[] = [];
        for (const p of m.content) {
          if (p.type === "text") {
            if (p.text) parts.push({ type: "text", text: p.text });
            continue;
          }
          parts.push({ type: "tool-call", toolCallId: p.id, toolName: p.name, input: p.arguments });
          const at = resultOf.get(p.id);
          const result = at !== undefined && at > i ? messages[at] : undefined;
          results.push(
            result && at !== undefined
              ? resultPart(result, at < pruneBefore)
              : {
                  type: "tool-result",
                  toolCallId: p.id,
                  toolName: p.name,
                  output: { type: "error-text", value: MISSING_RESULT },
                },
          );
        }
        if (parts.length > 0) out.push({ role: "assistant", content: parts });
        if (results.length > 0) out.push({ role: "tool", content: results });
        break;
      }
      case "toolResult":
        // Placed after its call above; a result without its call in view is dropped.
        break;
    }
  }
  return out;
}

function resultPart(m: TranscriptMessage, pruned: boolean): ToolResultPart {
  const value = pruned ? PRUNED_PLACEHOLDER : parseJsonOrText(textOf(m));
  return {
    type: "tool-result",
    toolCallId: m.toolCallId ?? "",
    toolName: m.toolName ?? "unknown",
    output:
      typeof value === "string"
        ? { type: m.isError ? "error-text" : "text", value }
        : { type: m.isError ? "error-json" : "json", value: value as never },
  };
}
