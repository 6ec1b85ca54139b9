/**
 * Session keys (SPEC §2, §17 "Keys, more."): their shapes, how an inbound message, a scheduled
 * job, a webhook, a node bridge or a sub-agent maps to a canonical session key, and what a key
 * says about itself (agent, kind, chat type). Pure: no I/O. The id rules: ids.ts; a key a
 * caller types made canonical: canonical-key.ts.
 *
 * Key shapes, after `agent:<agentId>:`:
 *   <mainKey>[:thread:<id>]                            direct chat, dmScope "main"
 *   dm:<peerId>[:thread:<id>]                          direct chat, "per-peer"
 *   <channel>:dm:<peerId>[:thread:<id>]                direct chat, "per-channel-peer"
 *   <channel>:<accountId>:dm:<peerId>[:thread:<id>]    direct chat, "per-account-channel-peer"
 *   <channel>:group:<groupId>[:topic:<id>|:thread:<id>]
 *   <channel>:channel:<groupId>[:thread:<id>]
 *   subagent:<uuid>
 * and the agent-less `global`, `unknown`, `cron:<jobId>`, `hook:<uuid>`, `node-<nodeId>`.
 * Everything is lowercase except peer, group, thread and topic ids from a channel listed in
 * `caseSensitiveChannels`, which keep their case in every key shape; an identityLinks name is
 * always lowercase.
 */
import {
  isCaseSensitiveChannel,
  linkedPeerId,
  normalizeAccountId,
  normalizeAgentId,
  normalizeChannel,
  normalizeMainKey,
  normalizePeerId,
} from "./ids";

export type DmScope = "main" | "per-peer" | "per-channel-peer" | "per-account-channel-peer";
export type SessionKind = "main" | "group" | "cron" | "hook" | "node" | "other";
export type InboundChatType = "direct" | "group" | "channel";

export interface SessionKeyConfig {
  scope: "per-sender" | "global";
  dmScope: DmScope;
  mainKey: string;
  /** canonical name -> ["telegram:123", "discord:987", "bare-id"] */
  identityLinks: Record<string, string[]>;
  /** Channels whose peer/group/thread ids keep their case, e.g. ["signal", "matrix"]. */
  caseSensitiveChannels: string[];
}

export interface InboundKeyInput {
  agentId: string;
  channel: string;
  accountId?: string;
  chatType: InboundChatType;
  from: string;
  groupId?: string;
  threadId?: string;
  topic?: boolean;
}

export const GLOBAL_KEY = "global";
export const UNKNOWN_KEY = "unknown";

/**
 * The case rule for a key with no channel segment (per-peer DMs, threads under the main key),
 * when it is parsed again. Its ids were built with the rule of whatever channel the message came
 * from, which the key no longer says; so they keep the case they have whenever some channel keeps
 * case (a stored key then comes back unchanged), and are lowercased when none does.
 */
export function channelLessKeepsCase(cfg: SessionKeyConfig): boolean {
  return cfg.caseSensitiveChannels.length > 0;
}

/** The bound of the memo of main keys (cleared when full). */
const MAIN_KEYS_MAX = 2048;

/** Main keys already computed, per key config and agent id (tools compare every listed key with it). */
const mainKeys = new WeakMap<SessionKeyConfig, Map<string, string>>();

export function agentMainKey(agentId: string, cfg: SessionKeyConfig): string {
  if (cfg.scope === "global") return GLOBAL_KEY;
  let known = mainKeys.get(cfg);
  if (!known) {
    known = new Map();
    mainKeys.set(cfg, known);
  }
  let key = known.get(agentId);
  if (key === undefined) {
    key = `agent:${normalizeAgentId(agentId)}:${normalizeMainKey(cfg.mainKey)}`;
    if (known.size >= MAIN_KEYS_MAX) known.clear();
    known.set(agentId, key);
  }
  return key;
}

function requirePeerId(raw: string | undefined, keepCase: boolean, field: string): string {
  const id = normalizePeerId(raw ?? "", keepCase);
  if (!id) throw new Error(`inbound message needs a non-empty \`${field}\` to build its session key`);
  return id;
}

/** Strips the legacy `group:` wrapper some connectors still put on group ids. */
export function stripLegacyGroupPrefix(groupId: string): string {
  const trimmed = groupId.trim();
  return /^group:/i.test(trimmed) ? trimmed.slice("group:".length) : trimmed;
}

export function resolveSessionKey(input: InboundKeyInput, cfg: SessionKeyConfig): string {
  const agentId = normalizeAgentId(input.agentId);
  const channel = normalizeChannel(input.channel);
  const keepCase = isCaseSensitiveChannel(channel, cfg);
  const threadId = input.threadId?.trim() ? input.threadId : undefined;

  if (input.chatType === "direct") {
    // Under scope "global" every direct chat of the agent shares one key, threads included:
    // the key has no agent or channel to hang a thread on, and tools alias exactly `global`.
    if (cfg.scope === "global") return GLOBAL_KEY;
    const base = directBaseKey(input, agentId, channel, keepCase, cfg);
    return threadId === undefined ? base : `${base}:thread:${requirePeerId(threadId, keepCase, "threadId")}`;
  }

  // The chat type in the message decides group vs channel; the legacy prefix is only a wrapper.
  const groupId = requirePeerId(stripLegacyGroupPrefix(input.groupId ?? ""), keepCase, "groupId");
  const base = `agent:${agentId}:${channel}:${input.chatType}:${groupId}`;
  if (threadId === undefined) return base;
  // Forum topics exist only in groups (Telegram); anything else threaded is a thread.
  const threadMarker = input.topic === true && input.chatType === "group" ? "topic" : "thread";
  return `${base}:${threadMarker}:${requirePeerId(threadId, keepCase, "threadId")}`;
}

