/**
 * Session keys (SPEC §2, §17 "Keys, more."): how an inbound message, a scheduled job, a webhook,
 * a node bridge or a sub-agent maps to a canonical session key, how any key a caller types is
 * canonicalized, and what a key says about itself (agent, kind, chat type). Pure: no I/O.
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

export const DEFAULT_AGENT_ID = "main";
export const DEFAULT_ACCOUNT_ID = "default";
export const DEFAULT_MAIN_KEY = "main";
export const GLOBAL_KEY = "global";
export const UNKNOWN_KEY = "unknown";

const VALID_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/**
 * A 64-character id that starts with "_" can end in "-" only because the cut below put it there;
 * it is the result of normalizing, so it must stay as it is when normalized again.
 */
const CUT_ID = /^_[a-z0-9_-]{63}$/;

/**
 * SPEC §2 id rule for agentId, accountId, mainKey and channel: trimmed and lowercased; an id not
 * already of the canonical shape has runs of characters outside [a-z0-9_-] replaced by "-",
 * leading and trailing "-" stripped, and is then cut to 64 characters (so a cut may end on "-").
 * A leading "_" is kept: the rule strips only "-".
 */
export function normalizeId(raw: string | undefined | null, fallback: string): string {
  const lowered = (raw ?? "").trim().toLowerCase();
  if (VALID_ID.test(lowered) || CUT_ID.test(lowered)) return lowered;
  const cleaned = lowered
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/^-+/, "")
    .replace(/-+$/, "")
    .slice(0, 64);
  return cleaned || fallback;
}

export function normalizeAgentId(raw?: string | null): string {
  return normalizeId(raw, DEFAULT_AGENT_ID);
}

export function normalizeAccountId(raw?: string | null): string {
  return normalizeId(raw, DEFAULT_ACCOUNT_ID);
}

export function normalizeChannel(raw: string): string {
  return normalizeId(raw, UNKNOWN_KEY);
}

export function normalizeMainKey(raw?: string | null): string {
  return normalizeId(raw, DEFAULT_MAIN_KEY);
}

/**
 * Peer, group, thread and topic ids (and the free-form tails of other keys): trimmed, and runs of
 * whitespace or ":" become "-", because ":" separates key segments. This can merge two ids that
 * differ only there ("a:b" and "a-b"); connectors' ids do not rely on that distinction, and
 * refusing such ids would drop real messages (Matrix ids contain ":"). Lowercased unless the
 * channel keeps case. Returns "" for an empty id; callers decide whether that is an error.
 */
export function normalizePeerId(raw: string, keepCase: boolean): string {
  const cleaned = raw.trim().replace(/[\s:]+/g, "-");
  return keepCase ? cleaned : cleaned.toLowerCase();
}

export function isCaseSensitiveChannel(channel: string, cfg: SessionKeyConfig): boolean {
  const normalized = normalizeChannel(channel);
  return cfg.caseSensitiveChannels.some((c) => normalizeChannel(c) === normalized);
}

/**
 * The case rule for a key with no channel segment (per-peer DMs, threads under the main key),
 * when it is parsed again. Its ids were built with the rule of whatever channel the message came
 * from, which the key no longer says; so they keep the case they have whenever some channel keeps
 * case (a stored key then comes back unchanged), and are lowercased when none does.
 */
function channelLessKeepsCase(cfg: SessionKeyConfig): boolean {
  return cfg.caseSensitiveChannels.length > 0;
}

/** The bound of each memo of computed keys below (cleared when full). */
const CANONICAL_KEYS_MAX = 2048;

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
    if (known.size >= CANONICAL_KEYS_MAX) known.clear();
    known.set(agentId, key);
  }
  return key;
}

/**
 * The peer id an identityLinks name stands for: the peer-id rule, lowercased on every channel
 * because one name serves all of them. "" for a name of only whitespace (the config refuses it).
 */
export function identityLinkPeerId(name: string): string {
  return normalizePeerId(name, false);
}

