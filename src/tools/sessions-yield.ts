/**
 * `sessions_yield` (SPEC §20): ends the turn after this call, with `message` as the run's reply
 * (or no reply), while the session's sub-agents work; each of their announcements then starts a
 * run here whose user message is the announcement, until none is left (the run lifecycle's
 * `yielded` transition: session/run/lifecycle.ts, session/flows/handoff.ts). Only when a
 * sub-agent of the session is running or queued, or still has its announce step to run.
 */
import { z } from "zod";
import type { TranscriptMessage } from "../transcript/message";
import { textOf } from "../transcript/message";
import { subagentRuns } from "./subagents";
import { defineTool, toolError } from "./types";

export const YIELD_TOOL = "sessions_yield";

interface Yielded {
  status: "yielded";
  waitingOn: string[];
  message?: string;
}

function isYielded(value: unknown): value is Yielded {
  const v = value as Partial<Yielded> | null;
  return typeof v === "object" && v !== null && v.status === "yielded" && Array.isArray(v.waitingOn);
}

/**
 * The yield a run's produced messages end on, if they do: a `sessions_yield` result among the
 * results of the run's last assistant message. Pure: the loop and the lifecycle both read it
 * from the checkpoint, so a run resumed after a crash ends the same way.
 */
export function yieldOf(produced: readonly TranscriptMessage[]): Yielded | undefined {
  let last = -1;
  for (let i = produced.length - 1; i >= 0; i--) {
    if (produced[i]?.role === "assistant") {
      last = i;
      break;
    }
  }
  for (const m of produced.slice(last + 1)) {
    if (m.role !== "toolResult" || m.toolName !== YIELD_TOOL || m.isError) continue;
    try {
      const result = JSON.parse(textOf(m)) as unknown;
      if (isYielded(result)) return result;
    } catch {
      // not a result this tool wrote
    }
  }
  return undefined;
}

export const sessionsYieldTool = defineTool({
  name: YIELD_TOOL,
  description:
    "End your turn while your sub-agents work: each of their announcements will start a new turn for you, so you " +
    'can act on the result. `message` (optional) is sent to the chat now, e.g. "Working on it".',
  schema: z.strictObject({
    message: z
      .string()
      .trim()
      .min(1)
      .max(4000)
      .optional()
      .describe("Text to send now (at most 4,000 characters)."),
  }),
  endsTurn: (result: unknown) => (isYielded(result) ? { reply: result.message ?? "" } : undefined),
  async execute(args, ctx) {
    if (!ctx.caller.runId)
      return toolError("sessions_yield ends a turn: it is called by an agent in a run, not over HTTP");
    const runs = await subagentRuns(ctx);
    // A sub-agent is left while its task runs or its child session still has its announce step to run.
    const waitingOn: string[] = [];
    for (const child of new Set(runs.map((r) => r.childSessionKey))) {
      const task = runs.find((r) => r.childSessionKey === child);
      const active = task && (task.status === "queued" || task.status === "running");
      const depth = active ? undefined : await ctx.sessions.queueDepth(child);
      if (active || (depth && (depth.running || depth.waiting > 0))) waitingOn.push(child);
    }
    if (waitingOn.length === 0) return toolError("nothing to wait for: no running sub-agent");
    return { status: "yielded", waitingOn, ...(args.message ? { message: args.message } : {}) };
  },
});
