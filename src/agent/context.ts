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

/**
 * Builds model messages from transcript messages. Tool results older than the last
 * `keepToolResults` are replaced by a placeholder (context pruning, SPEC §5). Leading tool
 * results whose call was cut off by the history window are dropped, since providers reject
 * a tool result without its call.
 */
export function toModelMessages(messages: TranscriptMessage[], keepToolResults: number): ModelMessage[] {
  const toolResultIndexes = messages.flatMap((m, i) => (m.role === "toolResult" ? [i] : []));
  const pruneBefore =
    toolResultIndexes.length > keepToolResults
      ? (toolResultIndexes[toolResultIndexes.length - keepToolResults] ?? Number.POSITIVE_INFINITY)
      : -1;
  const seenCalls = new Set<string>();
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
        for (const p of m.content) {
          if (p.type === "text") {
            if (p.text) parts.push({ type: "text", text: p.text });
          } else {
            seenCalls.add(p.id);
            parts.push({ type: "tool-call", toolCallId: p.id, toolName: p.name, input: p.arguments });
          }
        }
        if (parts.length > 0) out.push({ role: "assistant", content: parts });
        break;
      }
      case "toolResult": {
        if (!m.toolCallId || !seenCalls.has(m.toolCallId)) break;
        const pruned = i < pruneBefore;
        const value = pruned ? PRUNED_PLACEHOLDER : parseJsonOrText(textOf(m));
        out.push({
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: m.toolCallId,
              toolName: m.toolName ?? "unknown",
              output:
                typeof value === "string"
                  ? { type: m.isError ? "error-text" : "text", value }
                  : { type: m.isError ? "error-json" : "json", value: value as never },
            },
          ],
        });
        break;
      }
    }
  }
  return out;
}