function directBaseKey(
  input: InboundKeyInput,
  agentId: string,
  channel: string,
  keepCase: boolean,
  cfg: SessionKeyConfig,
): string {
  if (cfg.dmScope === "main") return agentMainKey(agentId, cfg);
  const linked = linkedPeerId(channel, input.from, cfg);
  switch (cfg.dmScope) {
    case "per-peer":
      return `agent:${agentId}:dm:${linked ?? requirePeerId(input.from, keepCase, "from")}`;
    case "per-channel-peer":
      return `agent:${agentId}:${channel}:dm:${linked ?? requirePeerId(input.from, keepCase, "from")}`;
    case "per-account-channel-peer": {
      const accountId = normalizeAccountId(input.accountId);
      const peer = linked ?? requirePeerId(input.from, keepCase, "from");
      return `agent:${agentId}:${channel}:${accountId}:dm:${peer}`;
    }
  }
}

export function cronSessionKey(jobId: string): string {
  const id = normalizePeerId(jobId, false);
  if (!id) throw new Error("cron job id is empty");
  return `cron:${id}`;
}

export function hookSessionKey(id?: string): string {
  const given = normalizePeerId(id ?? "", false);
  return `hook:${given || crypto.randomUUID()}`;
}

export function nodeSessionKey(nodeId: string): string {
  const id = normalizePeerId(nodeId, false);
  if (!id) throw new Error("node id is empty");
  return `node-${id}`;
}

export function subagentSessionKey(agentId: string, id?: string): string {
  const given = normalizePeerId(id ?? "", false);
  return `agent:${normalizeAgentId(agentId)}:subagent:${given || crypto.randomUUID()}`;
}

type Layout =
  | { kind: "chat"; marker: "dm" | "group" | "channel"; channel?: string; accountId?: string; idAt: number }
  | { kind: "subagent" }
  | { kind: "opaque" };

function marker(segment: string | undefined): string | undefined {
  const lowered = segment?.toLowerCase();
  // ":direct:" is the historical spelling of ":dm:".
  return lowered === "direct" ? "dm" : lowered;
}

/**
 * Reads the shape of the segments after `agent:<id>:`. Marker positions are fixed, so a peer
 * id that happens to be "group" or "thread" is never mistaken for a marker.
 */
export function layoutOf(rest: readonly string[]): Layout {
  const [first, second, third] = rest;
  if (rest.length >= 2 && marker(first) === "dm") return { kind: "chat", marker: "dm", idAt: 1 };
  if (rest.length >= 2 && marker(first) === "subagent") return { kind: "subagent" };
  const m1 = marker(second);
  if (rest.length >= 3 && (m1 === "dm" || m1 === "group" || m1 === "channel")) {
    return { kind: "chat", marker: m1, channel: first, idAt: 2 };
  }
  if (rest.length >= 4 && marker(third) === "dm") {
    return { kind: "chat", marker: "dm", channel: first, accountId: second, idAt: 3 };
  }
  return { kind: "opaque" };
}

/** Segments after `agent:<id>:`, or undefined for an agent-less key. Never throws. */
function agentParts(key: string): { agentId: string; rest: string[] } | undefined {
  const segments = key.trim().split(":");
  if ((segments[0] ?? "").toLowerCase() !== "agent" || segments.length < 3) return undefined;
  const id = segments[1]?.trim();
  if (!id) return undefined;
  return { agentId: normalizeAgentId(id), rest: segments.slice(2) };
}

export function agentIdOfKey(key: string): string | undefined {
  return agentParts(key)?.agentId;
}

export function sessionKindOf(key: string, cfg: SessionKeyConfig): SessionKind {
  const lowered = key.trim().toLowerCase();
  if (lowered === GLOBAL_KEY) return "main";
  const agent = agentParts(lowered);
  const rest = agent?.rest ?? lowered.split(":");
  if (agent && rest.length === 1 && rest[0] === normalizeMainKey(cfg.mainKey)) return "main";
  const layout = layoutOf(rest);
  if (layout.kind === "chat" && layout.marker !== "dm") return "group";
  const head = rest[0] ?? "";
  if (rest.length >= 2 && head === "cron") return "cron";
  if (rest.length >= 2 && head === "hook") return "hook";
  if (head.startsWith("node-") && head.length > "node-".length) return "node";
  return "other";
}

export function chatTypeOfKey(
  key: string,
  hasThreadId = false,
): { chatType: "direct" | "group" | "channel"; thread: boolean } {
  const lowered = key.trim().toLowerCase();
  const rest = agentParts(lowered)?.rest ?? lowered.split(":");
  const layout = layoutOf(rest);
  const chatType = layout.kind === "chat" ? (layout.marker === "dm" ? "direct" : layout.marker) : "direct";
  // Look for thread/topic markers only after the peer id, so a peer named "thread" is a peer.
  const tailFrom = layout.kind === "chat" ? layout.idAt + 1 : 1;
  const tail = rest.slice(tailFrom);
  const keyHasThread = tail.some((s, i) => (s === "thread" || s === "topic") && i + 1 < tail.length);
  return { chatType, thread: keyHasThread || hasThreadId };
}

export function isReservedKey(key: string): boolean {
  const lowered = key.trim().toLowerCase();
  return lowered === GLOBAL_KEY || lowered === UNKNOWN_KEY;
}

/** Sub-agent sessions: `agent:<agentId>:subagent:<uuid>`. */
export function isSubagentKey(key: string): boolean {
  return /^agent:[^:]+:subagent:/.test(key);
}
