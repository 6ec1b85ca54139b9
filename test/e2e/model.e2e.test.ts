/**
 * Runs against a scripted OpenAI-compatible model (SPEC §5, §17 "Model retries", "Runs, more"):
 * the tool loop and its transcript, token accounting, and provider retries and failures.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { FakeConnector } from "./support/fake-connector.ts";
import type { FakeModel } from "./support/fake-model.ts";
import { directMessage, GATEWAY_TOKEN, type Gateway, settled, waitFor } from "./support/gateway.ts";
import { startWorld, type World } from "./support/world.ts";

const RETRY_ATTEMPTS = 3;
const RETRY_BASE_MS = 50;

interface Message {
  role: string;
  content: Array<{ type: string; text?: string; id?: string; name?: string; arguments?: unknown }>;
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
  runId?: string;
  model?: string;
}

let world: World;
let gw: Gateway;
let connector: FakeConnector;
let model: FakeModel;

beforeAll(async () => {
  world = await startWorld({
    retry: { attempts: RETRY_ATTEMPTS, baseDelayMs: RETRY_BASE_MS },
    agents: { defaults: { model: "fake/test-model" } },
    delivery: { maxAttempts: 3, baseDelayMs: 200, maxDelayMs: 1000 },
  });
  ({ gw, connector, model } = world);
});

afterAll(async () => {
  await world?.dispose();
});

beforeEach(() => {
  model.reset();
});

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: { text?: string }) => p.text ?? "").join("");
  return "";
}

/** Sends one direct message and waits for the delivery answering it. */
async function converse(peer: string, messageId: string, text: string) {
  const ack = await gw.inbound("telegram", directMessage({ messageId, from: peer, text }));
  expect(ack.status).toBe(202);
  const delivery = await waitFor(() => connector.deliveriesFor({ replyToMessageId: messageId })[0], 30_000, {
    what: `the delivery answering ${messageId}`,
  });
  return { ack: ack.body, delivery };
}

describe("a tool-call round trip", () => {
  const peer = "200000001";
  const key = `agent:main:telegram:dm:${peer}`;
  let runId: string;
  let delivered: Awaited<ReturnType<typeof converse>>["delivery"];

  beforeAll(async () => {
    model.reset();
    model.push(
      {
        toolCalls: [{ id: "call_time_1", name: "current_time", arguments: {} }],
        usage: { prompt: 11, completion: 7 },
      },
      { text: "It is noon in UTC.", usage: { prompt: 23, completion: 5 } },
    );
    const { ack, delivery } = await converse(peer, "m-tool-1", "what time is it?");
    runId = ack.runId as string;
    delivered = delivery;
  });

  it("delivers the final text as the reply", () => {
    expect(delivered.signatureCheck).toBe("ok");
    expect(delivered.body).toMatchObject({
      deliveryId: `${runId}:reply`,
      kind: "reply",
      sessionKey: key,
      channel: "telegram",
      accountId: "default",
      to: peer,
      text: "It is noon in UTC.",
      replyToMessageId: "m-tool-1",
    });
    expect(connector.deliveriesFor({ sessionKey: key })).toHaveLength(1);
  });

  it("keeps user, assistant(toolCall), toolResult, assistant in the transcript", async () => {
    const history = await gw.call<{ messages: Message[] }>("chat.history", {
      sessionKey: key,
      includeTools: true,
    });
    expect(history.messages.map((m) => m.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    const [user, call, result, final] = history.messages as [Message, Message, Message, Message];
    expect(textOf(user.content)).toBe("what time is it?");
    expect(call.content).toEqual([
      { type: "toolCall", id: "call_time_1", name: "current_time", arguments: {} },
    ]);
    expect(call.model).toBe("fake/test-model");
    expect(result).toMatchObject({ toolCallId: "call_time_1", toolName: "current_time", isError: false });
    const toolOutput = JSON.parse(textOf(result.content)) as {
      timezone: string;
      epochMs: number;
      iso: string;
    };
    expect(toolOutput.timezone).toBe("UTC");
    expect(new Date(toolOutput.iso).getTime()).toBe(toolOutput.epochMs);
    expect(final.content).toEqual([{ type: "text", text: "It is noon in UTC." }]);
    expect(history.messages.every((m) => m.runId === runId)).toBe(true);

    const withoutTools = await gw.call<{ messages: Message[] }>("chat.history", {
      sessionKey: key,
      includeTools: false,
    });
    expect(withoutTools.messages.map((m) => m.role)).toEqual(["user", "assistant", "assistant"]);
  });

  it("accounts tokens: sums per run, totalTokens = the last call's prompt + completion", async () => {
    const res = await gw.fetch("/tools/invoke", {
      method: "POST",
      headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ tool: "session_status", sessionKey: key }),
    });
    expect(res.status).toBe(200);
    const { result } = (await res.json()) as { result: Record<string, unknown> };
    expect(result).toMatchObject({
      sessionId: expect.any(String),
      model: "fake/test-model",
      inputTokens: 11 + 23,
      outputTokens: 7 + 5,
      totalTokens: 23 + 5,
    });
    const list = await gw.call<{ sessions: Array<{ key: string; totalTokens: number }> }>(
      "sessions.list",
      {},
    );
    expect(list.sessions.find((s) => s.key === key)?.totalTokens).toBe(28);
    const run = await gw.call<{ status: string; usage: Record<string, number> }>("runs.get", { runId });
    expect(run.status).toBe("ok");
    expect(run.usage).toMatchObject({ inputTokens: 34, outputTokens: 12 });
  });
});

