/**
 * The OpenAI-compatible API in workerd: models, auth and errors in OpenAI's shape, completions
 * and streams from the echo and a scripted model, which session a request runs in, and waits
 * that end before the run does.
 */
import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { app } from "../../src/http/app";
import { SCRIPTED_MODEL_CONFIG, scriptedWorld } from "./model-support";
import { hangingModel, SLOW_MODEL_CONFIG, withActorConfig } from "./rpc-support";
import { configText, rpc, TOKEN } from "./support";

const SESSION = "x-switchboard-session-key";

interface Completion {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: Array<{ index: number; message: { role: string; content: string }; finish_reason: string }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}
interface OpenAIErrorBody {
  error: { message: string; type: string; code: string };
}
interface HistoryMessage {
  role: string;
  content: Array<{ type: string; text?: string }>;
}

function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  return exports.default.fetch(`http://gw.test${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const chat = (body: unknown, headers?: Record<string, string>) => post("/v1/chat/completions", body, headers);
const ask = (text: string, extra: Record<string, unknown> = {}) => ({
  model: "switchboard/main",
  messages: [{ role: "user", content: text }],
  ...extra,
});

/** Sends the request through the app with another config (the actors keep the test config). */
async function withConfig(
  config: unknown,
  path: string,
  init: RequestInit = {},
  vars: Record<string, string> = {},
) {
  return app.fetch(
    new Request(`http://gw.test${path}`, {
      ...init,
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...init.headers },
    }),
    { ...env, SWITCHBOARD_CONFIG: configText(config), ...vars },
    createExecutionContext(),
  );
}

async function expectOpenAIError(
  res: Response,
  status: number,
  type: string,
  code: string,
  message?: string | RegExp,
) {
  const body = (await res.json()) as OpenAIErrorBody;
  expect({ status: res.status, type: body.error.type, code: body.error.code }).toEqual({
    status,
    type,
    code,
  });
  expect(Object.keys(body)).toEqual(["error"]);
  if (typeof message === "string") expect(body.error.message).toBe(message);
  else if (message) expect(body.error.message).toMatch(message);
  return body.error;
}

async function historyTexts(sessionKey: string) {
  const res = await rpc<{ messages: HistoryMessage[] }>("chat.history", { sessionKey });
  expect(res.status).toBe(200);
  return res.payload.messages.map((m) => `${m.role}: ${m.content.map((c) => c.text ?? "").join("")}`);
}

/** The `data:` payloads of an SSE body, in order. */
async function events(res: Response): Promise<string[]> {
  const text = await res.text();
  return text
    .split("\n\n")
    .filter((block) => block.trim() !== "")
    .map((block) =>
      block
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => line.slice("data: ".length))
        .join("\n"),
    );
}

describe("GET /v1/models", () => {
  it("lists the default agent when agents.list is empty", async () => {
    const res = await exports.default.fetch("http://gw.test/v1/models", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      object: "list",
      data: [{ id: "switchboard/main", object: "model", created: 0, owned_by: "switchboard" }],
    });
  });

  it("lists the configured agents, and retrieves one by id", async () => {
    const config = { agents: { list: [{ id: "main", default: true }, { id: "research" }] } };
    const list = (await (await withConfig(config, "/v1/models")).json()) as { data: Array<{ id: string }> };
    expect(list.data.map((m) => m.id)).toEqual(["switchboard/main", "switchboard/research"]);
    const one = await withConfig(config, "/v1/models/switchboard%2Fresearch");
    expect(await one.json()).toEqual({
      id: "switchboard/research",
      object: "model",
      created: 0,
      owned_by: "switchboard",
    });
    expect(await (await withConfig(config, "/v1/models/switchboard/main")).json()).toMatchObject({
      id: "switchboard/main",
    });
    await expectOpenAIError(
      await withConfig(config, "/v1/models/gpt-4o"),
      404,
      "invalid_request_error",
      "model_not_found",
    );
  });
});

