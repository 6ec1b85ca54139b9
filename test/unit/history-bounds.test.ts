import { describe, expect, it } from "vitest";
import {
  boundHistory,
  boundMessageLists,
  MAX_HISTORY_BYTES,
  MAX_TEXT_CHARS,
} from "../../src/tools/sessions-history";
import type { TranscriptMessage } from "../../src/transcript/message";

function text(id: string, body: string, seq = 1): TranscriptMessage {
  return { id, seq, role: "user", content: [{ type: "text", text: body }], timestamp: 1_700_000_000_000 };
}

/** The first content part of a message, typed loosely for assertions. */
function firstPart(message: TranscriptMessage | undefined): { text?: string; arguments?: unknown } {
  const part = message?.content[0];
  if (!part) throw new Error("message has no content");
  return part as { text?: string; arguments?: unknown };
}

const bytesOf = (value: unknown) => new TextEncoder().encode(JSON.stringify(value)).length;

describe("boundHistory", () => {
  it("returns small pages unchanged, with every flag false", () => {
    const messages = [text("a", "hello", 1), text("b", "world", 2)];
    expect(boundHistory(messages)).toEqual({
      messages,
      truncated: false,
      droppedMessages: 0,
      contentTruncated: false,
      contentRedacted: false,
      bytes: bytesOf(messages),
    });
  });

  it(`cuts text parts at ${MAX_TEXT_CHARS} characters with a marker`, () => {
    const long = "x".repeat(MAX_TEXT_CHARS + 123);
    const out = boundHistory([text("a", long)]);
    const part = firstPart(out.messages[0]);
    expect(part.text).toBe(`${"x".repeat(MAX_TEXT_CHARS)}\n…[truncated: 123 more characters]`);
    expect(out.contentTruncated).toBe(true);
    expect(out.truncated).toBe(false);
  });

  it("does not cut text of exactly the limit", () => {
    const out = boundHistory([text("a", "y".repeat(MAX_TEXT_CHARS))]);
    expect(out.contentTruncated).toBe(false);
  });

  it("redacts before cutting, so a secret at the cut is never half shown", () => {
    const secret = "sk-ant-api03-0123456789abcdefghij";
    const body = `${"x".repeat(MAX_TEXT_CHARS - 20)} ${secret}`;
    expect(body.length).toBeGreaterThan(MAX_TEXT_CHARS);
    const out = boundHistory([text("a", body)]);
    const part = firstPart(out.messages[0]);
    expect(part.text).not.toContain("sk-ant-api03");
    expect(part.text).toContain("[REDACTED]");
    expect(out.contentRedacted).toBe(true);
  });

  it("redacts and cuts string arguments of tool calls", () => {
    const call: TranscriptMessage = {
      id: "c",
      seq: 1,
      role: "assistant",
      content: [
        {
          type: "toolCall",
          id: "call-1",
          name: "sessions_send",
          arguments: {
            message: "my key is AKIAIOSFODNN7EXAMPLE",
            nested: ["z".repeat(MAX_TEXT_CHARS + 1)],
            n: 3,
          },
        },
      ],
      timestamp: 1,
    };
    const out = boundHistory([call]);
    const part = firstPart(out.messages[0]) as {
      arguments: { message: string; nested: string[]; n: number };
    };
    expect(part.arguments.message).toBe("my key is [REDACTED]");
    expect(part.arguments.nested[0]).toMatch(/…\[truncated: 1 more characters\]$/);
    expect(part.arguments.n).toBe(3);
    expect(out).toMatchObject({ contentRedacted: true, contentTruncated: true });
  });

  it(`keeps the result within ${MAX_HISTORY_BYTES / 1024} KB by dropping the oldest messages first`, () => {
    const messages = Array.from({ length: 60 }, (_, i) => text(`m${i + 1}`, "w".repeat(3000), i + 1));
    const out = boundHistory(messages);
    expect(out.truncated).toBe(true);
    expect(out.droppedMessages).toBeGreaterThan(0);
    expect(out.messages.length + out.droppedMessages).toBe(60);
    // The newest messages are the ones kept, in order.
    expect(out.messages.map((m) => m.id)).toEqual(messages.slice(out.droppedMessages).map((m) => m.id));
    expect(out.bytes).toBe(bytesOf(out.messages));
    const result = {
      sessionKey: "main",
      sessionId: crypto.randomUUID(),
      hasMore: true,
      nextBefore: 99,
      ...out,
    };
    expect(bytesOf(result)).toBeLessThanOrEqual(MAX_HISTORY_BYTES);
    // Dropping one message fewer would not have fitted.
    expect(bytesOf(messages.slice(out.droppedMessages - 1))).toBeGreaterThan(MAX_HISTORY_BYTES - 1024);
  });

  it("counts bytes as UTF-8, so multi-byte text is bounded too", () => {
    const messages = Array.from({ length: 20 }, (_, i) => text(`u${i}`, "ü".repeat(2500), i + 1));
    const out = boundHistory(messages);
    expect(out.truncated).toBe(true);
    expect(out.bytes).toBe(bytesOf(out.messages));
    expect(out.bytes).toBeLessThanOrEqual(MAX_HISTORY_BYTES);
  });

  it("honours other limits", () => {
    const out = boundHistory([text("a", "abcdef", 1), text("b", "ghijkl", 2)], {
      maxChars: 3,
      maxBytes: 1024 + 150,
    });
    expect(out.messages.map((m) => m.id)).toEqual(["b"]);
    expect(firstPart(out.messages[0]).text).toBe("ghi\n…[truncated: 3 more characters]");
  });
});

