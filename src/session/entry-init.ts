/** Entry fields (`EntryInit`) for enqueueing into a session: from its row, or for a tool's caller. */
import type { Config } from "../config/schema";
import { getSession, type SessionRow } from "../db/queries";
import { agentMainKey } from "../keys/session-key";
import type { EntryInit } from "./types";

export function entryInitOf(
  row: Pick<SessionRow, "agentId" | "kind" | "chatType" | "channel" | "spawnedBy">,
): EntryInit {
  const init: EntryInit = {
    agentId: row.agentId,
    kind: row.kind,
    chatType: (row.chatType ?? "direct") as EntryInit["chatType"],
    channel: row.channel,
  };
  if (row.spawnedBy) init.spawnedBy = row.spawnedBy;
  return init;
}

/**
 * Entry fields for the session a tool acts for, so that a flow reaching it later (a reply round,
 * a sub-agent announcement) can create it if it has never run.
 */
export async function callerEntryInit(ctx: {
  caller: { sessionKey: string; agentId: string; entry?: SessionRow };
  config: Config;
  env: Env;
}): Promise<EntryInit> {
  const { caller, config, env } = ctx;
  const entry = caller.entry ?? (await getSession(env, caller.sessionKey));
  if (entry) return entryInitOf(entry);
  const main = caller.sessionKey === agentMainKey(caller.agentId, config.session);
  return { agentId: caller.agentId, kind: main ? "main" : "other", chatType: "direct", channel: null };
}

/** A session entry as it is first created: the init's fields, counters zero, nothing else set. */
export function newSessionRow(
  sessionKey: string,
  init: EntryInit,
  now: number,
  sessionId: string,
): SessionRow {
  return {
    key: sessionKey,
    agentId: init.agentId,
    sessionId,
    kind: init.kind,
    chatType: init.chatType,
    channel: init.channel,
    displayName: init.displayName ?? null,
    label: init.label ?? null,
    subject: init.subject ?? null,
    createdAt: now,
    updatedAt: now,
    sessionStartedAt: now,
    lastInteractionAt: null,
    model: null,
    modelOverride: null,
    contextTokens: 0,
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    compactionCount: 0,
    thinkingLevel: null,
    verboseLevel: null,
    systemSent: false,
    abortedLastRun: false,
    sendPolicy: null,
    lastChannel: null,
    lastTo: null,
    lastAccountId: null,
    lastThreadId: null,
    deliveryContext: null,
    origin: null,
    spawnedBy: init.spawnedBy ?? null,
    archivedAt: null,
    runStatus: "idle",
    expiresAt: null,
  };
}
