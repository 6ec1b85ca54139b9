/**
 * `sessions_send` (SPEC §6): sends a message into another session as an inter-session user
 * message, then either returns at once (`timeoutSeconds: 0`) or waits in the target's actor for
 * the run to end. The reply-back rounds and the announce step that follow are driven by the
 * SessionActors from the run's flow metadata, so they survive restarts and also happen when the
 * wait timed out.
 */
import { z } from "zod";
import { stableUuid } from "../auth/signature";
import { toToolKey } from "../keys/canonical-key";
import { normalizeAgentId } from "../keys/ids";
import { entryInitOf } from "../runs/entry-init";
import type { EnqueueRequest, WaitResult } from "../runs/types";
import {
  callerEntry,
  callerEntryInit,
  findVisibleSession,
  findVisibleSessionByLabel,
} from "./resolve-session";
import { callSeed, defineTool, isToolFailure, type ToolContext, toolError } from "./types";

const MAX_WAIT_SECONDS = 600;
/**
 * The longest message, in characters: it becomes one transcript message in the target, and
 * stays well inside the transcript's per-message text bound (64 KB) for ordinary text.
 */
export const MAX_MESSAGE_CHARS = 32_000;

const got = (input: unknown) => (typeof input === "string" ? ` (got ${input.length})` : "");

export const sessionsSendTool = defineTool({
  name: "sessions_send",
  description:
    "Send a message to another session (by sessionKey, or by label + optional agentId) and, unless timeoutSeconds is 0, wait for its reply. " +
    "After the reply, the two sessions may exchange a few more messages (reply REPLY_SKIP to end that) and the target may announce the outcome in its chat.",
  schema: z
    .strictObject({
      sessionKey: z.string().trim().min(1).optional().describe("Target session key, `main`, or a sessionId."),
      label: z.string().trim().min(1).optional().describe("Target session label (instead of sessionKey)."),
      agentId: z
        .string()
        .trim()
        .min(1)
        .optional()
        .describe("Agent of the labelled session (default: yours)."),
      message: z
        .string()
        .trim()
        .min(1, { error: "must not be empty" })
        .max(MAX_MESSAGE_CHARS, {
          error: (iss) =>
            `must be at most ${MAX_MESSAGE_CHARS} characters${got(iss.input)}; send a shorter message, or several`,
        })
        .describe(`The message to send (1-${MAX_MESSAGE_CHARS} characters).`),
      timeoutSeconds: z
        .number()
        .min(0)
        .max(MAX_WAIT_SECONDS)
        .optional()
        .describe("Seconds to wait for the reply (default 30); 0 sends without waiting."),
      mode: z
        .enum(["followup", "steer", "notify"])
        .optional()
        .describe(
          "followup (default): a run of its own; steer: join the target's running turn (status steered), " +
            "else as followup; notify: only add the message to its transcript (status noted), no run.",
        ),
      watch: z
        .boolean()
        .optional()
        .describe(
          "Watch the target: when a person changes it (a message, a reset, a setting), your next turn gets a note.",
        ),
    })
    .refine((a) => (a.sessionKey === undefined) !== (a.label === undefined), {
      message: "pass exactly one of `sessionKey` or `label`",
    }),
  async execute(args, ctx) {
    const result = await send(args, ctx);
    if (!args.watch || isToolFailure(result) || !("sessionKey" in result)) return result;
    // Registered when this run ends (session/run/lifecycle.ts), from the version seen now.
    const target = await findVisibleSession(String(result.sessionKey), ctx);
    if ("status" in target) return result;
    const { stateVersion } = await ctx.sessions.stateChanges(target.row.key, undefined);
    return { ...result, watched: true, watchKey: target.row.key, watchVersion: stateVersion };
  },
});

type SendArgs = {
  sessionKey?: string | undefined;
  label?: string | undefined;
  agentId?: string | undefined;
  message: string;
  timeoutSeconds?: number | undefined;
  mode?: "followup" | "steer" | "notify" | undefined;
};