describe("boundMessageLists", () => {
  const rowOf = (row: string, count: number, chars: number) =>
    Array.from({ length: count }, (_, i) => text(`${row}${i}`, "r".repeat(chars), i + 1));

  it("returns lists that fit unchanged, with every flag false", () => {
    const lists = [rowOf("a", 3, 10), [], rowOf("b", 1, 10)];
    expect(boundMessageLists(lists, { maxBytes: 10_000 })).toEqual({
      lists,
      truncated: false,
      droppedMessages: 0,
      contentTruncated: false,
      contentRedacted: false,
      bytes: lists.reduce((sum, l) => sum + bytesOf(l), 0),
    });
  });

  it("drops the oldest messages of the fullest lists first: small lists keep all, large ones share the rest", () => {
    const small = rowOf("s", 2, 10);
    const lists = [rowOf("a", 20, 500), small, rowOf("b", 20, 500), rowOf("c", 20, 500)];
    const maxBytes = 12_000;
    const out = boundMessageLists(lists, { maxBytes });
    expect(out.bytes).toBe(out.lists.reduce((sum, l) => sum + bytesOf(l), 0));
    expect(out.bytes).toBeLessThanOrEqual(maxBytes);
    expect(out.lists[1]).toEqual(small);
    const counts = [0, 2, 3].map((i) => out.lists[i]?.length ?? 0);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
    // Each list keeps its newest messages, in order.
    for (const i of [0, 2, 3]) {
      const kept = out.lists[i] ?? [];
      expect(kept).toEqual((lists[i] ?? []).slice(20 - kept.length));
    }
    expect(out.droppedMessages).toBe(62 - out.lists.reduce((sum, l) => sum + l.length, 0));
    expect(out.truncated).toBe(true);
    // One message more would not have fitted.
    expect(out.bytes + bytesOf(lists[0]?.[0]) + 1).toBeGreaterThan(maxBytes);
  });

  it("redacts and cuts every message", () => {
    const lists = [[text("k", `Bearer abcdefgh1234 ${"q".repeat(5000)}`)]];
    const out = boundMessageLists(lists, { maxBytes: 100_000 });
    const first = firstPart(out.lists[0]?.[0]).text ?? "";
    expect(first.startsWith("Bearer [REDACTED] ")).toBe(true);
    expect(first).toMatch(/…\[truncated: \d+ more characters\]$/);
    expect(out).toMatchObject({ contentRedacted: true, contentTruncated: true, truncated: false });
  });

  it("leaves every list empty when there is no room at all", () => {
    const out = boundMessageLists([rowOf("a", 3, 10), rowOf("b", 2, 10)], { maxBytes: 0 });
    expect(out.lists).toEqual([[], []]);
    expect(out.droppedMessages).toBe(5);
  });
});
