/**
 * Entry fields (`EntryInit`) for enqueueing into a session: taken from its row when it exists,
 * or derived from its key when a request (an operator message, a hook) creates it.
 */
import type { Config } from "../config/schema";
import type { SessionRow } from "../db/queries";
import { defaultAgentId } from "../keys/agent-binding";
import { agentIdOfKey, chatTypeOfKey, sessionKindOf } from "../keys/session-key";
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

/** Entry fields for a session a request creates by naming its key (agent, kind, chat type, channel). */
export function initFromKey(key: string, config: Config): EntryInit {
  const agentId = agentIdOfKey(key) ?? defaultAgentId(config.agents.list);
  const kind = sessionKindOf(key, config.session);
  const { chatType } = chatTypeOfKey(key);
  const segments = key.split(":");
  const marker = segments.findIndex((s) => s === "group" || s === "channel" || s === "dm");
  const channel = marker > 2 ? (segments[2] ?? null) : null;
  return { agentId, kind, chatType, channel };
}