/** The identityLinks peer id for this peer, or undefined when no entry matches. */
export function linkedPeerId(channel: string, peerId: string, cfg: SessionKeyConfig): string | undefined {
  const bare = peerId.trim().toLowerCase();
  if (!bare) return undefined;
  const scoped = `${normalizeChannel(channel)}:${bare}`;
  for (const [canonical, entries] of Object.entries(cfg.identityLinks)) {
    const name = identityLinkPeerId(canonical);
    if (!name) continue;
    for (const entry of entries) {
      const candidate = entry.trim().toLowerCase();
      if (candidate === scoped || candidate === bare) return name;
    }
  }
  return undefined;
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
function layoutOf(rest: readonly string[]): Layout {
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

function canonicalSuffix(segments: readonly string[], keepCase: boolean): string[] {
  const out: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const lowered = normalizePeerId(segments[i] ?? "", false);
    const next = segments[i + 1];
    if ((lowered === "thread" || lowered === "topic") && next !== undefined) {
      out.push(lowered, normalizePeerId(next, keepCase));
      i++;
    } else {
      out.push(lowered);
    }
  }
  return out;
}

function canonicalRest(rest: readonly string[], cfg: SessionKeyConfig): string {
  const layout = layoutOf(rest);
  if (layout.kind === "subagent") return canonicalSuffix(rest, false).join(":");
  // Opaque keys after `agent:<id>:` are the main key and its threads: no channel segment.
  if (layout.kind === "opaque") return canonicalSuffix(rest, channelLessKeepsCase(cfg)).join(":");
  const parts: string[] = [];
  let keepCase = channelLessKeepsCase(cfg);
  if (layout.channel !== undefined) {
    const channel = normalizeChannel(layout.channel);
    keepCase = isCaseSensitiveChannel(channel, cfg);
    parts.push(channel);
  }
  if (layout.accountId !== undefined) parts.push(normalizeAccountId(layout.accountId));
  parts.push(layout.marker, normalizePeerId(rest[layout.idAt] ?? "", keepCase));
  parts.push(...canonicalSuffix(rest.slice(layout.idAt + 1), keepCase));
  return parts.join(":");
}

function splitKey(raw: string): string[] {
  const trimmed = raw.trim();
  if (!trimmed) throw new Error("session key is empty");
  const segments = trimmed.split(":").map((s) => s.trim());
  if (segments.some((s) => s === "")) {
    throw new Error(`session key "${raw}" has an empty segment (look for "::" or a ":" at either end)`);
  }
  return segments;
}

function isAgentlessKind(head: string): boolean {
  return head === "cron" || head === "hook" || head.startsWith("node-");
}

/**
 * Parses a key in any case and returns its canonical form. Legacy agent-less keys that name a
 * chat (`telegram:group:1`, `dm:alice`, `subagent:x`) and the literal `main` are scoped to
 * `agentId` (default "main"); `global`, `unknown`, `cron:`, `hook:`, `node-` and unrecognized
 * keys stay agent-less, lowercased. Peer, group, thread and topic ids keep their case under the
 * rule `resolveSessionKey` built them with, so a stored key comes back unchanged: the channel's
 * rule, or for a key without a channel segment the one of `channelLessKeepsCase`. Throws on an
 * empty key or an empty segment.
 */
/**
 * Canonical keys already computed, per key config (the parsed config is one object per isolate):
 * one request canonicalizes the same few keys several times, and a listing shows 50 of them.
 * Bounded; only successful results are kept (a malformed key throws every time).
 */
const canonicalKeys = new WeakMap<SessionKeyConfig, Map<string, string>>();

export function canonicalizeSessionKey(raw: string, cfg: SessionKeyConfig, agentId?: string): string {
  let known = canonicalKeys.get(cfg);
  if (!known) {
    known = new Map();
    canonicalKeys.set(cfg, known);
  }
  // Length-prefixed, so no two (agentId, raw) pairs share an id; an absent agent id is -1.
  const id = `${agentId?.length ?? -1}:${agentId ?? ""}${raw}`;
  const hit = known.get(id);
  if (hit !== undefined) return hit;
  const key = canonicalize(raw, cfg, agentId);
  if (known.size >= CANONICAL_KEYS_MAX) known.clear();
  known.set(id, key);
  return key;
}

function canonicalize(raw: string, cfg: SessionKeyConfig, agentId?: string): string {
  const segments = splitKey(raw);
  const head = (segments[0] ?? "").toLowerCase();
  if (head === "agent") {
    if (segments.length < 3) throw new Error(`session key "${raw}" must look like agent:<agentId>:<rest>`);
    return `agent:${normalizeAgentId(segments[1])}:${canonicalRest(segments.slice(2), cfg)}`;
  }
  if (segments.length === 1 && head === DEFAULT_MAIN_KEY)
    return agentMainKey(agentId ?? DEFAULT_AGENT_ID, cfg);
  if (!isAgentlessKind(head) && layoutOf(segments).kind !== "opaque") {
    return `agent:${normalizeAgentId(agentId)}:${canonicalRest(segments, cfg)}`;
  }
  return canonicalSuffix(segments, false).join(":");
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

/** Display form for tools: the caller's own main key (which is `global` under scope global) is `main`. */
export function toToolKey(key: string, callerAgentId: string, cfg: SessionKeyConfig): string {
  return key.trim().toLowerCase() === agentMainKey(callerAgentId, cfg) ? DEFAULT_MAIN_KEY : key;
}

/** Tool/RPC argument to stored key: `main` and `global` mean the caller's main key. */
export function fromToolKey(arg: string, callerAgentId: string, cfg: SessionKeyConfig): string {
  const lowered = arg.trim().toLowerCase();
  if (lowered === DEFAULT_MAIN_KEY || lowered === GLOBAL_KEY) return agentMainKey(callerAgentId, cfg);
  return canonicalizeSessionKey(arg, cfg, callerAgentId);
}

/**
 * The forms a canonical key may be stored under, in the order to look for them: the key itself,
 * then its lowercase form. A key typed in another case keeps the case of its ids when some
 * channel is case-sensitive (see `channelLessKeepsCase`), while the session it names was stored
 * lowercase by a channel that is not (SPEC §2: keys are found in any case).
 */
export function storedKeyForms(key: string): string[] {
  const lower = key.toLowerCase();
  return lower === key ? [key] : [key, lower];
}

/** Sub-agent sessions: `agent:<agentId>:subagent:<uuid>`. */
export function isSubagentKey(key: string): boolean {
  return /^agent:[^:]+:subagent:/.test(key);
}
