/**
 * A session key as a caller types it, made canonical (SPEC §2: keys are found in any case): an
 * agent-less legacy key scoped to its agent, ids normalized by their rule, peer, group, thread
 * and topic ids keeping the case `resolveSessionKey` built them with; the forms a key may be
 * stored under; and the display form tools use. Pure: no I/O.
 */
import {
  DEFAULT_AGENT_ID,
  DEFAULT_MAIN_KEY,
  isCaseSensitiveChannel,
  normalizeAccountId,
  normalizeAgentId,
  normalizeChannel,
  normalizePeerId,
} from "./ids";
import {
  agentMainKey,
  channelLessKeepsCase,
  GLOBAL_KEY,
  layoutOf,
  type SessionKeyConfig,
} from "./session-key";

/** The bound of the memo of canonical keys (cleared when full). */
const CANONICAL_KEYS_MAX = 2048;

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
 * Canonical keys already computed, per key config (the parsed config is one object per isolate):
 * one request canonicalizes the same few keys several times, and a listing shows 50 of them.
 * Bounded; only successful results are kept (a malformed key throws every time).
 */
const canonicalKeys = new WeakMap<SessionKeyConfig, Map<string, string>>();

/**
 * Parses a key in any case and returns its canonical form. Legacy agent-less keys that name a
 * chat (`telegram:group:1`, `dm:alice`, `subagent:x`) and the literal `main` are scoped to
 * `agentId` (default "main"); `global`, `unknown`, `cron:`, `hook:`, `node-` and unrecognized
 * keys stay agent-less, lowercased. Peer, group, thread and topic ids keep their case under the
 * rule `resolveSessionKey` built them with, so a stored key comes back unchanged: the channel's
 * rule, or for a key without a channel segment the one of `channelLessKeepsCase`. Throws on an
 * empty key or an empty segment.
 */
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
