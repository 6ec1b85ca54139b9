/**
 * What happens after a run that belongs to a flow (SPEC §6, §17 "Agent-to-agent"):
 * - sessions_send: primary run → reply-back rounds alternating requester/target (at most
 *   `maxRounds`, `REPLY_SKIP` or an empty reply ends them) → announce step in the target
 *   (`ANNOUNCE_SKIP` stays silent).
 * - sessions_spawn: task run → announce step in the child → normalized announcement posted
 *   to the requester.
 * Pure planning: the SessionActor enqueues what these functions return, with run ids derived
 * from the flow so that a repeated finalization enqueues nothing twice.
 */
import type { FlowMeta, RunOutcome, SpawnMeta } from "../../runs/types";
import { formatDuration, formatTokens, formatUsd } from "../../views/format";

export const REPLY_SKIP = "REPLY_SKIP";
export const ANNOUNCE_SKIP = "ANNOUNCE_SKIP";

export interface NextRun {
  sessionKey: string;
  /** Seed for the deterministic run id. */
  idSeed: string;
  trigger: "a2a_reply" | "announce";
  text: string;
  flow: FlowMeta;
  deliver: boolean;
}

function isSkip(reply: string | undefined, token: string): boolean {
  const r = (reply ?? "").trim();
  return r === "" || r === token;
}

function announceStep(flow: FlowMeta, latest: string | undefined): NextRun {
  const lines = [
    `[agent-to-agent announce] The exchange started by ${flow.requesterKey} has ended.`,
    "",
    `Original request: ${flow.originalMessage}`,
    `Your first reply: ${flow.firstReply ?? "(none)"}`,
    `Latest reply: ${latest ?? flow.firstReply ?? "(none)"}`,
    "",
    `Write the message to post to this session's chat about it, or reply exactly ${ANNOUNCE_SKIP} to stay silent.`,
  ];
  return {
    sessionKey: flow.targetKey,
    idSeed: `${flow.flowId}:announce`,
    trigger: "announce",
    text: lines.join("\n"),
    flow: { ...flow, phase: "announce", ...(latest !== undefined ? { latestReply: latest } : {}) },
    deliver: true,
  };
}

function replyRound(flow: FlowMeta, round: number, fromKey: string, reply: string): NextRun {
  const to = fromKey === flow.requesterKey ? flow.targetKey : flow.requesterKey;
  return {
    sessionKey: to,
    idSeed: `${flow.flowId}:round:${round}`,
    trigger: "a2a_reply",
    text: [
      `[reply from ${fromKey}]`,
      reply,
      "",
      `(Agent-to-agent exchange, round ${round} of at most ${flow.maxRounds}. Reply to continue, or reply exactly ${REPLY_SKIP} to end it.)`,
    ].join("\n"),
    flow: { ...flow, phase: "reply", round, latestReply: reply },
    deliver: false,
  };
}

/** The next step of a sessions_send exchange after a run of it ended in `sessionKey`. */
export function nextExchangeStep(
  flow: FlowMeta,
  sessionKey: string,
  outcome: RunOutcome,
): NextRun | undefined {
  const reply = outcome.status === "ok" ? (outcome.reply ?? "").trim() : undefined;
  switch (flow.phase) {
    case "primary": {
      if (reply === undefined) return undefined;
      const withFirst: FlowMeta = { ...flow, firstReply: reply, latestReply: reply };
      if (flow.requesterKey === flow.targetKey || flow.maxRounds <= 0 || isSkip(reply, REPLY_SKIP)) {
        return announceStep(withFirst, reply);
      }
      return replyRound(withFirst, 1, sessionKey, reply);
    }
    case "reply": {
      if (reply === undefined || isSkip(reply, REPLY_SKIP) || flow.round >= flow.maxRounds) {
        const latest = reply !== undefined && !isSkip(reply, REPLY_SKIP) ? reply : flow.latestReply;
        return announceStep(flow, latest);
      }
      return replyRound(flow, flow.round + 1, sessionKey, reply);
    }
    case "announce":
      return undefined;
  }
}

/** Whether the announce step's reply is to be delivered. */
export function announceReply(outcome: RunOutcome): string | undefined {
  if (outcome.status !== "ok") return undefined;
  return isSkip(outcome.reply, ANNOUNCE_SKIP) ? undefined : (outcome.reply ?? "").trim();
}

// ---------------------------------------------------------------------------------------------
// Sub-agent announcements

export function spawnAnnouncePrompt(task: NonNullable<SpawnMeta["task"]>): string {
  return [
    `[sub-agent announce] Your task run ended with status ${task.status}.`,
    task.error ? `Error: ${task.error}` : "",
    "",
    "Write the announcement for the session that spawned you: the result, in a few lines.",
    `Reply exactly ${ANNOUNCE_SKIP} to stay silent.`,
  ]
    .filter((l, i) => l !== "" || i === 2)
    .join("\n");
}

export interface AnnouncementInput {
  task: NonNullable<SpawnMeta["task"]>;
  announce: RunOutcome;
  childKey: string;
  childSessionId: string;
  transcriptPath: string;
}

/**
 * The normalized announcement (SPEC §6): Status from the runtime outcome (never model text);
 * Result from the announce reply, else the task's final reply, else its latest tool result.
 * Returns undefined when the announce step chose to stay silent.
 */
export function buildAnnouncement(a: AnnouncementInput): string | undefined {
  if (a.announce.status === "ok" && (a.announce.reply ?? "").trim() === ANNOUNCE_SKIP) return undefined;
  const announced = announceReply(a.announce);
  const result = announced || a.task.reply?.trim() || a.task.lastToolResult?.trim() || "(no result)";
  const notes: string[] = [];
  if (a.task.error) notes.push(a.task.error);
  if (a.announce.status !== "ok" && a.announce.error) notes.push(`announce step: ${a.announce.error}`);
  const tokens = a.task.inputTokens + a.task.outputTokens;
  const lines = [`Status: ${a.task.status}`, `Result: ${result}`];
  if (notes.length) lines.push(`Notes: ${notes.join("; ")}`);
  lines.push(
    `Stats: runtime ${formatDuration(a.task.endedAt - a.task.startedAt)} • tokens ${formatTokens(tokens)} (in ${formatTokens(
      a.task.inputTokens,
    )} / out ${formatTokens(a.task.outputTokens)})${
      typeof a.task.costUsd === "number" ? ` • est ${formatUsd(a.task.costUsd)}` : ""
    } • sessionKey ${a.childKey} • sessionId ${a.childSessionId} • transcript ${a.transcriptPath}`,
  );
  return lines.join("\n");
}
