import { describe, expect, it } from "vitest";
import { ConfigSchema } from "../../src/config/schema";
import {
  agentOfModel,
  answerBase,
  chooseSessionKey,
  closingChunks,
  lastUserText,
  modelList,
  OpenAIError,
  outcomeError,
  usageOf,
  waitBoundMs,
} from "../../src/routes/openai-format";

const session = (fields: Record<string, unknown> = {}) => ConfigSchema.parse({ session: fields }).session;

function refusal(fn: () => unknown): OpenAIError {
  try {
    fn();
  } catch (error) {
    if (error instanceof OpenAIError) return error;
    throw error;
  }
  throw new Error("expected an OpenAIError");
}

describe("models", () => {
  it("lists the configured agents, or the default agent when agents.list is empty", () => {
    expect(modelList(ConfigSchema.parse({}))).toEqual({
      object: "list",
      data: [{ id: "switchboard/main", object: "model", created: 0, owned_by: "switchboard" }],
    });
    const two = ConfigSchema.parse({ agents: { list: [{ id: "main" }, { id: "research" }] } });
    expect(modelList(two).data.map((m) => m.id)).toEqual(["switchboard/main", "switchboard/research"]);
  });

  it("names an agent as switchboard/<id> or <id>, in any case; anything else is model_not_found", () => {
    expect(agentOfModel("switchboard/research", ["main", "research"])).toBe("research");
    expect(agentOfModel(" Research ", ["main", "research"])).toBe("research");
    expect(agentOfModel("SwitchBoard/MAIN", ["main"])).toBe("main");
    const e = refusal(() => agentOfModel("gpt-4o", ["main", "research"]));
    expect(e).toMatchObject({ status: 404, type: "invalid_request_error", code: "model_not_found" });
    expect(e.message).toBe(
      "The model `gpt-4o` does not exist: models are agents (switchboard/main, switchboard/research)",
    );
  });
});

describe("the run's input", () => {
  it("is the last user message; earlier and later messages of other roles are ignored", () => {
    const text = lastUserText([
      { role: "system", content: "be terse" },
      { role: "user", content: "first" },
      { role: "assistant", content: "echo: first" },
      { role: "user", content: "  second  " },
      { role: "assistant", content: "draft" },
    ]);
    expect(text).toBe("second");
  });

  it("joins text parts with newlines", () => {
    const content = [
      { type: "text", text: "one" },
      { type: "text", text: "two" },
    ];
    expect(lastUserText([{ role: "user", content }])).toBe("one\ntwo");
  });

  it("refuses what it cannot run, naming the field", () => {
    const cases: Array<[unknown[], string]> = [
      [
        [{ role: "system", content: "x" }],
        "`messages` has no message with role `user`: the last one is the run's input",
      ],
      [
        [
          {
            role: "user",
            content: [
              { type: "text", text: "a" },
              { type: "image_url", image_url: { url: "x" } },
            ],
          },
        ],
        "`messages[0].content[1]` is a image_url part; only text parts are supported",
      ],
      [
        [{ role: "user", content: "   " }],
        "`messages[0].content` is empty: the last user message is the run's input",
      ],
      [[{ role: "user", content: 42 }], "`messages[0].content` must be a string or an array of text parts"],
      [
        [{ role: "user", content: "x".repeat(200_001) }],
        "`messages[0].content` is longer than 200000 characters (got 200001)",
      ],
    ];
    for (const [messages, message] of cases) {
      const e = refusal(() => lastUserText(messages as Parameters<typeof lastUserText>[0]));
      expect({ status: e.status, type: e.type, message: e.message }).toEqual({
        status: 400,
        type: "invalid_request_error",
        message,
      });
    }
  });
});

