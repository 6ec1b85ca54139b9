/**
 * Reset triggers (SPEC §10): a message that is exactly a trigger, or starts with one followed
 * by a space, starts a new sessionId. `/new <model>` also picks the new session's model when
 * the first word names one model (an alias, `provider/model`, or a model's name such as `sonnet`
 * or `gpt-4.1`: see model-match.ts); the rest of the message passes through as the first message.
 */
import { matchModelWord } from "../../agent/model-match";
import type { Config } from "../../config/schema";

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
      // Not one model (unknown or ambiguous): the whole remainder is the first message.
      model = matchModelWord(first, config);
      if (model) rest = others.join(" ");
    }
    return model ? { trigger, rest, model } : { trigger, rest };
  }
  return undefined;
}