describe("auth and errors", () => {
  it("a missing or wrong token is a 401 authentication_error; an unset GATEWAY_TOKEN a 503 naming it", async () => {
    const noToken = await exports.default.fetch("http://gw.test/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify(ask("hi")),
    });
    await expectOpenAIError(noToken, 401, "authentication_error", "invalid_api_key", /missing bearer token/);
    const wrong = await chat(ask("hi"), { authorization: "Bearer nope" });
    await expectOpenAIError(wrong, 401, "authentication_error", "invalid_api_key", "invalid bearer token");
    const models = await exports.default.fetch("http://gw.test/v1/models", {
      headers: { authorization: "Bearer nope" },
    });
    await expectOpenAIError(models, 401, "authentication_error", "invalid_api_key");
    const unset = await withConfig({}, "/v1/models", {}, { GATEWAY_TOKEN: "" });
    expect(unset.headers.get("x-should-retry")).toBe("false");
    await expectOpenAIError(unset, 503, "server_error", "unavailable", /secret GATEWAY_TOKEN is set/);
  });

  it("an unknown model is a 404 model_not_found listing the models; nothing runs", async () => {
    const res = await chat(ask("hi", { model: "gpt-4o" }));
    await expectOpenAIError(
      res,
      404,
      "invalid_request_error",
      "model_not_found",
      "The model `gpt-4o` does not exist: models are agents (switchboard/main)",
    );
    expect(res.headers.get(SESSION)).toBeNull();
  });

  it("invalid bodies are 400 invalid_request_error naming the field", async () => {
    const cases: Array<[unknown, string | RegExp]> = [
      ["{not json", /^body is not valid JSON/],
      [{ messages: [{ role: "user", content: "x" }] }, "`model` is required"],
      [{ model: "main" }, "`messages` is required"],
      [{ model: "main", messages: [] }, /^`messages`/],
      [{ model: "main", messages: [{ role: "system", content: "x" }] }, /has no message with role `user`/],
      [ask("x", { stream: "yes" }), "`stream` must be boolean"],
      [ask("x", { n: 2 }), "`n` must be one of 1"],
      [
        {
          model: "main",
          messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }],
        },
        "`messages[0].content[0]` is a image_url part; only text parts are supported",
      ],
      [ask("/status"), /^"\/status" is a chat command/],
    ];
    for (const [body, message] of cases) {
      await expectOpenAIError(await chat(body), 400, "invalid_request_error", "invalid_request", message);
    }
    const badTimeout = await chat(ask("x"), { "x-switchboard-timeout-seconds": "0" });
    await expectOpenAIError(
      badTimeout,
      400,
      "invalid_request_error",
      "invalid_request",
      /whole seconds from 1 to 600/,
    );
  });

  it("a body over 1 MB is a 413 in OpenAI's shape", async () => {
    const res = await chat(ask("x".repeat(1024 * 1024 + 10)));
    await expectOpenAIError(
      res,
      413,
      "invalid_request_error",
      "request_too_large",
      /larger than 1048576 bytes/,
    );
  });

  it("known paths with the wrong method are a 405; /v1/transcripts still answers", async () => {
    const get = await exports.default.fetch("http://gw.test/v1/chat/completions", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    const postModels = await post("/v1/models", {});
    expect(postModels.status).toBe(405);
    expect(postModels.headers.get("allow")).toBe("GET");
    const transcript = await exports.default.fetch("http://gw.test/v1/transcripts/nope.jsonl", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(transcript.status).toBe(404);
    expect(await transcript.json()).toMatchObject({ ok: false, error: { code: "NOT_FOUND" } });
  });
});

