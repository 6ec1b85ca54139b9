/**
 * `subagents` (SPEC §20): the sub-agent runs this session spawned (`list`, newest first) and
 * `cancel` of one of them, which aborts it; its announce step then reports `Status: aborted` to
 * this session as any ended sub-agent does. A run this session did not spawn is not found. The
 * runs are read from D1 (each child's `spawn` run with its task); a run D1 does not show ended
 * yet is asked of its child's actor, which knows whether it is queued, running or just ended.
 */
import { z } from "zod";
import { listSessions } from "../db/queries";
import { spawnedRuns } from "../db/runs";
import { TERMINAL } from "../runs/types";
import type { ContentPart } from "../transcript/message";
import { defineTool, type ToolContext, toolError } from "./types";

/** The most children `list` reads (agents.defaults.subagents.maxConcurrent bounds the running ones). */
const MAX_CHILDREN = 200;
const TASK_CHARS = 200;

export interface SubagentRun {
  runId: string;
  childSessionKey: string;
  label?: string;
  status: string;
  startedAt: number;
  endedAt?: number;
  task: string;
}

function cut(text: string): string {
  return text.length > TASK_CHARS ? `${text.slice(0, TASK_CHARS - 1)}…` : text;
}

function contentText(content: string | null): string | undefined {
  if (!content) return undefined;
  try {
    return (JSON.parse(content) as ContentPart[]).map((p) => (p.type === "text" ? p.text : "")).join("");
  } catch {
    return undefined;
  }
}

/** This session's sub-agent runs, newest first, with their live status. */
export async function subagentRuns(
  ctx: Pick<ToolContext, "caller" | "env" | "sessions">,
): Promise<SubagentRun[]> {
  const children = await listSessions(ctx.env, {
    spawnedBy: ctx.caller.sessionKey,
    archived: "all",
    limit: MAX_CHILDREN,
  });
  const runs = await spawnedRuns(ctx.env, children);
  const labels = new Map(children.map((c) => [c.key, c.label]));
  const out = await Promise.all(
    runs.map(async (r): Promise<SubagentRun> => {
      let status = r.status;
      let endedAt = r.endedAt ?? undefined;
      let task = contentText(r.task);
      if (!TERMINAL.has(status)) {
        // D1 shows a run's start, end and inputs with its records; its actor knows them now.
        const [live, input] = await Promise.all([
          ctx.sessions.waitForRun(r.sessionKey, r.runId, 0),
          task === undefined ? ctx.sessions.runInput(r.sessionKey, r.runId) : undefined,
        ]);
        if ("runStatus" in live) {
          status = live.runStatus;
          endedAt = live.endedAt ?? endedAt;
        }
        task ??= input;
      }
      const label = labels.get(r.sessionKey);
      return {
        runId: r.runId,
        childSessionKey: r.sessionKey,
        ...(label ? { label } : {}),
        status,
        startedAt: r.startedAt ?? r.createdAt,
        ...(endedAt !== undefined ? { endedAt } : {}),
        task: cut(task ?? ""),
      };
    }),
  );
  return out.sort((a, b) => b.startedAt - a.startedAt || (a.runId < b.runId ? 1 : -1));
}

export const subagentsTool = defineTool({
  name: "subagents",
  description:
    "The sub-agent runs this session spawned (`list`, newest first, with status), or `cancel` one by runId: " +
    "it is aborted and its announcement reports Status: aborted.",
  schema: z.strictObject({
    action: z.enum(["list", "cancel"]).describe("list, or cancel (needs runId)."),
    runId: z.string().trim().min(1).optional().describe("For cancel: the runId `list` shows."),
  }),
  async execute(args, ctx) {
    const runs = await subagentRuns(ctx);
    if (args.action === "list") return { runs };
    if (!args.runId) return toolError("`runId` is required for cancel: a runId from subagents list");
    const run = runs.find((r) => r.runId === args.runId);
    if (!run) return toolError(`sub-agent run not found: ${args.runId} (not one this session spawned)`);
    if (TERMINAL.has(run.status)) {
      return { status: "ended", runId: run.runId, runStatus: run.status };
    }
    // The child session holds its task run and, once that ends, its announce step: aborting the
    // running run ends the task (its announce step follows); a task not started yet is dropped.
    const { aborted } = await ctx.sessions.abort(run.childSessionKey, run.status === "queued");
    return {
      status: aborted > 0 ? "cancelled" : "ended",
      runId: run.runId,
      childSessionKey: run.childSessionKey,
    };
  },
});
