/**
 * `sessions_spawn` (SPEC §6, §7): starts an isolated sub-agent session
 * `agent:<agentId>:subagent:<uuid>` with the task as its first message and returns at once.
 * When the child's run ends, its actor runs the announce step and posts the normalized
 * Status/Result/Notes/Stats message to the requester (transcript + chat route).
 */
import { z } from "zod";
import { ModelRefError, resolveModelRef } from "../agent/models";
import { stableUuid } from "../auth/signature";
import type { Config } from "../config/schema";
import { getSessionByLabel, listSessions } from "../db/queries";
import { normalizeAgentId } from "../keys/ids";
import { isSubagentKey, subagentSessionKey } from "../keys/session-key";
import type { EnqueueRequest } from "../runs/types";
import { callerEntry, callerEntryInit } from "./resolve-session";
import { callSeed, defineTool, forbidden, toolError } from "./types";

/**
 * The longest task, in characters: it becomes the child's first transcript message, and stays
 * well inside the transcript's per-message text bound (64 KB) for ordinary text.
 */
export const MAX_TASK_CHARS = 32_000;

const got = (input: unknown) => (typeof input === "string" ? ` (got ${input.length})` : "");

/** The agent ids `requester` may spawn (own agent first); `allowAny` for `["*"]`. */
export function spawnableAgents(requester: string, config: Config): { allowAny: boolean; ids: string[] } {
  const agent = config.agents.list.find((a) => a.id === requester);
  const allow = agent?.subagents.allowAgents ?? [];
  const configured = config.agents.list.map((a) => a.id);
  const allowAny = allow.includes("*");
  const ids = allowAny
    ? configured
    : allow.filter((id) => configured.length === 0 || configured.includes(id));
  return { allowAny, ids: [requester, ...ids.filter((id) => id !== requester)] };
}

export const sessionsSpawnTool = defineTool({
  name: "sessions_spawn",
  description:
    "Delegate a task to an isolated sub-agent session. Returns immediately with the child's session key; " +
    "when the sub-agent finishes, its result is announced to this session. Use agents_list to see which agentId values you may use.",
  schema: z.strictObject({
    task: z
      .string()
      .trim()
      .min(1, { error: "must not be empty" })
      .max(MAX_TASK_CHARS, {
        error: (iss) =>
          `must be at most ${MAX_TASK_CHARS} characters${got(iss.input)}; describe the task more briefly`,
      })
      .describe(`What the sub-agent should do (1-${MAX_TASK_CHARS} characters); it sees only this.`),
    label: z.string().trim().min(1).max(128).optional().describe("A label for the child session."),
    agentId: z.string().trim().min(1).optional().describe("Agent to run the task (default: yours)."),
    model: z.string().trim().min(1).optional().describe("Model for the sub-agent (provider/model or alias)."),
    runTimeoutSeconds: z
      .number()
      .min(0)
      .max(86_400)
      .optional()
      .describe("Abort the sub-agent run after this many seconds (default 0 = no limit)."),
    cleanup: z
      .enum(["delete", "keep"])
      .optional()
      .describe("delete the child session once announced, or keep it (default)."),
  }),
  async execute(args, ctx) {
    const { caller, config, env } = ctx;
    if (isSubagentKey(caller.sessionKey)) {
      return forbidden("sub-agent sessions may not call sessions_spawn; do the work yourself or report back");
    }
    const agentId = normalizeAgentId(args.agentId ?? caller.agentId);
    const { ids } = spawnableAgents(caller.agentId, config);
    if (!ids.includes(agentId)) {
      return forbidden(
        `agent "${agentId}" is not allowed by agents.list[${caller.agentId}].subagents.allowAgents; allowed: ${ids.join(", ")}`,
      );
    }
    let model: string | undefined;
    if (args.model) {
      try {
        model = resolveModelRef(args.model, config).ref;
      } catch (error) {
        return toolError(error instanceof ModelRefError ? error.message : String(error));
      }
    }
    if (args.label && (await getSessionByLabel(env, args.label, agentId)).length > 0) {
      return toolError(
        `label "${args.label}" is already used by a session of agent ${agentId}; choose another label`,
      );
    }
    const max = config.agents.defaults.subagents.maxConcurrent;
    const children = await listSessions(env, { spawnedBy: caller.sessionKey, archived: false, limit: 200 });
    const active = children.filter((c) => c.runStatus === "queued" || c.runStatus === "running").length;
    if (active >= max) {
      return toolError(
        `${active} sub-agents of this session are still running (agents.defaults.subagents.maxConcurrent is ${max}); wait for an announcement first`,
      );
    }

    const seed = callSeed(ctx);
    const childKey = subagentSessionKey(agentId, await stableUuid(`spawn:${seed}`));
    const runId = await stableUuid(`spawn-run:${seed}`);
    const requester = await callerEntry(ctx);
    const req: EnqueueRequest = {
      sessionKey: childKey,
      runId,
      trigger: "spawn",
      inputs: [
        {
          text: args.task,
          provenance: {
            kind: "inter_session",
            sourceSessionKey: caller.sessionKey,
            sourceTool: "sessions_spawn",
          },
          timestamp: Date.now(),
        },
      ],
      deliver: false,
      init: {
        agentId,
        kind: "other",
        chatType: "direct",
        channel: null,
        spawnedBy: caller.sessionKey,
        ...(args.label ? { label: args.label, displayName: args.label } : {}),
      },
      userInteraction: false,
      hasThread: false,
      spawn: {
        requesterKey: caller.sessionKey,
        requesterInit: await callerEntryInit(ctx),
        cleanup: args.cleanup ?? "keep",
        phase: "task",
        ...(requester?.deliveryContext ? { requesterRoute: requester.deliveryContext } : {}),
      },
    };
    if (model) req.model = model;
    if (args.runTimeoutSeconds) req.timeoutSeconds = args.runTimeoutSeconds;
    const result = await ctx.sessions.enqueue(req);
    if (!result.ok) return toolError(`could not start the sub-agent: ${result.message}`);
    return { status: "accepted", runId, childSessionKey: childKey };
  },
});
