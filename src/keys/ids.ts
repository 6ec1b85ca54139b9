/**
 * The id rules of session keys (SPEC §2): agent, account, channel and main-key ids normalized
 * to one canonical shape; peer, group, thread and topic ids cleaned of what separates key
 * segments, keeping their case on the channels configured to; and the peer id an identityLinks
 * name stands for. Pure: no I/O.
 */

export const DEFAULT_AGENT_ID = "main";
export const DEFAULT_ACCOUNT_ID = "default";
export const DEFAULT_MAIN_KEY = "main";
/** The channel of a message that names none. */
const UNKNOWN_CHANNEL = "unknown";

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
  return normalizeId(raw, UNKNOWN_CHANNEL);
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

/** Whether a channel's peer, group, thread and topic ids keep their case (`caseSensitiveChannels`). */
export function isCaseSensitiveChannel(channel: string, cfg: { caseSensitiveChannels: string[] }): boolean {
  const normalized = normalizeChannel(channel);
  return cfg.caseSensitiveChannels.some((c) => normalizeChannel(c) === normalized);
}

/**
 * The peer id an identityLinks name stands for: the peer-id rule, lowercased on every channel
 * because one name serves all of them. "" for a name of only whitespace (the config refuses it).
 */
export function identityLinkPeerId(name: string): string {
  return normalizePeerId(name, false);
}

/** The identityLinks peer id for this peer, or undefined when no entry matches. */
export function linkedPeerId(
  channel: string,
  peerId: string,
  cfg: { identityLinks: Record<string, string[]> },
): string | undefined {
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
