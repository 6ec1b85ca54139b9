/**
 * Session visibility for the session tools (SPEC §8, §17 "Visibility answers"): which sessions
 * an acting session may see, as a yes/no for one row (`canSee`) and as index-bound listing
 * scopes (`visibilityScopes`) that select exactly the same rows. Pure: no I/O.
 *
 * Levels (`tools.sessions.visibility`):
 *   self   the caller's own key
 *   tree   + sessions whose `spawnedBy` is the caller (default)
 *   agent  + every session of the caller's agent
 *   all    + sessions of other agents that `tools.agentToAgent` allows
 * Sandboxed callers (`agents.list[].sandbox.mode`) are clamped to at most `tree` while
 * `agents.defaults.sandbox.sessionToolsVisibility` is `spawned` (the default).
 */
import type { SessionVisibility } from "../config/agents";
import type { Config } from "../config/schema";
import { DEFAULT_AGENT_ID } from "../keys/ids";
import { agentMainKey, UNKNOWN_KEY } from "../keys/session-key";

export type { SessionVisibility };

/** The acting session, as far as visibility is concerned. */
export interface VisibilityCaller {
  /** Canonical key of the acting session. */
  sessionKey: string;
  agentId: string;
}

/** The fields of a session entry that visibility reads. */
export interface VisibilityRow {
  key: string;
  agentId: string;
  spawnedBy: string | null;
}

/**
 * One index-bound slice of the session index (`keys` by primary key, `spawnedBy` and `agentId`
 * by their `(…, updatedAt)` indexes); `{}` is the whole index. A visible listing is the union of
 * its scopes, each queried on its own and merged, never a fetch-everything-then-filter.
 */
export interface VisibilityScope {
  keys?: string[];
  spawnedBy?: string;
  agentId?: string;
}

const LEVELS: readonly SessionVisibility[] = ["self", "tree", "agent", "all"];

function atMost(level: SessionVisibility, cap: SessionVisibility): SessionVisibility {
  return LEVELS.indexOf(level) > LEVELS.indexOf(cap) ? cap : level;
}

/** `non-main` sandboxes every session of the agent except its main key; `all` sandboxes all of them. */
export function isSandboxed(caller: VisibilityCaller, config: Config): boolean {
  const mode = config.agents.list.find((a) => a.id === caller.agentId)?.sandbox.mode ?? "off";
  if (mode === "all") return true;
  if (mode === "non-main") return caller.sessionKey !== agentMainKey(caller.agentId, config.session);
  return false;
}

export function effectiveVisibility(caller: VisibilityCaller, config: Config): SessionVisibility {
  const level = config.tools.sessions.visibility;
  if (isSandboxed(caller, config) && config.agents.defaults.sandbox.sessionToolsVisibility === "spawned") {
    return atMost(level, "tree");
  }
  return level;
}

function globToRegExp(pattern: string): RegExp {
  const escaped = pattern
    .trim()
    .toLowerCase()
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${escaped}$`);
}

/**
 * `tools.agentToAgent.allow` holds glob patterns (`*` any run, `?` one character); an empty list
 * allows any agent. "Patterns must match both agent ids" is read as OpenClaw does: each of the
 * two agents must be matched by some pattern of the list, so `["main", "research"]` lets those
 * two agents see each other. (Requiring one pattern to match both ids would make a list of plain
 * ids useless, since an agent always sees its own sessions anyway.)
 */
export function agentToAgentAllows(fromAgentId: string, toAgentId: string, config: Config): boolean {
  if (fromAgentId === toAgentId) return true;
  const a2a = config.tools.agentToAgent;
  if (!a2a.enabled) return false;
  if (a2a.allow.length === 0) return true;
  const patterns = a2a.allow.map(globToRegExp);
  const matched = (id: string) => patterns.some((re) => re.test(id));
  return matched(fromAgentId) && matched(toAgentId);
}

/** The agents an `all`-level caller may see sessions of: `"any"`, or a finite list (own agent first). */
export function visibleAgents(caller: VisibilityCaller, config: Config): "any" | string[] {
  const a2a = config.tools.agentToAgent;
  if (a2a.enabled && a2a.allow.length === 0) return "any";
  // Globs cannot be enumerated against the session index, so a restricted list is resolved
  // against the configured agents (the implicit `main` when none are): sessions of an agent that
  // is no longer configured are then hidden for `canSee` and listing alike.
  const configured = config.agents.list.length ? config.agents.list.map((a) => a.id) : [DEFAULT_AGENT_ID];
  const others = configured.filter(
    (id) => id !== caller.agentId && agentToAgentAllows(caller.agentId, id, config),
  );
  return [caller.agentId, ...others];
}

/**
 * Whether `caller` may see `row`. A row the caller may not see must be answered exactly like a
 * missing one (see resolve-session.ts).
 *
 * Decision: the caller's own spawned children stay visible at `tree` and above even when they
 * run under another agent that `tools.agentToAgent` does not allow. Spawning them was already
 * allowed by `agents.list[].subagents.allowAgents`, and hiding a child from the session that
 * spawned it would make its result unreadable (sessions_history) to the requester.
 */
export function canSee(caller: VisibilityCaller, row: VisibilityRow, config: Config): boolean {
  if (row.key === UNKNOWN_KEY) return false;
  if (row.key === caller.sessionKey) return true;
  const level = effectiveVisibility(caller, config);
  if (level === "self") return false;
  if (row.spawnedBy === caller.sessionKey) return true;
  if (level === "tree") return false;
  if (row.agentId === caller.agentId) return true;
  if (level === "agent") return false;
  const agents = visibleAgents(caller, config);
  return agents === "any" || agents.includes(row.agentId);
}

/**
 * The scopes whose union is exactly the set of rows `canSee` admits (the reserved `unknown` key
 * aside: listings exclude it themselves). Each scope is served by an index, so listing costs the
 * same at 100 or 100,000 sessions.
 */
export function visibilityScopes(caller: VisibilityCaller, config: Config): VisibilityScope[] {
  const self: VisibilityScope = { keys: [caller.sessionKey] };
  const children: VisibilityScope = { spawnedBy: caller.sessionKey };
  const level = effectiveVisibility(caller, config);
  if (level === "self") return [self];
  if (level === "tree") return [self, children];
  // From `agent` up, the caller's own row is in its agent's scope (a key's agent is the
  // caller's), so the key scope would only repeat it; children can run under other agents.
  if (level === "agent") return [children, { agentId: caller.agentId }];
  const agents = visibleAgents(caller, config);
  if (agents === "any") return [{}];
  return [children, ...agents.map((agentId) => ({ agentId }))];
}
