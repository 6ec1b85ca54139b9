import { describe, expect, it } from "vitest";
import { MISSING_RESULT, PRUNED_PLACEHOLDER, toModelMessages } from "../../src/agent/context";
import { type TranscriptMessage, textOf } from "../../src/transcript/message";

let n = 0;
const at = 1_700_000_000_000;

function user(text: string): TranscriptMessage {
  return { id: `u${++n}`, role: "user", content: [{ type: "text", text }], timestamp: at + n };
}

function assistant(text: string, calls: Array<{ id: string; name: string; arguments?: unknown }> = []) {
  const content: TranscriptMessage["content"] = text ? [{ type: "text", text }] : [];
  for (const c of calls)
    content.push({ type: "toolCall", id: c.id, name: c.name, arguments: c.arguments ?? {} });
  return { id: `a${++n}`, role: "assistant", content, timestamp: at + n } satisfies TranscriptMessage;
}

function toolResult(callId: string, text: string, isError = false): TranscriptMessage {
  return {
    id: `t${++n}`,
    role: "toolResult",
    content: [{ type: "text", text }],
    toolCallId: callId,
    toolName: "lookup",
    isError,
    timestamp: at + n,
  };
}

/** A run with `count` tool calls, each answered by a JSON result {i}. */
function toolRun(count: number): TranscriptMessage[] {
  const out: TranscriptMessage[] = [user("go")];
  for (let i = 0; i < count; i++) {
    out.push(assistant("", [{ id: `c${i}`, name: "lookup", arguments: { i } }]));
    out.push(toolResult(`c${i}`, JSON.stringify({ i })));
  }
  out.push(assistant("done"));
  return out;
}

function toolOutputs(messages: ReturnType<typeof toModelMessages>) {
  return messages.flatMap((m) =>
    m.role === "tool" ? m.content.flatMap((p) => (p.type === "tool-result" ? [p.output] : [])) : [],
  );
}

