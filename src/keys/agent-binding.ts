/**
 * Which agent handles an inbound message (SPEC §2): the first binding whose match fits, else the
 * agent marked default, else the first agent, else "main". Pure: no I/O.
 */

import { DEFAULT_AGENT_ID, normalizeAccountId, normalizeAgentId, normalizeChannel } from "./ids";
import { stripLegacyGroupPrefix } from "./session-key";

type PeerKind = "direct" | "group" | "channel";

export interface Binding {
  agentId: string;
  match: { channel?: string; accountId?: string; peer?: { kind: PeerKind; id: string } };
}

export interface AgentRef {
  id: string;
  default?: boolean;
}

export interface BindingInput {
  channel: string;
  accountId: string;
  peer: { kind: PeerKind; id: string };
}

// Bindings are written by hand, so peer ids compare case-insensitively on every channel, and a
// legacy "group:<id>" on either side still matches the bare id.
function peerIdForMatch(kind: PeerKind, id: string): string {
  const trimmed = id.trim();
  return (kind === "direct" ? trimmed : stripLegacyGroupPrefix(trimmed)).toLowerCase();
}

function bindingFits(match: Binding["match"], input: BindingInput): boolean {
  if (match.channel !== undefined && normalizeChannel(match.channel) !== normalizeChannel(input.channel)) {
    return false;
  }
  if (
    match.accountId !== undefined &&
    normalizeAccountId(match.accountId) !== normalizeAccountId(input.accountId)
  ) {
    return false;
  }
  if (match.peer !== undefined) {
    if (match.peer.kind !== input.peer.kind) return false;
    if (peerIdForMatch(match.peer.kind, match.peer.id) !== peerIdForMatch(input.peer.kind, input.peer.id)) {
      return false;
    }
  }
  return true;
}

/** The agent marked default, else the first agent, else "main". */
export function defaultAgentId(agents: readonly AgentRef[]): string {
  const fallback = agents.find((a) => a.default === true) ?? agents[0];
  return fallback ? normalizeAgentId(fallback.id) : DEFAULT_AGENT_ID;
}

export function selectAgentId(input: BindingInput, bindings: Binding[], agents: AgentRef[]): string {
  const bound = bindings.find((b) => bindingFits(b.match, input));
  return bound ? normalizeAgentId(bound.agentId) : defaultAgentId(agents);
}