async function send(args: SendArgs, ctx: ToolContext) {
  const { caller, config, sessions } = ctx;
  const target = args.sessionKey
    ? await findVisibleSession(args.sessionKey, ctx)
    : await findVisibleSessionByLabel(
        args.label ?? "",
        args.agentId ? normalizeAgentId(args.agentId) : undefined,
        ctx,
      );
  if ("status" in target) return target;
  const row = target.row;
  const display = toToolKey(row.key, caller.agentId, config.session);

  const hop = caller.flow ? caller.flow.hop + 1 : 1;
  const maxHops = config.session.agentToAgent.maxHops;
  if (hop > maxHops) {
    return toolError(
      `this message would be hop ${hop} of an agent-to-agent chain, over session.agentToAgent.maxHops (${maxHops}); answer without messaging another session`,
    );
  }
  const seed = callSeed(ctx);
  const flowId = caller.flow?.flowId ?? (await stableUuid(`flow:${seed}`));
  const runId = await stableUuid(`send:${seed}`);
  const self = row.key === caller.sessionKey;
  const source = await callerEntry(ctx);
  const provenance = {
    kind: "inter_session" as const,
    sourceSessionKey: caller.sessionKey,
    ...(source?.lastChannel || source?.channel
      ? { sourceChannel: source.lastChannel ?? source.channel ?? undefined }
      : {}),
    sourceTool: "sessions_send",
  };
  if (args.mode === "notify") {
    const noted = await sessions.note(row.key, { id: `${runId}:note`, text: args.message, provenance });
    if (!noted.ok) return toolError(`could not send to ${display}: ${noted.message}`);
    return { status: "noted", sessionKey: display };
  }
  const req: EnqueueRequest = {
    sessionKey: row.key,
    runId,
    trigger: "send",
    inputs: [{ text: args.message, provenance, timestamp: Date.now() }],
    deliver: false,
    init: entryInitOf(row),
    userInteraction: false,
    hasThread: false,
    flow: {
      flowId,
      hop,
      requesterKey: caller.sessionKey,
      targetKey: row.key,
      phase: "primary",
      round: 0,
      maxRounds: self ? 0 : config.session.agentToAgent.maxPingPongTurns,
      originalMessage: args.message,
      requesterInit: await callerEntryInit(ctx),
    },
  };
  const timeoutSeconds = args.timeoutSeconds ?? 30;
  // Announce the wait before sending, so two sessions sending to each other at the same
  // moment always see each other (at worst neither waits; never both).
  const release = timeoutSeconds > 0 && !self ? ctx.onWait?.(row.key) : undefined;
  try {
    const queued = await sessions.enqueue(args.mode === "steer" ? { ...req, steer: true } : req);
    if (!queued.ok) return toolError(`could not send to ${display}: ${queued.message}`);
    // Joined the target's running turn: no run of its own to wait for.
    if (queued.status === "steered") return { status: "steered", runId: queued.runId, sessionKey: display };
    if (timeoutSeconds === 0) return { runId, status: "accepted", sessionKey: display };
    if (self) {
      return {
        runId,
        status: "accepted",
        sessionKey: display,
        note: "the target is this session: its run starts after the current one, so this call does not wait",
      };
    }
    if (queued.waitingOn?.includes(caller.sessionKey)) {
      return {
        runId,
        status: "accepted",
        sessionKey: display,
        note: "the target session is itself waiting on this session; not waiting, to avoid a deadlock",
      };
    }
    // The wait ends `timeoutSeconds` after the model asked, also when a restart repeats the
    // call (the message is not sent twice: its run id derives from the call): past that, the
    // target is asked once for what it has now.
    const waited = ctx.calledAt === undefined ? 0 : Math.max(0, Date.now() - ctx.calledAt);
    const result = await sessions.waitForRun(
      row.key,
      runId,
      Math.max(0, Math.round(timeoutSeconds * 1000) - waited),
    );
    if ("ok" in result) return toolError(result.message);
    return waitAnswer(result, display, timeoutSeconds);
  } finally {
    release?.();
  }
}

/** The tool's answer for a finished (or timed-out) wait (SPEC §6). */
function waitAnswer(result: WaitResult, sessionKey: string, timeoutSeconds: number) {
  const { runId } = result;
  if (result.status === "ok") return { runId, status: "ok", reply: result.reply ?? "", sessionKey };
  if (result.status === "timeout" && result.runStatus !== "timeout") {
    return {
      runId,
      status: "timeout",
      error: `no reply within ${timeoutSeconds}s; the run continues — read it later with sessions_history`,
      runStatus: result.runStatus,
      sessionKey,
    };
  }
  return {
    runId,
    status: "error",
    error: result.error ?? `run ended with status ${result.runStatus}`,
    sessionKey,
  };
}
