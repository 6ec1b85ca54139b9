/**
 * The agent's tools as the model sees and calls them: the AI SDK tool of each (made once), the
 * tokens its definition takes, a call made (arguments checked against its schema, an exception
 * summarized for the model), and whether a tool's result ends the turn (`endsTurn`).
 */
import { type Tool, type ToolSet, tool, zodSchema } from "ai";
import { z } from "zod";
import type { AgentTool, ToolContext } from "../tools/types";
import { type TranscriptMessage, textOf } from "../transcript/message";
import { estimateTokens } from "../transcript/tokens";

/**
 * The AI SDK tool of each agent tool, made once. Given a bare zod schema the SDK converts it to
 * JSON Schema on every model call; `zodSchema` is the same wrapper the SDK would build (same JSON
 * Schema, same zod validation) and memoizes the conversion.
 */
const sdkTools = new WeakMap<AgentTool, Tool>();

function sdkTool(t: AgentTool): Tool {
  let made = sdkTools.get(t);
  if (!made) {
    made = tool({ description: t.description, inputSchema: zodSchema(t.schema) });
    sdkTools.set(t, made);
  }
  return made;
}

const definitionTokens = new WeakMap<AgentTool, number>();

/** Estimated prompt tokens of a tool's definition: its name, description and JSON Schema. */
export function toolDefinitionTokens(t: AgentTool): number {
  let n = definitionTokens.get(t);
  if (n === undefined) {
    n = estimateTokens(t.name + t.description + JSON.stringify(z.toJSONSchema(t.schema)));
    definitionTokens.set(t, n);
  }
  return n;
}

/** The tools as the AI SDK takes them (exported for test/unit/tool-schemas.test.ts). */
export function toolSet(tools: readonly AgentTool[]): ToolSet {
  const set: ToolSet = {};
  for (const t of tools) set[t.name] = sdkTool(t);
  return set;
}

/**
 * A tool exception as the model sees it: its name and the first line of its message, at most
 * 300 characters, never a stack (which can name hosts and paths). Logs keep the whole of it.
 */
export function exceptionSummary(error: unknown): string {
  const line = (error instanceof Error ? error.message : String(error)).split("\n")[0]?.trim() ?? "";
  const text =
    error instanceof Error && error.name && error.name !== "Error" ? `${error.name}: ${line}` : line;
  return text.length > 300 ? `${text.slice(0, 300)}…` : text || "tool failed";
}

/**
 * A turn ended by a tool (`AgentTool.endsTurn`, e.g. sessions_yield): one of the results of the
 * last assistant message's calls says so, and with which reply. Read from the checkpoint.
 */
export function turnEndedByTool(
  produced: readonly TranscriptMessage[],
  tools: readonly AgentTool[],
): { reply: string } | undefined {
  for (let i = produced.length - 1; i >= 0; i--) {
    const m = produced[i] as TranscriptMessage;
    if (m.role === "assistant") return undefined;
    const def = m.role === "toolResult" && !m.isError ? tools.find((t) => t.name === m.toolName) : undefined;
    if (!def?.endsTurn) continue;
    try {
      const ended = def.endsTurn(JSON.parse(textOf(m)));
      if (ended) return ended;
    } catch {
      // a result that is not JSON ends nothing
    }
  }
  return undefined;
}

export async function runTool(
  call: { id: string; name: string; arguments: unknown },
  calledAt: number,
  tools: readonly AgentTool[],
  toolContext: Omit<ToolContext, "toolCallId">,
): Promise<{ text: string; isError: boolean }> {
  const def = tools.find((t) => t.name === call.name);
  if (!def)
    return { text: JSON.stringify({ status: "error", error: `unknown tool "${call.name}"` }), isError: true };
  const parsed = def.schema.safeParse(call.arguments ?? {});
  if (!parsed.success) {
    const detail = parsed.error.issues
      .map((i) => `${i.path.join(".") || "(arguments)"}: ${i.message}`)
      .join("; ");
    return {
      text: JSON.stringify({ status: "error", error: `invalid arguments: ${detail}` }),
      isError: true,
    };
  }
  try {
    const result = await def.execute(parsed.data, { ...toolContext, toolCallId: call.id, calledAt });
    return { text: JSON.stringify(result ?? null), isError: false };
  } catch (error) {
    console.error(`tool ${call.name} threw:`, error);
    return { text: JSON.stringify({ status: "error", error: exceptionSummary(error) }), isError: true };
  }
}
