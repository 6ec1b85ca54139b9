/**
 * The OpenAI-compatible API end to end, through the official `openai` client against
 * `wrangler dev` with the echo model: models, a completion, a stream, the errors the client
 * raises, and a session continued with the `x-switchboard-session-key` header.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GATEWAY_TOKEN, type Gateway, startGateway } from "./support/gateway.ts";

const SESSION = "x-switchboard-session-key";

interface Message {
  role: string;
  content: Array<{ type: string; text?: string }>;
}

let gw: Gateway;
let client: OpenAI;

beforeAll(async () => {
  gw = await startGateway({
    config: { agents: { list: [{ id: "main", default: true }, { id: "research" }] } },
  });
  // No retries: every answer these tests look at is the first one.
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: GATEWAY_TOKEN, maxRetries: 0, timeout: 30_000 });
});

afterAll(async () => {
  await gw?.dispose();
});

describe("the openai client", () => {
  it("lists the agents as models", async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(["switchboard/main", "switchboard/research"]);
    expect(await client.models.retrieve("switchboard/research")).toMatchObject({
      id: "switchboard/research",
      owned_by: "switchboard",
    });
  });

  it("gets a completion with the reply and the run's usage", async () => {
    const { data, response } = await client.chat.completions
      .create({
        model: "switchboard/main",
        messages: [
          { role: "system", content: "You are terse." },
          { role: "user", content: "hello gateway" },
        ],
        temperature: 0,
        max_tokens: 100,
      })
      .withResponse();
    expect(data.object).toBe("chat.completion");
    expect(data.model).toBe("switchboard/main");
    expect(data.choices).toEqual([
      { index: 0, message: { role: "assistant", content: "echo: hello gateway" }, finish_reason: "stop" },
    ]);
    const runId = response.headers.get("x-switchboard-run-id");
    expect(data.id).toBe(`chatcmpl-${runId}`);
    const run = await gw.call<{ usage: { inputTokens: number; outputTokens: number } }>("runs.get", {
      runId,
    });
    expect(data.usage).toEqual({
      prompt_tokens: run.usage.inputTokens,
      completion_tokens: run.usage.outputTokens,
      total_tokens: run.usage.inputTokens + run.usage.outputTokens,
    });
    expect(data.usage?.prompt_tokens).toBeGreaterThan(0);
    expect(response.headers.get(SESSION)).toMatch(/^agent:main:openai:dm:[0-9a-f-]{36}$/);
  });

  it("streams the reply: deltas, the stop and the usage, ended by [DONE]", async () => {
    const stream = await client.chat.completions.create({
      model: "research",
      messages: [{ role: "user", content: "stream this" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    const finishes: Array<string | null> = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    let model = "";
    for await (const chunk of stream) {
      model = chunk.model;
      for (const choice of chunk.choices) {
        text += choice.delta.content ?? "";
        finishes.push(choice.finish_reason);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe("echo: stream this");
    expect(model).toBe("switchboard/research");
    expect(finishes.at(-1)).toBe("stop");
    expect(usage?.total_tokens).toBe((usage?.prompt_tokens ?? 0) + (usage?.completion_tokens ?? 0));
    expect(usage?.prompt_tokens).toBeGreaterThan(0);
  });

  it("an unknown model throws a 404 model_not_found", async () => {
    const error = await client.chat.completions
      .create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error).toMatchObject({ status: 404, code: "model_not_found", type: "invalid_request_error" });
  });

  it("a bad token throws a 401", async () => {
    const wrong = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "not-the-token", maxRetries: 0 });
    const error = await wrong.chat.completions
      .create({ model: "switchboard/main", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error).toMatchObject({ status: 401, code: "invalid_api_key" });
  });

  it("a second request with the session header continues the session", async () => {
    const first = await client.chat.completions
      .create({ model: "switchboard/main", messages: [{ role: "user", content: "first turn" }] })
      .withResponse();
    const key = first.response.headers.get(SESSION);
    expect(key).toBeTruthy();
    const continued = new OpenAI({
      baseURL: `${gw.url}/v1`,
      apiKey: GATEWAY_TOKEN,
      maxRetries: 0,
      defaultHeaders: { [SESSION]: key as string },
    });
    const second = await continued.chat.completions
      .create({
        model: "switchboard/main",
        messages: [
          { role: "user", content: "first turn" },
          { role: "assistant", content: "echo: first turn" },
          { role: "user", content: "second turn" },
        ],
      })
      .withResponse();
    expect(second.data.choices[0]?.message.content).toBe("echo: second turn");
    expect(second.response.headers.get(SESSION)).toBe(key);

    const history = await gw.call<{ messages: Message[] }>("chat.history", { sessionKey: key });
    expect(history.messages.map((m) => [m.role, m.content.map((c) => c.text ?? "").join("")])).toEqual([
      ["user", "first turn"],
      ["assistant", "echo: first turn"],
      ["user", "second turn"],
      ["assistant", "echo: second turn"],
    ]);
  });
});
