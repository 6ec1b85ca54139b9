/**
 * Who may talk to a connector (SPEC §18 "Access"), as a pure decision over one inbound message:
 * direct chats by `dmPolicy` (`open`; `allowlist`: `allowFrom` ids or identityLinks names;
 * `pairing`: those, or a sender an operator approved), owners always; group and channel chats by
 * `groups.policy` and, with `requireMention`, only when the message mentions the bot. A refused
 * message is never a turn: the caller counts it and, for pairing, sends one notice.
 */
import type { AccessRules } from "../config/connectors";
import type { Config } from "../config/schema";
import { isCommandOwner } from "./owners";

export type Refusal = "pairing" | "allowlist" | "groups-disabled" | "group-not-allowed" | "mention";

export interface AccessSubject {
  channel: string;
  chatType: "direct" | "group" | "channel";
  from: string;
  groupId?: string;
  mentioned: boolean;
}

/** Whether `allowFrom` names the sender: its id, `<channel>:<id>`, or an identity link listing it. */
export function listedSender(
  s: Pick<AccessSubject, "channel" | "from">,
  rules: AccessRules,
  config: Config,
): boolean {
  const id = s.from.trim().toLowerCase();
  const qualified = `${s.channel}:${id}`;
  const links = config.session.identityLinks;
  return rules.allowFrom.some((entry) => {
    const e = entry.trim().toLowerCase();
    if (e === id || e === qualified) return true;
    const name = Object.keys(links).find((n) => n.trim().toLowerCase() === e);
    return (
      name !== undefined &&
      (links[name] ?? []).some((l) => {
        const linked = l.trim().toLowerCase();
        return linked === qualified || linked === id;
      })
    );
  });
}

/**
 * The decision for one message; `paired()` is asked only when it matters (a direct message on a
 * pairing connector from a sender neither listed nor an owner), since it reads storage.
 */
export async function decideAccess(
  s: AccessSubject,
  rules: AccessRules,
  config: Config,
  paired: () => Promise<boolean>,
): Promise<Refusal | undefined> {
  if (s.chatType !== "direct") {
    if (rules.groups.policy === "disabled") return "groups-disabled";
    if (rules.groups.policy === "allowlist") {
      const group = (s.groupId ?? "").trim().toLowerCase();
      if (!rules.groups.allow.some((g) => g.trim().toLowerCase() === group)) return "group-not-allowed";
    }
    return rules.groups.requireMention && !s.mentioned ? "mention" : undefined;
  }
  if (rules.dmPolicy === "open") return undefined;
  if (listedSender(s, rules, config) || isCommandOwner({ channel: s.channel, id: s.from }, config))
    return undefined;
  if (rules.dmPolicy === "allowlist") return "allowlist";
  return (await paired()) ? undefined : "pairing";
}

/** Pairing codes: 8 characters a person can read out without confusing 0/O or 1/I. */
const CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

export function newPairingCode(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  let code = "";
  for (const b of bytes) code += CODE_ALPHABET[b % CODE_ALPHABET.length];
  return code;
}

export function pairingNotice(code: string): string {
  return `Hi! I don't know you yet. Your pairing code is ${code}: ask the operator to approve it (it expires in an hour). Until then I won't answer here.`;
}
