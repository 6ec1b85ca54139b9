/**
 * Transcript messages → AI SDK model messages for one model call. Pruning (SPEC §5) happens
 * here: tool results older than the last `keepToolResults` are replaced by a placeholder in the
 * in-memory context only; stored rows are never rewritten.
 */
import type { ModelMessage } from "ai";
import { type MediaPart, mediaLine, type TranscriptMessage, textOf } from "../transcript/message";

/**
 * The files of a turn's new messages as the model is given them (SPEC §22), loaded by the turn
 * (session/run/media.ts): images for a model that sees, text files inline. A media part not in
 * here (an earlier turn's, or one the model cannot take) is a line naming it.
 */
export interface MediaInputs {
  images: ReadonlyMap<string, { data: Uint8Array; mediaType: string }>;
  texts: ReadonlyMap<string, string>;
}

type UserContent = Exclude<Extract<ModelMessage, { role: "user" }>["content"], string>;

/** A person's message: its text, then each file as the model may take it. */
function userContent(m: TranscriptMessage, media: MediaInputs | undefined): string | UserContent {
  const files = m.content.filter((p): p is MediaPart => p.type !== "text" && p.type !== "toolCall");
  if (files.length === 0) return textOf(m);
  const parts: UserContent = [];
  const text = textOf(m);
  if (text) parts.push({ type: "text", text });
  for (const f of files) {
    const image = f.type === "image" ? media?.images.get(f.mediaId) : undefined;
    const inline = f.type === "file" ? media?.texts.get(f.mediaId) : undefined;
    if (image) parts.push({ type: "image", image: image.data, mediaType: image.mediaType });
    else if (inline !== undefined) parts.push({ type: "text", text: `${mediaLine(f)}\n${inline}` });
    // Audio was transcribed into the message's text.
    else if (f.type !== "audio") parts.push({ type: "text", text: mediaLine(f) });
  }
  return parts.length > 0 ? parts : "";
}

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
export function toModelMessages(
  messages: TranscriptMessage[],
  keepToolResults: number,
  media?: MediaInputs,
): ModelMessage[] {
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
        out.push({ role: "user", content: userContent(m, media) });
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
          if (p.type !== "toolCall") continue;
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