describe("the session", () => {
  const fresh = "3f0c2a4e-1b2c-4d5e-8f90-123456789abc";

  it("the header wins, canonicalized for the model's agent (`main` is its main key)", () => {
    const cfg = session();
    const pick = (header: string, agentId = "main") =>
      chooseSessionKey({ header, user: "alice", agentId, freshId: fresh }, cfg);
    expect(pick("Agent:Main:Telegram:DM:Bob")).toEqual({ key: "agent:main:telegram:dm:bob", by: "header" });
    expect(pick("main", "research")).toEqual({ key: "agent:research:main", by: "header" });
    expect(pick("hook:ci")).toEqual({ key: "hook:ci", by: "header" });
  });

  it("a header key of another agent, a reserved or a malformed key is a 400", () => {
    const cfg = session();
    const pick = (header: string) =>
      refusal(() => chooseSessionKey({ header, agentId: "main", freshId: fresh }, cfg));
    expect(pick("agent:research:main").message).toBe(
      "`x-switchboard-session-key` agent:research:main belongs to agent research, not to the model's agent main (use model switchboard/research)",
    );
    expect(pick("unknown").message).toBe("`x-switchboard-session-key` unknown is reserved");
    expect(pick("agent::x")).toMatchObject({ status: 400, code: "invalid_request" });
  });

  it("`user` is keyed like a direct chat from channel openai, so dmScope and identityLinks apply", () => {
    const key = (fields: Record<string, unknown>, user = "Alice") =>
      chooseSessionKey({ user, agentId: "main", freshId: fresh }, session(fields)).key;
    expect(key({})).toBe("agent:main:main");
    expect(key({ dmScope: "per-peer" })).toBe("agent:main:dm:alice");
    expect(key({ dmScope: "per-channel-peer" })).toBe("agent:main:openai:dm:alice");
    expect(key({ dmScope: "per-account-channel-peer" })).toBe("agent:main:openai:default:dm:alice");
    expect(key({ dmScope: "per-peer", identityLinks: { al: ["openai:alice", "telegram:1"] } })).toBe(
      "agent:main:dm:al",
    );
    expect(key({ scope: "global" })).toBe("global");
    expect(chooseSessionKey({ user: "alice", agentId: "main", freshId: fresh }, session()).by).toBe("user");
  });

  it("without header or user, each request gets a fresh openai direct-chat key, whatever the dmScope", () => {
    for (const fields of [{}, { scope: "global" }, { dmScope: "per-peer" }]) {
      expect(chooseSessionKey({ user: "  ", agentId: "research", freshId: fresh }, session(fields))).toEqual({
        key: `agent:research:openai:dm:${fresh}`,
        by: "fresh",
      });
    }
  });
});

describe("answers", () => {
  const base = answerBase("run-1", "main", 1_700_000_000_999);

  it("ids and models come from the run and the agent", () => {
    expect(base).toEqual({ id: "chatcmpl-run-1", created: 1_700_000_000, model: "switchboard/main" });
  });

  it("usage is the run's input and output tokens; total is their sum", () => {
    expect(usageOf({ inputTokens: 100, outputTokens: 10, totalTokens: 7 })).toEqual({
      prompt_tokens: 100,
      completion_tokens: 10,
      total_tokens: 110,
    });
    expect(usageOf(null)).toEqual({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });
  });

  it("a stream ends with the reply as one delta, the stop, and the usage when asked for", () => {
    const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
    const common = { ...base, object: "chat.completion.chunk" };
    expect(closingChunks(base, "hi", usage, true)).toEqual([
      { ...common, choices: [{ index: 0, delta: { content: "hi" }, finish_reason: null }], usage: null },
      { ...common, choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage: null },
      { ...common, choices: [], usage },
    ]);
    expect(closingChunks(base, "", usage, false)).toEqual([
      { ...common, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
    ]);
  });

  it("a run that did not end ok is an error the client must not retry", () => {
    const run = { runId: "r1" };
    expect(outcomeError({ ...run, status: "ok", runStatus: "ok", reply: "x" }, "k", 1000)).toBeUndefined();
    const cases = [
      [
        { status: "error", runStatus: "error", error: "429 slow down" },
        500,
        "run_failed",
        "run r1 failed: 429 slow down",
      ],
      [{ status: "aborted", runStatus: "aborted" }, 500, "run_aborted", "run r1 was aborted"],
      [
        { status: "timeout", runStatus: "timeout", error: "run timed out" },
        504,
        "run_timeout",
        "run r1 timed out: run timed out",
      ],
    ] as const;
    for (const [result, status, code, message] of cases) {
      expect(outcomeError({ ...run, ...result }, "k", 1000)).toMatchObject({
        status,
        code,
        message,
        retry: false,
      });
    }
    const waited = outcomeError({ ...run, status: "timeout", runStatus: "running" }, "agent:main:x", 30_000);
    expect(waited).toMatchObject({ status: 504, type: "timeout_error", code: "wait_timeout", retry: false });
    expect(waited?.message).toMatch(
      /^no reply within 30s: run r1 is still running in session agent:main:x; it goes on/,
    );
  });

  it("the wait bound is whole seconds from 1 to 600, 600 by default", () => {
    expect(waitBoundMs(undefined)).toBe(600_000);
    expect(waitBoundMs(" 5 ")).toBe(5000);
    for (const bad of ["0", "601", "1.5", "soon", ""]) {
      expect(refusal(() => waitBoundMs(bad)).message).toBe(
        `\`x-switchboard-timeout-seconds\` must be whole seconds from 1 to 600 (got "${bad}")`,
      );
    }
  });
});
