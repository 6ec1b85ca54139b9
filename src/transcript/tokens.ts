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

/**
 * What an image given to a model as input costs, roughly: providers bill a tile-based count
 * (OpenAI ~765 for a 1024² image at high detail, Anthropic about width×height/750); one figure
 * keeps the estimate provider-free.
 */
export const IMAGE_TOKENS = 1_000;

/** A stored message's estimated size in a prompt: its text, tool-call arguments, media and framing. */
export function estimateMessageTokens(m: Pick<TranscriptMessage, "content">): number {
  let chars = 0;
  let tokens = MESSAGE_OVERHEAD_TOKENS;
  for (const p of m.content) {
    if (p.type === "text") chars += p.text.length;
    else if (p.type === "toolCall") chars += p.name.length + JSON.stringify(p.arguments ?? null).length;
    else if (p.type === "image") tokens += IMAGE_TOKENS;
    // A text file given inline counts its bytes; an audio part's transcript is the message's text.
    else if (p.type === "file") chars += Math.min(p.bytes, INLINE_FILE_BYTES) + (p.name?.length ?? 0);
  }
  return tokens + Math.ceil(chars / 4);
}

/** Text files up to this size are given to the model inline (SPEC §22); larger ones by name. */
export const INLINE_FILE_BYTES = 100 * 1024;
