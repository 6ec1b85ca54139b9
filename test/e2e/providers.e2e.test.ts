/**
 * The `openai` and `anthropic` providers against local fakes that speak their wire formats
 * (SPEC §5): what each request carries (system prompt, tools and their JSON schemas, the key
 * from the secret, thinking options, the catalog's output limit), tool-call round trips, usage
 * accounting, a 429 retried per `models.retry`, and a missing key named in the run's error.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FAKE_ANTHROPIC_KEY, type FakeAnthropic, startFakeAnthropic } from "./support/fake-anthropic.ts";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import { type FakeModel, startFakeModel } from "./support/fake-model.ts";
import { CONNECTOR_SECRET, connectorConfig, type Gateway, startGateway } from "./support/gateway.ts";

const OPENAI_KEY = "sk-openai-e2e-key";

let gw: Gateway;
let connector: FakeConnector;
let openai: FakeModel;
let anthropic: FakeAnthropic;

beforeAll(async () => {
  [connector, openai, anthropic] = await Promise.all([
    startFakeConnector(CONNECTOR_SECRET),
    startFakeModel(),
    startFakeAnthropic(),
  ]);
  gw = await startGateway({
    config: {
      connectors: connectorConfig(connector.url),
      models: {
        providers: {
          openai: { api: "openai", baseUrl: openai.baseUrl, apiKeyEnv: "OPENAI_API_KEY" },
          anthropic: { api: "anthropic", baseUrl: anthropic.baseUrl, apiKeyEnv: "ANTHROPIC_API_KEY" },
          "openai-nokey": { api: "openai", baseUrl: openai.baseUrl, apiKeyEnv: "UNSET_OPENAI_KEY" },
          "anthropic-nokey": {
            api: "anthropic",
            baseUrl: anthropic.baseUrl,
            apiKeyEnv: "UNSET_ANTHROPIC_KEY",
          },
        },
        retry: { attempts: 3, baseDelayMs: 50 },
      },
      agents: {
        defaults: { model: "openai/gpt-4o" },
        list: [
          { id: "main", default: true },
          { id: "reasoner", model: "openai/o3" },
          { id: "claude", model: "anthropic/claude-sonnet-4-20250514" },
          { id: "nokey-openai", model: "openai-nokey/gpt-4o" },
          { id: "nokey-anthropic", model: "anthropic-nokey/claude-sonnet-4" },
        ],
      },
    },
    vars: { OPENAI_API_KEY: OPENAI_KEY, ANTHROPIC_API_KEY: FAKE_ANTHROPIC_KEY },
  });
});

afterAll(async () => {
  await gw?.dispose();
  await Promise.all([connector?.close(), openai?.close(), anthropic?.close()]);
});

beforeEach(() => {
  openai.reset();
  anthropic.reset();
});

interface Run {
  status: string;
  error?: string;
  reply?: string;
  usage?: { inputTokens: number; outputTokens: number };
}

/** Runs one message in a session (created on first use) and returns the settled run. */
async function ask(sessionKey: string, message: string): Promise<Run> {
  const ack = await gw.call<{ runId: string }>("agent", { sessionKey, message });
  const wait = await gw.call<{ status: string }>("agent.wait", { runId: ack.runId, timeoutMs: 30_000 });
  expect(wait.status).not.toBe("timeout");
  return gw.call<Run>("runs.get", { runId: ack.runId });
}

async function setThinking(key: string, thinkingLevel: string | null) {
  await gw.call("sessions.patch", { key, thinkingLevel });
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: { text?: string }) => p.text ?? "").join("");
  return "";
}

