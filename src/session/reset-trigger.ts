/**
 * Reset triggers (SPEC §10): a message that is exactly a trigger, or starts with one followed
 * by a space, starts a new sessionId. `/new <model>` also picks the new session's model when
 * the first word resolves to a model (alias, `provider/model`, or a case-insensitive alias);
 * the rest of the message passes through as the first message.
 */
import { resolveModelRef } from "../agent/models";
import type { Config } from "../config/schema";

export interface ResetTriggerMatch {
  trigger: string;
  rest: string;
  model?: string;
}

export function matchResetTrigger(
  text: string,
  triggers: string[],
  config: Config,
): ResetTriggerMatch | undefined {
  const trimmed = text.trim();
  for (const trigger of triggers) {
    const lower = trimmed.toLowerCase();
    const t = trigger.toLowerCase();
    if (lower !== t && !lower.startsWith(`${t} `)) continue;
    let rest = trimmed.slice(trigger.length).trim();
    let model: string | undefined;
    if (t === "/new" && rest) {
      const [first = "", ...others] = rest.split(/\s+/);
      try {
        model = resolveModelRef(first, config).ref;
        rest = others.join(" ");
      } catch {
        // Not a model: the whole remainder is the first message.
      }
    }
    return model ? { trigger, rest, model } : { trigger, rest };
  }
  return undefined;
}
