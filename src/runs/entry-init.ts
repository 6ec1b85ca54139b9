/** Entry fields (`EntryInit`) for enqueueing into an existing session, taken from its row. */
import type { SessionRow } from "../db/queries";
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
