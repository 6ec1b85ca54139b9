/** The pure rules of compaction (src/agent/compaction.ts) and the token estimator they use. */
import { describe, expect, it } from "vitest";
import {
  keepTokens,
  needsCompaction,
  outputBudget,
  planCompaction,
  renderForSummary,
  type Sized,
  summaryTokens,
} from "../../src/agent/compaction";
import type { TranscriptMessage } from "../../src/transcript/message";
import { estimateMessageTokens, estimateTokens, MESSAGE_OVERHEAD_TOKENS } from "../../src/transcript/tokens";

const sized = (roles: string, tokens = 10): Sized[] =>
  [...roles].map((c, i) => ({
    id: `m${i}`,
    role: ({ u: "user", a: "assistant", t: "toolResult" } as const)[c as "u" | "a" | "t"],
    tokens,
  }));

describe("the token estimator", () => {
  it("counts four characters a token, plus framing per message, tool-call arguments included", () => {
    expect(estimateTokens("")).toBe(0);
    expect(estimateTokens("abcde")).toBe(2);
    expect(estimateMessageTokens({ content: [{ type: "text", text: "x".repeat(40) }] })).toBe(
      MESSAGE_OVERHEAD_TOKENS + 10,
    );
    expect(
      estimateMessageTokens({ content: [{ type: "toolCall", id: "c", name: "abcd", arguments: { a: 1 } }] }),
    ).toBe(MESSAGE_OVERHEAD_TOKENS + Math.ceil((4 + '{"a":1}'.length) / 4));
  });
});

describe("needsCompaction", () => {
  const limits = { contextTokens: 1000, threshold: 0.8, maxMessages: 200 };
  it("triggers at the threshold when the tail holds more than a compaction keeps", () => {
    expect(needsCompaction({ tokens: 799, messages: 10, tailTokens: 700 }, limits)).toBe(false);
    expect(needsCompaction({ tokens: 800, messages: 10, tailTokens: 700 }, limits)).toBe(true);
  });
  it("does not trigger when a summary could not make the context smaller", () => {
    expect(needsCompaction({ tokens: 900, messages: 3, tailTokens: keepTokens(1000) }, limits)).toBe(false);
  });
  it("triggers when the tail reaches contextMessages, whatever its size", () => {
    expect(needsCompaction({ tokens: 10, messages: 200, tailTokens: 5 }, limits)).toBe(true);
  });
});

describe("outputBudget", () => {
  it("sends the model's own limit when prompt and output fit the window", () => {
    expect(outputBudget(16_384, 128_000, 10_000)).toBe(16_384);
  });
  it("cuts the limit so the estimated prompt (+10%) and the output fit, never below 256", () => {
    expect(outputBudget(100_000, 200_000, 150_000)).toBe(200_000 - 165_000);
    expect(outputBudget(100_000, 200_000, 199_000)).toBe(256);
    expect(outputBudget(undefined, 200_000, 1_000)).toBeUndefined();
  });
});

describe("planCompaction", () => {
  it("keeps the newest messages within the budget, starting at a user message", () => {
    // u a t a u a: keeping 3 × 10 tokens would start at the tool result; it starts at the next user.
    const plan = planCompaction(sized("uatauau a".replace(/ /g, "")), 30, 200, false);
    expect(plan.keep.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(plan.firstKeptId).toBe(plan.keep[0]?.id);
    expect(plan.summarize).toHaveLength(6);
  });
  it("keeps at most half of contextMessages", () => {
    const plan = planCompaction(sized("ua".repeat(20), 1), 1000, 10, false);
    expect(plan.keep.length).toBeLessThanOrEqual(5);
    expect(plan.keep[0]?.role).toBe("user");
  });
  it("summarizes nothing when everything fits, unless forced, and then everything", () => {
    expect(planCompaction(sized("uaua"), 1000, 200, false).summarize).toHaveLength(0);
    const forced = planCompaction(sized("uaua"), 1000, 200, true);
    expect(forced.summarize).toHaveLength(4);
    expect(forced.firstKeptId).toBeUndefined();
  });
});

describe("renderForSummary", () => {
  const msg = (role: TranscriptMessage["role"], text: string): TranscriptMessage => ({
    id: text,
    role,
    content: [{ type: "text", text }],
    timestamp: 0,
  });
  it("puts the earlier summary first and labels roles, tool calls and results", () => {
    const out = renderForSummary(
      [
        msg("user", "hello"),
        {
          id: "c",
          role: "assistant",
          content: [{ type: "toolCall", id: "1", name: "t", arguments: { q: 1 } }],
          timestamp: 0,
        },
        { ...msg("toolResult", "x".repeat(5000)), toolName: "t" },
      ],
      "before",
      10_000,
    );
    expect(out.startsWith("Earlier summary:\nbefore\n\nMessages since:\n")).toBe(true);
    expect(out).toContain("[user] hello");
    expect(out).toContain('[assistant calls t] {"q":1}');
    expect(out).toContain("[tool result t] ");
    expect(out).toContain("… [4000 more characters]");
  });
  it("leaves out the oldest lines beyond its budget and says so", () => {
    const out = renderForSummary(
      Array.from({ length: 100 }, (_, i) => msg("user", `line ${i} ${"y".repeat(40)}`)),
      undefined,
      200,
    );
    expect(out).toMatch(/\[… \d+ earlier lines left out to fit the summarizer's window …\]/);
    expect(out).toContain("line 99");
    expect(out).not.toContain("line 0 ");
    expect(estimateTokens(out)).toBeLessThanOrEqual(230);
  });
  it("bounds the summary to a share of the window", () => {
    expect(summaryTokens(2000)).toBe(300);
    expect(summaryTokens(1_000_000)).toBe(4096);
  });
});
