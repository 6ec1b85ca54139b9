/**
 * Session arguments of the session tools (SPEC §2, §6, §17): a key in any case, the alias `main`
 * (the caller's agent main key, `global` under scope global), or a `sessionId` from
 * sessions_list; then visibility. A session the caller may not see answers exactly like a
 * missing one, `session not found: <argument as given>`, so tools never leak existence.
 * Numeric arguments are integers given as JSON numbers (SPEC §6), clamped rather than refused.
 */
import {
  findSession,
  getSession,
  getSessionByLabel,
  getSessionBySessionId,
  type SessionRow,
} from "../db/queries";
import { fromToolKey, storedKeyForms, toToolKey } from "../keys/canonical-key";
import { agentMainKey } from "../keys/session-key";
import { canSee, type VisibilityRow } from "../policy/visibility";
import { entryInitOf } from "../runs/entry-init";
import type { EntryInit } from "../runs/types";
import { type ToolContext, type ToolFailure, toolError } from "./types";

/** A session the caller may see (`R`: what was read of it). */
export interface VisibleSession<R extends VisibilityRow = SessionRow> {
  row: R;
  /** How tools show the key: the caller's own main key (or `global`) is `main`. */
  displayKey: string;
}

type LookupContext = Pick<ToolContext, "caller" | "config" | "env">;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The one answer for a missing or hidden session. */
export function sessionNotFound(given: string): ToolFailure {
  return toolError(`session not found: ${given}`);
}

/** Display form of a stored key for this caller (`main` for its own main key / `global`). */
export function displayKeyFor(key: string, ctx: Pick<ToolContext, "caller" | "config">): string {
  return toToolKey(key, ctx.caller.agentId, ctx.config.session);
}

/**
 * Canonical key for a key argument (`main`/`global` → the caller's main key), or an error for a
 * malformed key. Pure; says nothing about whether the session exists.
 */
export function canonicalToolKey(
  given: string,
  ctx: Pick<ToolContext, "caller" | "config">,
): { key: string } | ToolFailure {
  try {
    return { key: fromToolKey(given, ctx.caller.agentId, ctx.config.session) };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return toolError(`${reason}; pass a key from sessions_list, \`main\`, or a sessionId`);
  }
}

function visible<R extends VisibilityRow>(
  row: R | undefined,
  given: string,
  ctx: LookupContext,
): VisibleSession<R> | ToolFailure {
  if (!row || !canSee(ctx.caller, row, ctx.config)) return sessionNotFound(given);
  return { row, displayKey: displayKeyFor(row.key, ctx) };
}

/**
 * Resolves a session argument (key, `main`, or sessionId) to a session the caller may see.
 * Missing and hidden sessions give the same `session not found: <given>` error.
 */
export async function findVisibleSession(
  arg: string,
  ctx: LookupContext,
): Promise<VisibleSession | ToolFailure> {
  const given = arg.trim();
  if (!given) return toolError("the session argument is empty; pass a session key, `main`, or a sessionId");
  const canonical = canonicalToolKey(given, ctx);
  if ("status" in canonical) return canonical;
  let row = await findSession(ctx.env, storedKeyForms(canonical.key));
  // Keys are never bare UUIDs, so a UUID that names no key is looked up as a sessionId.
  if (!row && UUID.test(given)) row = await getSessionBySessionId(ctx.env, given.toLowerCase());
  return visible(row, given, ctx);
}

/**
 * findVisibleSession that also reads something of the session: by its key in the same D1 round
 * trip as the session itself (`byKey`), or, when the argument names a sessionId, after it
 * (`byRow`). What `byKey` read of a session the caller may not see is dropped unseen.
 */
export async function findVisibleSessionWith<T, R extends VisibilityRow>(
  arg: string,
  ctx: LookupContext,
  read: {
    /** `R`: what it reads of the session, at least what visibility needs. */
    byKey(key: string): Promise<{ row: R | undefined; extra: T }>;
    byRow(row: SessionRow): Promise<T>;
  },
): Promise<(VisibleSession<R | SessionRow> & { extra: T }) | ToolFailure> {
  const given = arg.trim();
  if (!given) return toolError("the session argument is empty; pass a session key, `main`, or a sessionId");
  const canonical = canonicalToolKey(given, ctx);
  if ("status" in canonical) return canonical;
  // The key as given, then its lowercase form (storedKeyForms); the second read only on a miss.
  for (const key of storedKeyForms(canonical.key)) {
    const { row, extra } = await read.byKey(key);
    if (row) {
      const found = visible(row, given, ctx);
      return "status" in found ? found : { ...found, extra };
    }
  }
  const byId = UUID.test(given) ? await getSessionBySessionId(ctx.env, given.toLowerCase()) : undefined;
  const found = visible(byId, given, ctx);
  return "status" in found ? found : { ...found, extra: await read.byRow(found.row) };
}

/**
 * Resolves a session by its label (unique per agent; `agentId` defaults to the caller's agent),
 * with the same visibility rule and the same not-found answer.
 */
export async function findVisibleSessionByLabel(
  label: string,
  agentId: string | undefined,
  ctx: LookupContext,
): Promise<VisibleSession | ToolFailure> {
  const given = label.trim();
  const owner = agentId ?? ctx.caller.agentId;
  const [row] = await getSessionByLabel(ctx.env, given, owner);
  return visible(row, agentId ? `label "${given}" of agent ${owner}` : `label "${given}"`, ctx);
}

/**
 * The acting session's entry: the one the caller passed (a run passes its own), else read from
 * D1 once and kept on the caller (an HTTP caller passes none: most tools never need it).
 */
export async function callerEntry(ctx: LookupContext): Promise<SessionRow | undefined> {
  const { caller } = ctx;
  caller.entry ??= await getSession(ctx.env, caller.sessionKey);
  return caller.entry;
}

/**
 * Entry fields for the session a tool acts for, so that a flow reaching it later (a reply round,
 * a sub-agent announcement) can create it if it has never run.
 */
export async function callerEntryInit(ctx: LookupContext): Promise<EntryInit> {
  const { caller, config } = ctx;
  const entry = await callerEntry(ctx);
  if (entry) return entryInitOf(entry);
  const main = caller.sessionKey === agentMainKey(caller.agentId, config.session);
  return { agentId: caller.agentId, kind: main ? "main" : "other", chatType: "direct", channel: null };
}