describe("openai (Chat Completions)", () => {
  it("sends the system prompt, the tools with their JSON schemas and the bearer key; records usage", async () => {
    const key = "agent:main:openai-tools";
    openai.push(
      { toolCalls: [{ id: "call_clock", name: "current_time" }], usage: { prompt: 40, completion: 6 } },
      { text: "It is noon.", usage: { prompt: 70, completion: 4 } },
    );
    const run = await ask(key, "what time is it?");
    expect(run).toMatchObject({ status: "ok", reply: "It is noon." });
    expect(run.usage).toMatchObject({ inputTokens: 110, outputTokens: 10 });

    expect(openai.requests).toHaveLength(2);
    const [first, second] = openai.requests;
    expect(first?.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(first?.model).toBe("gpt-4o");
    expect(first?.system).toContain(`- session key: ${key}`);
    expect(first?.body.reasoning_effort).toBeUndefined();
    expect(first?.body.max_tokens).toBe(16_384); // the built-in catalog's output limit for gpt-4o
    const history = first?.toolDefs.find((t) => t.name === "sessions_history");
    expect(history?.parameters).toMatchObject({
      type: "object",
      properties: { sessionKey: { type: "string" } },
    });
    expect(first?.toolDefs.map((t) => t.name)).toContain("current_time");

    const toolMessage = second?.messages.find((m) => m.role === "tool");
    expect(toolMessage?.tool_call_id).toBe("call_clock");
    expect(JSON.parse(textOf(toolMessage?.content))).toMatchObject({ timezone: "UTC" });

    const entry = await gw.call<{
      sessions: Array<{ key: string; totalTokens: number; contextTokens: number }>;
    }>("sessions.list", {});
    expect(entry.sessions.find((s) => s.key === key)).toMatchObject({
      totalTokens: 74,
      contextTokens: 128_000,
    });
  });

  it("sends reasoning_effort for the session's thinking level to a reasoning model", async () => {
    const key = "agent:reasoner:thinking";
    const first = await ask(key, "hello");
    expect(first.status).toBe("ok");
    expect(openai.requests[0]?.body.reasoning_effort).toBeUndefined();
    // o3 takes its system prompt as a developer message and its limit as max_completion_tokens.
    expect(openai.requests[0]?.messages[0]?.role).toBe("developer");
    expect(openai.requests[0]?.system).toContain(`- session key: ${key}`);
    expect(openai.requests[0]?.body.max_completion_tokens).toBe(100_000);

    await setThinking(key, "high");
    expect((await ask(key, "think hard")).status).toBe("ok");
    expect(openai.requests[1]?.body.reasoning_effort).toBe("high");
    expect(openai.requests[1]?.authorization).toBe(`Bearer ${OPENAI_KEY}`);

    await setThinking(key, "minimal");
    expect((await ask(key, "think a little")).status).toBe("ok");
    expect(openai.requests[2]?.body.reasoning_effort).toBe("low"); // o3 has no "minimal"

    await setThinking(key, null);
    expect((await ask(key, "no thinking")).status).toBe("ok");
    expect(openai.requests[3]?.body.reasoning_effort).toBeUndefined();
  });

  it("does not send reasoning_effort to a model without reasoning", async () => {
    const key = "agent:main:openai-no-reasoning";
    expect((await ask(key, "hi")).status).toBe("ok");
    await setThinking(key, "high");
    expect((await ask(key, "hi again")).status).toBe("ok");
    expect(openai.requests).toHaveLength(2);
    expect(openai.requests[1]?.body.reasoning_effort).toBeUndefined();
  });

  it("ends the run with an error naming the missing key's secret, without calling the provider", async () => {
    const run = await ask("agent:nokey-openai:main", "hello");
    expect(run.status).toBe("error");
    expect(run.error).toContain("needs the secret UNSET_OPENAI_KEY");
    expect(openai.requests).toHaveLength(0);
  });
});

describe("anthropic (Messages API)", () => {
  it("makes a tool round trip in content blocks, with the x-api-key from the secret; records usage", async () => {
    const key = "agent:claude:tools";
    anthropic.push(
      { toolUse: { id: "toolu_clock", name: "current_time" }, usage: { input: 50, output: 9 } },
      { text: "Noon, UTC.", usage: { input: 80, output: 3 } },
    );
    const run = await ask(key, "what time is it?");
    expect(run).toMatchObject({ status: "ok", reply: "Noon, UTC." });
    expect(run.usage).toMatchObject({ inputTokens: 130, outputTokens: 12 });

    expect(anthropic.requests.map((r) => r.status)).toEqual([200, 200]);
    const [first, second] = anthropic.requests;
    expect(first?.apiKey).toBe(FAKE_ANTHROPIC_KEY);
    expect(first?.version).toBe("2023-06-01");
    expect(first?.body.model).toBe("claude-sonnet-4-20250514");
    expect(first?.body.max_tokens).toBe(64_000); // the built-in catalog's output limit
    expect(first?.body.thinking).toBeUndefined();
    expect(textOf(first?.body.system)).toContain(`- session key: ${key}`);
    const clock = first?.body.tools?.find((t) => t.name === "current_time");
    expect(clock?.input_schema).toMatchObject({ type: "object" });

    const [, assistant, toolTurn] = second?.body.messages ?? [];
    expect(assistant).toMatchObject({
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_clock", name: "current_time", input: {} }],
    });
    expect(toolTurn?.role).toBe("user");
    const blocks = toolTurn?.content ?? [];
    const result = typeof blocks === "string" ? undefined : blocks[0];
    expect(result).toMatchObject({ type: "tool_result", tool_use_id: "toolu_clock" });
    expect(JSON.stringify(result?.content)).toContain("UTC");
  });

  it("retries a 429 carrying retry-after per models.retry, then succeeds", async () => {
    anthropic.push(
      { status: 429, message: "Number of request tokens has exceeded your rate limit", retryAfter: "1" },
      { text: "after the wait" },
    );
    const run = await ask("agent:claude:rate-limited", "hello");
    expect(run).toMatchObject({ status: "ok", reply: "after the wait" });
    expect(run.error).toBeUndefined();
    expect(anthropic.requests.map((r) => r.status)).toEqual([429, 200]);
  });

  it("ends the run quoting the 429 after models.retry.attempts calls", async () => {
    anthropic.push(
      ...Array.from({ length: 3 }, () => ({ status: 429, message: "rate limit exceeded", retryAfter: "1" })),
    );
    const run = await ask("agent:claude:rate-limited-always", "hello");
    expect(run.status).toBe("error");
    expect(run.error).toContain("429");
    expect(run.error).toContain("rate limit exceeded");
    expect(anthropic.requests.map((r) => r.status)).toEqual([429, 429, 429]);
  });

  it("turns the thinking level into a thinking budget and sends the signed thinking back with the tool call", async () => {
    const key = "agent:claude:thinking";
    expect((await ask(key, "hello")).status).toBe("ok");
    expect(anthropic.requests[0]?.body.thinking).toBeUndefined();

    await setThinking(key, "medium");
    anthropic.push(
      { toolUse: { id: "toolu_think", name: "current_time" }, thinking: "I should check the clock." },
      { text: "Checked.", thinking: "The tool answered." },
    );
    const run = await ask(key, "what time is it?");
    expect(run).toMatchObject({ status: "ok", reply: "Checked." });
    const [, call, followUp] = anthropic.requests;
    expect(call?.body.thinking).toEqual({ type: "enabled", budget_tokens: 8_192 });
    expect(followUp?.body.thinking).toEqual({ type: "enabled", budget_tokens: 8_192 });
    const assistant = followUp?.body.messages.findLast((m) => m.role === "assistant");
    expect(assistant?.content).toEqual([
      { type: "thinking", thinking: "I should check the clock.", signature: expect.any(String) },
      { type: "tool_use", id: "toolu_think", name: "current_time", input: {} },
    ]);
    expect(anthropic.requests.map((r) => r.status)).toEqual([200, 200, 200]);

    // Thinking never enters the transcript.
    const history = await gw.call<{ messages: Array<{ content: Array<{ type: string }> }> }>("chat.history", {
      sessionKey: key,
      includeTools: true,
    });
    const types = history.messages.flatMap((m) => m.content.map((p) => p.type));
    expect(types).not.toContain("reasoning");
    expect(types).not.toContain("thinking");

    await setThinking(key, "high");
    expect((await ask(key, "once more")).status).toBe("ok");
    expect(anthropic.requests[3]?.body.thinking).toEqual({ type: "enabled", budget_tokens: 16_384 });
  });

  it("ends the run with an error naming the missing key's secret, without calling the provider", async () => {
    const run = await ask("agent:nokey-anthropic:main", "hello");
    expect(run.status).toBe("error");
    expect(run.error).toContain("needs the secret UNSET_ANTHROPIC_KEY");
    expect(anthropic.requests).toHaveLength(0);
  });
});
