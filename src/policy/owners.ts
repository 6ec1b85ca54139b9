/**
 * Who may run owner-only chat commands (SPEC §12 `/send`): `commands.owners` lists
 * `channel:peerId` entries and `session.identityLinks` names. A sender is an owner when an
 * entry names its channel and peer id, or names an identity link that lists the sender
 * (`channel:peerId` or the bare peer id). Entries are written by hand, so they compare
 * case-insensitively, like bindings. Pure: no I/O.
 */
import type { Config } from "../config/schema";
import { normalizeChannel } from "../keys/ids";

export interface Sender {
  channel: string;
  id: string;
}

function samePeer(entry: string, sender: Sender): boolean {
  const at = entry.indexOf(":");
  if (at < 0) return entry.trim().toLowerCase() === sender.id.trim().toLowerCase();
  return (
    normalizeChannel(entry.slice(0, at)) === normalizeChannel(sender.channel) &&
    entry
      .slice(at + 1)
      .trim()
      .toLowerCase() === sender.id.trim().toLowerCase()
  );
}

export function isCommandOwner(sender: Sender, config: Config): boolean {
  const links = config.session.identityLinks;
  return config.commands.owners.some((owner) => {
    if (owner.includes(":")) return samePeer(owner, sender);
    const name = Object.keys(links).find((n) => n.trim().toLowerCase() === owner.trim().toLowerCase());
    return name !== undefined && (links[name] ?? []).some((entry) => samePeer(entry, sender));
  });
}
