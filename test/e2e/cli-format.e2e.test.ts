/**
 * The CLI's output for people (cli/format.ts): aligned tables with truncated cells, relative
 * and ISO times, transcript messages with and without tool calls. Pure functions, run in Node.
 */
import { describe, expect, it } from "vitest";
import {
  isoTime,
  keyValues,
  messageLines,
  oneLine,
  relativeTime,
  table,
  terminalSafe,
  truncate,
  when,
} from "../../cli/format.ts";

const NOW = Date.UTC(2025, 5, 1, 12, 0, 0);

describe("table", () => {
  const rows = [
    { key: "agent:main:main", tokens: 1200, note: "a" },
    { key: "agent:main:telegram:dm:alice", tokens: 64, note: "line one\nline two" },
  ];

  it("aligns columns under their headers, two spaces apart, with no trailing spaces", () => {
    const text = table(rows, [
      { header: "KEY", value: (r) => r.key },
      { header: "TOKENS", value: (r) => String(r.tokens), align: "right" },
      { header: "NOTE", value: (r) => r.note },
    ]);
    expect(text.split("\n")).toEqual([
      "KEY                           TOKENS  NOTE",
      "agent:main:main                 1200  a",
      "agent:main:telegram:dm:alice      64  line one line two",
    ]);
  });

  it("cuts cells longer than the column's max, ending with …", () => {
    const text = table(rows, [{ header: "KEY", value: (r) => r.key, max: 12 }]);
    expect(text.split("\n")).toEqual(["KEY", "agent:main:…", "agent:main:…"]);
  });

  it("shows just the header for no rows, and a header wider than its cells sets the width", () => {
    expect(table([], [{ header: "ID", value: () => "" }])).toBe("ID");
    expect(
      table(
        [{ a: "x" }],
        [
          { header: "LONG HEADER", value: (r) => r.a },
          { header: "B", value: () => "y" },
        ],
      ),
    ).toBe("LONG HEADER  B\nx            y");
  });
});

describe("truncate, oneLine, keyValues", () => {
  it("truncates to exactly max characters", () => {
    expect(truncate("abcdef", 4)).toBe("abc…");
    expect(truncate("abcd", 4)).toBe("abcd");
    expect(truncate("abc", 0)).toBe("");
  });

  it("flattens newlines and tabs to single spaces", () => {
    expect(oneLine("a\n\tb \r\n c")).toBe("a b c");
  });

  it("aligns labels and leaves out undefined values", () => {
    expect(
      keyValues([
        ["key", "agent:main:main"],
        ["label", undefined],
        ["sessionId", "s-1"],
      ]),
    ).toBe("key        agent:main:main\nsessionId  s-1");
  });
});

describe("times", () => {
  it("says how long ago or how soon, in the largest whole unit", () => {
    expect(relativeTime(NOW - 400, NOW)).toBe("now");
    expect(relativeTime(NOW - 12_000, NOW)).toBe("12s ago");
    expect(relativeTime(NOW - 3 * 60_000 - 59_000, NOW)).toBe("3m ago");
    expect(relativeTime(NOW + 5 * 3_600_000, NOW)).toBe("in 5h");
    expect(relativeTime(NOW - 2 * 86_400_000, NOW)).toBe("2d ago");
  });

  it("gives the date beyond 30 days", () => {
    expect(relativeTime(NOW - 45 * 86_400_000, NOW)).toBe("2025-04-17");
  });

  it("prints ISO timestamps to the second when asked, and - for none", () => {
    expect(isoTime(NOW + 123)).toBe("2025-06-01T12:00:00Z");
    expect(when(NOW - 60_000, { now: NOW, iso: true })).toBe("2025-06-01T11:59:00Z");
    expect(when(NOW - 60_000, { now: NOW, iso: false })).toBe("1m ago");
    expect(when(null, { now: NOW, iso: false })).toBe("-");
    expect(when(undefined, { now: NOW, iso: true })).toBe("-");
  });
});

describe("messageLines", () => {
  const at = NOW;
  const call = {
    role: "assistant",
    timestamp: at,
    content: [
      { type: "text", text: "Let me look." },
      { type: "toolCall", id: "c1", name: "sessions_list", arguments: { limit: 5 } },
    ],
  };
  const onlyCall = {
    role: "assistant",
    timestamp: at,
    content: [{ type: "toolCall", id: "c2", name: "sessions_history", arguments: {} }],
  };
  const result = {
    role: "toolResult",
    toolName: "sessions_list",
    isError: true,
    timestamp: at,
    content: [{ type: "text", text: "boom\nbad" }],
  };

  it("prints time, role and text, continuation lines indented under the text", () => {
    expect(
      messageLines(
        { role: "user", timestamp: at, content: [{ type: "text", text: "hi\nthere" }] },
        { tools: false },
      ),
    ).toEqual(["2025-06-01T12:00:00Z  user       hi", "                                 there"]);
  });

  it("leaves tool calls and tool results out without tools", () => {
    expect(messageLines(call, { tools: false })).toEqual(["2025-06-01T12:00:00Z  assistant  Let me look."]);
    expect(messageLines(onlyCall, { tools: false })).toEqual([]);
    expect(messageLines(result, { tools: false })).toEqual([]);
  });

  it("shows tool calls with their arguments and tool results with their text, with tools", () => {
    expect(messageLines(call, { tools: true })).toEqual([
      "2025-06-01T12:00:00Z  assistant  Let me look.",
      '                                 → sessions_list {"limit":5}',
    ]);
    expect(messageLines(result, { tools: true })).toEqual([
      "2025-06-01T12:00:00Z  tool       ← sessions_list (error): boom bad",
    ]);
  });
});

describe("terminalSafe", () => {
  it("makes escape sequences and other control characters harmless, keeping newlines and tabs", () => {
    const hostile = "title\u001b]0;pwned\u0007 clip\u001b]52;c;ZXZpbA==\u0007 csi\u009b2J end\n\tnext";
    expect(terminalSafe(hostile)).toBe(
      "title\ufffd]0;pwned\ufffd clip\ufffd]52;c;ZXZpbA==\ufffd csi\ufffd2J end\n\tnext",
    );
  });
});
