/**
 * The one token estimator of the gateway, for text not yet sent to a model (compaction's
 * threshold check, `/context`, the compaction plan). A documented heuristic rather than a
 * tokenizer: ⌈characters / 4⌉, plus a fixed overhead per message for role and framing. It is
 * within ~20% of the BPE tokenizers of current OpenAI and Anthropic models on English prose
 * and code, costs no bundle size and no CPU worth measuring, and is the same for every
 * provider. What a provider reports after a call (usage) always wins over the estimate.
 */
import type { TranscriptMessage } from "./message";

/** Role and framing tokens a provider adds per message. */
export const MESSAGE_OVERHEAD_TOKENS = 4;

export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** A stored message's estimated size in a prompt: its text, tool-call arguments and framing. */
export function estimateMessageTokens(m: Pick<TranscriptMessage, "content">): number {
  let chars = 0;
  for (const p of m.content) {
    if (p.type === "text") chars += p.text.length;
    else chars += p.name.length + JSON.stringify(p.arguments ?? null).length;
  }
  return MESSAGE_OVERHEAD_TOKENS + Math.ceil(chars / 4);
}