describe("what the model is sent", () => {
  it("gets the system prompt, the user text, the tools, then the tool result", async () => {
    const peer = "200000002";
    model.push(
      { toolCalls: [{ id: "call_time_2", name: "current_time", arguments: {} }] },
      { text: "Done." },
    );
    await converse(peer, "m-tool-2", "time please");
    expect(model.requests).toHaveLength(2);
    const [first, second] = model.requests as [(typeof model.requests)[0], (typeof model.requests)[0]];
    expect(first.model).toBe("test-model");
    expect(first.stream).toBe(false);
    expect(first.system).toContain(`- session key: agent:main:telegram:dm:${peer}`);
    expect(first.system).toContain("- channel: telegram");
    expect(first.tools).toContain("current_time");
    const lastUser = first.messages.filter((m) => m.role === "user").at(-1);
    expect(textOf(lastUser?.content)).toBe("time please");

    const assistantCall = second.messages.find((m) => m.role === "assistant");
    expect(assistantCall?.tool_calls?.map((c) => [c.id, c.function.name])).toEqual([
      ["call_time_2", "current_time"],
    ]);
    const toolMessage = second.messages.find((m) => m.role === "tool");
    expect(toolMessage?.tool_call_id).toBe("call_time_2");
    expect(JSON.parse(textOf(toolMessage?.content))).toMatchObject({ timezone: "UTC" });
  });
});

describe("provider failures", () => {
  it("retries a 429 twice and succeeds on the third call, with backoff between calls", async () => {
    const peer = "200000003";
    model.fail(429, 2, "Rate limit reached for test-model");
    model.push({ text: "third time lucky" });
    const { ack, delivery } = await converse(peer, "m-429-twice", "hello");
    expect(delivery.body).toMatchObject({ kind: "reply", text: "third time lucky" });
    expect(model.requests).toHaveLength(3);
    const gaps = model.requests.slice(1).map((r, i) => r.at - (model.requests[i]?.at ?? 0));
    // Backoff doubles from baseDelayMs (plus up to 20% jitter); allow a few ms of clock skew.
    expect(gaps[0]).toBeGreaterThanOrEqual(RETRY_BASE_MS - 5);
    expect(gaps[1]).toBeGreaterThanOrEqual(2 * RETRY_BASE_MS - 5);
    const run = await gw.call<{ status: string; error?: string }>("runs.get", { runId: ack.runId });
    expect(run.status).toBe("ok");
    expect(run.error).toBeUndefined();
  });

  it("ends the run with error quoting the 429 after exactly models.retry.attempts calls, and tells the user", async () => {
    const peer = "200000004";
    const message = "Rate limit reached for test-model";
    model.setFallback({ status: 429, message });
    const ack = await gw.inbound(
      "telegram",
      directMessage({ messageId: "m-429-always", from: peer, text: "hi" }),
    );
    expect(ack.status).toBe(202);
    const wait = await gw.call<{ status: string; runStatus: string; error?: string }>("agent.wait", {
      runId: ack.body.runId,
      timeoutMs: 20_000,
    });
    expect(wait).toMatchObject({ status: "error", runStatus: "error" });
    expect(wait.error).toBe(`provider error 429 ${message}`);

    const notice = await waitFor(
      () => connector.deliveriesFor({ replyToMessageId: "m-429-always" })[0],
      20_000,
      {
        what: "the error notice",
      },
    );
    expect(notice.body).toMatchObject({
      deliveryId: `${ack.body.runId}:notice`,
      kind: "notice",
      to: peer,
      text: expect.stringMatching(/^⚠️ Sorry, something went wrong/),
    });
    // The chat hears that the run failed, never the provider's message.
    expect(String(notice.body?.text)).not.toContain(message);
    expect(String(notice.body?.text)).not.toContain("429");
    // No late extra attempts: the count stays exact once the session has settled.
    await settled(gw, String(ack.body.sessionKey));
    expect(model.requests).toHaveLength(RETRY_ATTEMPTS);
    const run = await gw.call<{ status: string; error: string }>("runs.get", { runId: ack.body.runId });
    expect(run.status).toBe("error");
    expect(run.error).toContain("429");
    expect(run.error).toContain(message);
    const history = await gw.call<{ messages: Message[] }>("chat.history", {
      sessionKey: `agent:main:telegram:dm:${peer}`,
    });
    expect(history.messages.map((m) => m.role)).toEqual(["user"]);
  });

  it("retries a 500 once and succeeds", async () => {
    model.fail(500, 1, "upstream exploded");
    model.push({ text: "recovered" });
    const { delivery } = await converse("200000005", "m-500-once", "hello");
    expect(delivery.body?.text).toBe("recovered");
    expect(model.requests).toHaveLength(2);
  });
});