describe("POST /v1/chat/completions", () => {
  it("answers the run's reply as a chat.completion, in a fresh session named in the response header", async () => {
    const res = await chat({
      ...ask("hello there"),
      temperature: 0.2,
      max_tokens: 64,
      tools: [{ type: "function", function: { name: "f", parameters: {} } }],
      stream: false,
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Completion;
    const runId = res.headers.get("x-switchboard-run-id");
    const key = res.headers.get(SESSION);
    expect(key).toMatch(/^agent:main:openai:dm:[0-9a-f-]{36}$/);
    expect(body).toEqual({
      id: `chatcmpl-${runId}`,
      object: "chat.completion",
      created: expect.any(Number),
      model: "switchboard/main",
      choices: [
        { index: 0, message: { role: "assistant", content: "echo: hello there" }, finish_reason: "stop" },
      ],
      usage: expect.any(Object),
    });
    const run = await rpc<{
      status: string;
      trigger: string;
      usage: { inputTokens: number; outputTokens: number };
    }>("runs.get", { runId });
    expect(run.payload).toMatchObject({ status: "ok", trigger: "rpc" });
    const { inputTokens, outputTokens } = run.payload.usage;
    expect(inputTokens).toBeGreaterThan(0);
    expect(body.usage).toEqual({
      prompt_tokens: inputTokens,
      completion_tokens: outputTokens,
      total_tokens: inputTokens + outputTokens,
    });
    const session = await rpc<{ key: string; channel: string }>("sessions.resolve", { key: key as string });
    expect(session.status).toBe(200);
    // Another request without header or user gets another session.
    const other = await chat(ask("hello again"));
    expect(other.headers.get(SESSION)).toMatch(/^agent:main:openai:dm:/);
    expect(other.headers.get(SESSION)).not.toBe(key);
  });

  it("runs only the last user message (text parts joined); the session keeps its history", async () => {
    const first = await chat(ask("one"));
    const key = first.headers.get(SESSION) as string;
    const second = await chat(
      {
        model: "main",
        messages: [
          { role: "system", content: "ignored" },
          { role: "user", content: "one" },
          { role: "assistant", content: "echo: one" },
          {
            role: "user",
            content: [
              { type: "text", text: "two" },
              { type: "text", text: "three" },
            ],
          },
        ],
      },
      { [SESSION]: key },
    );
    expect(second.status).toBe(200);
    expect(second.headers.get(SESSION)).toBe(key);
    expect(((await second.json()) as Completion).choices[0]?.message.content).toBe("echo: two\nthree");
    expect(await historyTexts(key)).toEqual([
      "user: one",
      "assistant: echo: one",
      "user: two\nthree",
      "assistant: echo: two\nthree",
    ]);
  });

  it("usage is the scripted model's reported tokens", async () => {
    const world = scriptedWorld(() => ({ text: "scripted answer" }));
    const key = "agent:main:openai:dm:scripted";
    await withActorConfig(key, SCRIPTED_MODEL_CONFIG);
    const res = await chat(ask("count me"), { [SESSION]: key });
    const body = (await res.json()) as Completion;
    expect(body.choices[0]?.message.content).toBe("scripted answer");
    expect(body.usage).toEqual({ prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 });
    world.restore();
  });

  it("a run that fails is a 500 with the cause, which the client must not retry", async () => {
    const world = scriptedWorld(() => ({ status: 400, error: "context too long for this model" }));
    const key = "agent:main:openai:dm:failing";
    await withActorConfig(key, SCRIPTED_MODEL_CONFIG);
    const res = await chat(ask("boom"), { [SESSION]: key });
    expect(res.headers.get("x-should-retry")).toBe("false");
    expect(res.headers.get(SESSION)).toBe(key);
    const error = await expectOpenAIError(res, 500, "server_error", "run_failed");
    expect(error.message).toMatch(/^run [0-9a-f-]+ failed: .*context too long for this model/);
    world.restore();
  });

  it("a wait that ends first is a 504 naming the run, which goes on in its session", async () => {
    const model = hangingModel();
    const key = "agent:main:openai:dm:slow";
    await withActorConfig(key, SLOW_MODEL_CONFIG);
    const res = await chat(ask("think hard"), { [SESSION]: key, "x-switchboard-timeout-seconds": "1" });
    expect(res.headers.get("x-should-retry")).toBe("false");
    const runId = res.headers.get("x-switchboard-run-id");
    await expectOpenAIError(
      res,
      504,
      "timeout_error",
      "wait_timeout",
      new RegExp(`^no reply within 1s: run ${runId} is still (running|queued) in session ${key}; it goes on`),
    );
    expect((await rpc("runs.get", { runId })).payload.status).toMatch(/^(running|queued)$/);
    expect(await rpc("sessions.delete", { key })).toMatchObject({ status: 200 });
    model.restore();
  });

  it("the same Idempotency-Key answers the same run without running it again", async () => {
    const headers = { "idempotency-key": "retry-1" };
    const first = await chat(ask("only once"), headers);
    const second = await chat(ask("only once"), headers);
    expect(second.headers.get("x-switchboard-run-id")).toBe(first.headers.get("x-switchboard-run-id"));
    expect(second.headers.get(SESSION)).toBe(first.headers.get(SESSION));
    expect(((await second.json()) as Completion).choices[0]?.message.content).toBe("echo: only once");
    expect(await historyTexts(first.headers.get(SESSION) as string)).toEqual([
      "user: only once",
      "assistant: echo: only once",
    ]);
  });
});

describe("concurrent retries", () => {
  it("two requests with the same Idempotency-Key at once run the message once, in one session", async () => {
    const headers = { "idempotency-key": "retry-concurrent" };
    const [a, b] = await Promise.all([chat(ask("at once"), headers), chat(ask("at once"), headers)]);
    expect(b.headers.get("x-switchboard-run-id")).toBe(a.headers.get("x-switchboard-run-id"));
    expect(b.headers.get(SESSION)).toBe(a.headers.get(SESSION));
    expect(await historyTexts(a.headers.get(SESSION) as string)).toEqual([
      "user: at once",
      "assistant: echo: at once",
    ]);
  });
});

describe("which session", () => {
  it("`user` is a direct chat from channel openai: the main session under dmScope main", async () => {
    const res = await chat(ask("as alice", { user: "alice" }));
    expect(res.headers.get(SESSION)).toBe("agent:main:main");
  });

  it("under per-channel-peer, each user has a session of their own that later requests continue", async () => {
    const config = { session: { dmScope: "per-channel-peer" } };
    const send = (text: string, user: string) =>
      withConfig(config, "/v1/chat/completions", {
        method: "POST",
        body: JSON.stringify(ask(text, { user })),
      });
    const a1 = await send("first from bob", "Bob");
    expect(a1.headers.get(SESSION)).toBe("agent:main:openai:dm:bob");
    await send("second from bob", "bob");
    const c1 = await send("from carol", "carol");
    expect(c1.headers.get(SESSION)).toBe("agent:main:openai:dm:carol");
    expect(await historyTexts("agent:main:openai:dm:bob")).toEqual([
      "user: first from bob",
      "assistant: echo: first from bob",
      "user: second from bob",
      "assistant: echo: second from bob",
    ]);
    const session = await rpc<{ key: string; sessionId: string }>("sessions.resolve", {
      key: "agent:main:openai:dm:carol",
    });
    expect(session.status).toBe(200);
  });

  it("a session a request creates is listed with channel openai, whatever its key shape", async () => {
    const config = { session: { dmScope: "per-peer" } };
    const res = await withConfig(config, "/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify(ask("hi", { user: "dave" })),
    });
    expect(res.headers.get(SESSION)).toBe("agent:main:dm:dave");
    const list = await rpc<{ sessions: Array<{ key: string; channel: string }> }>("sessions.list", {});
    expect(list.payload.sessions.find((s) => s.key === "agent:main:dm:dave")?.channel).toBe("openai");
  });

  it("the header names any session of the model's agent; another agent's session is a 400", async () => {
    const config = { agents: { list: [{ id: "main", default: true }, { id: "research" }] } };
    const send = (model: string, key: string) =>
      withConfig(config, "/v1/chat/completions", {
        method: "POST",
        headers: { [SESSION]: key },
        body: JSON.stringify(ask("hi", { model })),
      });
    const own = await send("switchboard/research", "main");
    expect(own.status).toBe(200);
    expect(own.headers.get(SESSION)).toBe("agent:research:main");
    await expectOpenAIError(
      await send("switchboard/main", "agent:research:main"),
      400,
      "invalid_request_error",
      "invalid_request",
      "`x-switchboard-session-key` agent:research:main belongs to agent research, not to the model's agent main (use model switchboard/research)",
    );
    // An agent-less key belongs to the agent its entry was created for.
    expect((await send("research", "hook:ci-digest")).status).toBe(200);
    await expectOpenAIError(
      await send("main", "hook:ci-digest"),
      400,
      "invalid_request_error",
      "invalid_request",
      /belongs to agent research/,
    );
  });
});

describe("stream: true", () => {
  it("sends the role chunk, the reply as one delta, the stop chunk and [DONE]", async () => {
    const res = await chat(ask("stream me", { stream: true }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const runId = res.headers.get("x-switchboard-run-id");
    const data = await events(res);
    expect(data.at(-1)).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as Record<string, unknown>);
    const common = {
      id: `chatcmpl-${runId}`,
      object: "chat.completion.chunk",
      created: expect.any(Number),
      model: "switchboard/main",
    };
    expect(chunks).toEqual([
      { ...common, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
      { ...common, choices: [{ index: 0, delta: { content: "echo: stream me" }, finish_reason: null }] },
      { ...common, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
    ]);
  });

  it("sends keep-alive comments while the run goes on", async () => {
    const model = hangingModel();
    const key = "agent:main:openai:dm:stream-keepalive";
    await withActorConfig(key, SLOW_MODEL_CONFIG);
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      const res = await chat(ask("take your time", { stream: true }), {
        [SESSION]: key,
        "x-switchboard-timeout-seconds": "1",
      });
      await vi.waitFor(() => expect(vi.getTimerCount()).toBeGreaterThan(0));
      vi.advanceTimersByTime(30_000);
      const text = await res.text();
      expect(text.match(/^: keep-alive$/gm)).toHaveLength(2);
      // The wait then ends (1 s here), as an error event after the comments; no timer is left.
      expect(text).toMatch(/: keep-alive\n\n(.|\n)*"code":"wait_timeout"/);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
      expect(await rpc("sessions.delete", { key })).toMatchObject({ status: 200 });
      model.restore();
    }
  });

  it("with stream_options.include_usage, a last chunk carries the usage", async () => {
    const world = scriptedWorld(() => ({ text: "counted" }));
    const key = "agent:main:openai:dm:stream-usage";
    await withActorConfig(key, SCRIPTED_MODEL_CONFIG);
    const res = await chat(ask("count", { stream: true, stream_options: { include_usage: true } }), {
      [SESSION]: key,
    });
    const chunks = (await events(res))
      .slice(0, -1)
      .map((d) => JSON.parse(d) as { choices: unknown[]; usage: unknown });
    expect(chunks.map((c) => c.usage)).toEqual([
      null,
      null,
      null,
      { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
    ]);
    expect(chunks.at(-1)?.choices).toEqual([]);
    world.restore();
  });

  it("a run that fails sends an error object in the stream, and no [DONE]", async () => {
    const world = scriptedWorld(() => ({ status: 400, error: "no such thing" }));
    const key = "agent:main:openai:dm:stream-failing";
    await withActorConfig(key, SCRIPTED_MODEL_CONFIG);
    const res = await chat(ask("boom", { stream: true }), { [SESSION]: key });
    expect(res.status).toBe(200);
    const data = await events(res);
    expect(data).not.toContain("[DONE]");
    const last = JSON.parse(data.at(-1) as string) as OpenAIErrorBody;
    expect(last.error).toMatchObject({ type: "server_error", code: "run_failed" });
    expect(last.error.message).toMatch(/no such thing/);
    world.restore();
  });
});
