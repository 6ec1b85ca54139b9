/**
 * Send policy (SPEC §9): blocks outbound delivery for kinds of sessions without listing ids.
 * A per-session override wins; else the first matching deny rule; else any matching allow
 * rule; else the default. Matching is case-insensitive; all fields of a match must hold.
 */
import type { Config } from "../config/schema";

export interface SendPolicySubject {
  key: string;
  channel?: string | null;
  chatType: "direct" | "group" | "channel";
  thread: boolean;
  override?: string | null;
}

type Rule = Config["session"]["sendPolicy"]["rules"][number];

/**
 * The channel a session talks on now, which channel rules (send policy, `resetByChannel`) judge
 * it by: a group's or room's own channel; for a direct chat, the channel of its last message
 * (`lastChannel`), since one person's DM session may move between channels (per-peer keys,
 * identity links) and was created on whichever came first.
 */
export function sessionChannel(entry: {
  chatType: string | null;
  channel: string | null;
  lastChannel: string | null;
}): string | null {
  const room = entry.chatType === "group" || entry.chatType === "channel";
  return room ? (entry.channel ?? entry.lastChannel) : (entry.lastChannel ?? entry.channel);
}

function stripAgentPrefix(key: string): string {
  const m = /^agent:[^:]+:(.*)$/.exec(key);
  return m?.[1] ?? key;
}

function matches(rule: Rule, s: SendPolicySubject): boolean {
  const { channel, chatType, keyPrefix, rawKeyPrefix } = rule.match;
  const key = s.key.toLowerCase();
  if (channel !== undefined && channel.toLowerCase() !== (s.channel ?? "").toLowerCase()) return false;
  if (chatType !== undefined && !(chatType === "thread" ? s.thread : chatType === s.chatType)) return false;
  if (keyPrefix !== undefined && !stripAgentPrefix(key).startsWith(keyPrefix.toLowerCase())) return false;
  if (rawKeyPrefix !== undefined && !key.startsWith(rawKeyPrefix.toLowerCase())) return false;
  return true;
}

export function evaluateSendPolicy(
  s: SendPolicySubject,
  policy: Config["session"]["sendPolicy"],
): "allow" | "deny" {
  if (s.override === "allow" || s.override === "deny") return s.override;
  const matching = policy.rules.filter((r) => matches(r, s));
  if (matching.some((r) => r.action === "deny")) return "deny";
  if (matching.some((r) => r.action === "allow")) return "allow";
  return policy.default;
}
