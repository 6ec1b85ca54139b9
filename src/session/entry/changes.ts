/**
 * The operator's edits of a session's entry outside runs (`sessions.patch`, `sessions.reset`):
 * the entry in the actor's storage and its D1 row, changed together.
 */
import type { Config } from "../../config/schema";
import type { SessionRow } from "../../db/queries";
import type { ActorError } from "../../runs/types";
import type { ActorRecords } from "../d1/records";
import type { ActorStore } from "../storage/store";
import { entryExpiry, resetEntry } from "./rules";

export type EntryPatch = Partial<
  Pick<SessionRow, "label" | "modelOverride" | "thinkingLevel" | "verboseLevel" | "sendPolicy">
>;

/** What the operator's edits use of the actor. */
export interface EntryHost {
  readonly config: Config;
  readonly store: Pick<ActorStore, "entry" | "saveEntry" | "setYielding" | "signals" | "setWatching">;
  readonly records: Pick<ActorRecords, "entryPatched" | "sessionStarted">;
}

export async function patchEntry(
  a: EntryHost,
  sessionKey: string,
  fields: EntryPatch,
): Promise<{ ok: true; entry: SessionRow } | ActorError> {
  const entry = a.store.entry();
  if (!entry) return { ok: false, code: "NOT_FOUND", message: `session not found: ${sessionKey}` };
  const updatedAt = Date.now();
  if ((await a.records.entryPatched({ ...entry, ...fields, updatedAt })) === "label-taken") {
    return {
      ok: false,
      code: "CONFLICT",
      message: `label "${fields.label}" is already used by another session of agent ${entry.agentId}`,
    };
  }
  // Re-read: a run may have updated counters while D1 was being written.
  const stateVersion = a.store.signals.record({
    kind: "settings_changed",
    actor: "human",
    at: updatedAt,
    summary: `changed: ${Object.keys(fields).join(", ")}`,
  });
  const merged = { ...(a.store.entry() ?? entry), ...fields, updatedAt, stateVersion };
  a.store.saveEntry(merged);
  return { ok: true, entry: merged };
}

/** A new sessionId under the key, its settings kept. */
export async function resetSession(
  a: EntryHost,
  sessionKey: string,
): Promise<{ key: string; sessionId: string } | ActorError> {
  const entry = a.store.entry();
  if (!entry) return { ok: false, code: "NOT_FOUND", message: `session not found: ${sessionKey}` };
  const now = Date.now();
  const next = resetEntry(entry, now);
  next.expiresAt = entryExpiry(next, a.config);
  next.stateVersion = a.store.signals.record({
    kind: "reset",
    actor: "human",
    at: now,
    summary: "reset by an operator",
  });
  a.store.saveEntry(next);
  // A yield belongs to the conversation it was made in (SPEC §20): the new one starts without it.
  a.store.setYielding(undefined);
  a.store.setWatching([]);
  await a.records.sessionStarted(next, now);
  return { key: next.key, sessionId: next.sessionId };
}