describe("toModelMessages", () => {
  it("maps user, system, assistant text and tool calls, and tool results", () => {
    const messages: TranscriptMessage[] = [
      user("hello"),
      { id: "s1", role: "system", content: [{ type: "text", text: "session was reset" }], timestamp: at },
      assistant("let me look", [{ id: "c1", name: "lookup", arguments: { q: "x" } }]),
      toolResult("c1", '{"found":true}'),
      assistant("found it"),
    ];
    expect(toModelMessages(messages, 3)).toEqual([
      { role: "user", content: "hello" },
      { role: "user", content: "[system] session was reset" },
      {
        role: "assistant",
        content: [
          { type: "text", text: "let me look" },
          { type: "tool-call", toolCallId: "c1", toolName: "lookup", input: { q: "x" } },
        ],
      },
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: "c1",
            toolName: "lookup",
            output: { type: "json", value: { found: true } },
          },
        ],
      },
      { role: "assistant", content: [{ type: "text", text: "found it" }] },
    ]);
  });

  it("passes a non-JSON tool result as text and marks errors", () => {
    const messages = [
      assistant("", [
        { id: "c1", name: "lookup" },
        { id: "c2", name: "lookup" },
        { id: "c3", name: "lookup" },
      ]),
      toolResult("c1", "plain words"),
      toolResult("c2", "boom", true),
      toolResult("c3", '{"status":"error"}', true),
    ];
    expect(toolOutputs(toModelMessages(messages, 3))).toEqual([
      { type: "text", value: "plain words" },
      { type: "error-text", value: "boom" },
      { type: "error-json", value: { status: "error" } },
    ]);
  });

  it("keeps the last keepToolResults tool results and replaces older ones with the placeholder", () => {
    const out = toModelMessages(toolRun(5), 3);
    expect(toolOutputs(out)).toEqual([
      { type: "text", value: PRUNED_PLACEHOLDER },
      { type: "text", value: PRUNED_PLACEHOLDER },
      { type: "json", value: { i: 2 } },
      { type: "json", value: { i: 3 } },
      { type: "json", value: { i: 4 } },
    ]);
    // Pruning replaces the result only: every call and every message is still there.
    expect(out).toHaveLength(toolRun(5).length);
  });

  it("prunes nothing when there are at most keepToolResults results", () => {
    expect(toolOutputs(toModelMessages(toolRun(3), 3))).toEqual([
      { type: "json", value: { i: 0 } },
      { type: "json", value: { i: 1 } },
      { type: "json", value: { i: 2 } },
    ]);
  });

  it("prunes every tool result with keepToolResults 0", () => {
    expect(toolOutputs(toModelMessages(toolRun(2), 0))).toEqual([
      { type: "text", value: PRUNED_PLACEHOLDER },
      { type: "text", value: PRUNED_PLACEHOLDER },
    ]);
  });

  it("keeps an error flag on a pruned result", () => {
    const messages = [
      assistant("", [{ id: "c1", name: "lookup" }]),
      toolResult("c1", "failed", true),
      assistant("", [{ id: "c2", name: "lookup" }]),
      toolResult("c2", "{}"),
    ];
    expect(toolOutputs(toModelMessages(messages, 1))).toEqual([
      { type: "error-text", value: PRUNED_PLACEHOLDER },
      { type: "json", value: {} },
    ]);
  });

  it("never modifies the transcript messages it is given", () => {
    const messages = toolRun(4);
    const before = structuredClone(messages);
    toModelMessages(messages, 1);
    expect(messages).toEqual(before);
  });

  it("drops tool results whose call is not in the window (orphans)", () => {
    const messages = [
      toolResult("cut-off", '{"old":true}'),
      user("next question"),
      assistant("", [{ id: "c9", name: "lookup" }]),
      toolResult("c9", '{"new":true}'),
      toolResult("never-called", "{}"),
    ];
    const out = toModelMessages(messages, 3);
    expect(out.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(toolOutputs(out)).toEqual([{ type: "json", value: { new: true } }]);
  });

  it("places a result right after its call when other messages were appended in between", () => {
    // A sub-agent's announcement stored while the run waited on its tool.
    const messages = [
      user("spawn it"),
      assistant("", [{ id: "s1", name: "lookup" }]),
      user("[announcement] the sub-agent finished"),
      toolResult("s1", JSON.stringify({ status: "accepted" })),
      assistant("started"),
    ];
    const out = toModelMessages(messages, 3);
    expect(out.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user", "assistant"]);
    expect(toolOutputs(out)).toEqual([{ type: "json", value: { status: "accepted" } }]);
  });

  it("answers a call whose result was never stored with a placeholder, so the context stays valid", () => {
    const messages = [
      user("look it up"),
      assistant("", [
        { id: "x1", name: "lookup" },
        { id: "x2", name: "lookup" },
      ]),
      toolResult("x1", JSON.stringify({ ok: 1 })),
      user("/stop came in; new question"),
    ];
    const out = toModelMessages(messages, 3);
    expect(out.map((m) => m.role)).toEqual(["user", "assistant", "tool", "user"]);
    expect(toolOutputs(out)).toEqual([
      { type: "json", value: { ok: 1 } },
      { type: "error-text", value: MISSING_RESULT },
    ]);
  });

  it("drops a tool result without a toolCallId", () => {
    const orphan: TranscriptMessage = {
      id: "x",
      role: "toolResult",
      content: [{ type: "text", text: "{}" }],
      timestamp: at,
    };
    expect(toModelMessages([user("hi"), orphan], 3)).toEqual([{ role: "user", content: "hi" }]);
  });

  it("drops an assistant message with neither text nor calls", () => {
    expect(toModelMessages([user("hi"), assistant("")], 3)).toEqual([{ role: "user", content: "hi" }]);
  });
});

describe("textOf", () => {
  it("joins the text parts and ignores tool calls", () => {
    const m = assistant("a", [{ id: "c", name: "t" }]);
    m.content.push({ type: "text", text: "b" });
    expect(textOf(m)).toBe("ab");
  });
});
