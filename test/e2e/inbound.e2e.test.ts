/**
 * The inbound pipeline end to end (SPEC §4, §13, §14): signed webhook → 202 → run with the echo
 * model → signed delivery to the connector, plus the refusals that must write nothing.
 *
 * One gateway for the file. The refusal tests come first and assert that the gateway is still
 * empty, so they rely on vitest running a file's tests in order (it does unless told otherwise).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import {
  CONNECTOR_SECRET,
  connectorConfig,
  directMessage,
  GATEWAY_TOKEN,
  type Gateway,
  settled,
  startGateway,
  waitFor,
} from "./support/gateway.ts";

interface Message {
  id: string;
  seq: number;
  role: string;
  content: Array<{ type: string; text?: string }>;
  runId?: string;
}

let gw: Gateway;
let connector: FakeConnector;

beforeAll(async () => {
  connector = await startFakeConnector(CONNECTOR_SECRET);
  gw = await startGateway({
    config: {
      connectors: connectorConfig(connector.url),
      session: { dmScope: "per-channel-peer" },
      delivery: { maxAttempts: 3, baseDelayMs: 200, maxDelayMs: 1000 },
    },
  });
});

afterAll(async () => {
  await gw?.dispose();
  await connector?.close();
});

async function assertNothingWritten() {
  const sessions = await gw.call<{ count: number }>("sessions.list", { includeGlobal: true });
  expect(sessions.count).toBe(0);
  const deliveries = await gw.call<{ deliveries: unknown[] }>("deliveries.list", {});
  expect(deliveries.deliveries).toEqual([]);
  expect(connector.attempts).toHaveLength(0);
}

describe("refused inbound requests write nothing", () => {
  const valid = () => directMessage({ messageId: "bad-1", from: "555000111", text: "hello" });

  it("answers 401 to a signature made with the wrong secret", async () => {
    const res = await gw.inbound("telegram", valid(), { secret: "not-the-secret" });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({
      ok: false,
      error: { code: "UNAUTHORIZED", message: "signature does not match" },
    });
    await assertNothingWritten();
  });

  it("answers 401 to a missing signature header", async () => {
    const res = await gw.inbound("telegram", valid(), { signature: null });
    expect(res.status).toBe(401);
    expect(res.body.error?.message).toBe("missing x-switchboard-signature header");
    await assertNothingWritten();
  });

  it("answers 401 to a signature more than 5 minutes old (replay)", async () => {
    const res = await gw.inbound("telegram", valid(), { at: Date.now() - 6 * 60_000 });
    expect(res.status).toBe(401);
    expect(res.body.error?.code).toBe("UNAUTHORIZED");
    expect(res.body.error?.message).toMatch(/^signature timestamp is 36\ds away from now \(max 300s\)$/);
    await assertNothingWritten();
  });

  it("answers 400 naming a missing required field", async () => {
    const { from: _from, ...body } = valid();
    const res = await gw.inbound("telegram", body);
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ code: "INVALID_REQUEST", message: "`from` is required" });
    await assertNothingWritten();
  });

  it("answers 400 naming a field of the wrong type", async () => {
    const res = await gw.inbound("telegram", { ...valid(), text: 42 });
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ code: "INVALID_REQUEST", message: "`text` must be string" });
    await assertNothingWritten();
  });

  it("answers 400 to malformed JSON", async () => {
    const res = await gw.inbound("telegram", '{"messageId": "bad-1", "chatType": ');
    expect(res.status).toBe(400);
    expect(res.body.error?.code).toBe("INVALID_REQUEST");
    expect(res.body.error?.message).toMatch(/^body is not valid JSON: /);
    await assertNothingWritten();
  });

  it("answers 413 to a 2 MB body, even when correctly signed", async () => {
    const body = JSON.stringify({ ...valid(), text: "x".repeat(2 * 1024 * 1024) });
    const res = await gw.inbound("telegram", body);
    expect(res.status).toBe(413);
    expect(res.body.error).toEqual({
      code: "PAYLOAD_TOO_LARGE",
      message: "request body is larger than 1048576 bytes (1 MB)",
    });
    await assertNothingWritten();
  });

  it("answers 404 naming an unknown channel, without listing the configured ones", async () => {
    const res = await gw.inbound("discord", valid());
    expect(res.status).toBe(404);
    expect(res.body.error).toEqual({
      code: "NOT_FOUND",
      message: 'unknown channel "discord": no connector is configured for it',
    });
    await assertNothingWritten();
  });
});

describe("operator surface basics", () => {
  it("GET /healthz answers 200 without auth", async () => {
    const res = await gw.fetch("/healthz");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { ok: boolean; version: string };
    expect(body.ok).toBe(true);
    expect(body.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("/rpc without a bearer token is 401", async () => {
    const res = await gw.fetch("/rpc/status", { method: "POST", body: "{}" });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      ok: false,
      error: {
        code: "UNAUTHORIZED",
        message: "missing bearer token: send `Authorization: Bearer <token>`",
      },
    });
  });

  it("an unknown RPC method is 404 NOT_FOUND naming it", async () => {
    const res = await gw.rpc("sessions.frobnicate", {});
    expect(res.status).toBe(404);
    expect(res.ok).toBe(false);
    expect(res.error?.code).toBe("NOT_FOUND");
    expect(res.error?.message).toMatch(/^unknown method "sessions\.frobnicate" \(methods: .*sessions\.list/);
  });
});

describe("a signed direct message", () => {
  const peer = "100200300";
  const messageId = "tg-msg-1";
  const expectedKey = `agent:main:telegram:dm:${peer}`;
  let first: Awaited<ReturnType<Gateway["inbound"]>>;
  let reply: NonNullable<FakeConnector["deliveries"][number]>;

  beforeAll(async () => {
    first = await gw.inbound("telegram", directMessage({ messageId, from: peer, text: "hello there" }));
    reply = await waitFor(() => connector.deliveriesFor({ replyToMessageId: messageId })[0], 20_000, {
      what: "the reply delivery",
    });
  });

  it("is acknowledged with 202 in under a second, before the model runs", () => {
    console.log(`inbound ack latency: ${first.ms.toFixed(1)} ms`);
    expect(first.status).toBe(202);
    expect(first.ms).toBeLessThan(1000);
    expect(first.body).toEqual({
      ok: true,
      sessionKey: expectedKey,
      sessionId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      runId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      status: "queued",
    });
  });

  it("is answered through the connector with a valid signature and the message's route", () => {
    expect(reply.signatureCheck).toBe("ok");
    expect(reply.path).toBe("/deliver");
    expect(reply.body).toEqual({
      deliveryId: `${first.body.runId}:reply`,
      kind: "reply",
      sessionKey: expectedKey,
      channel: "telegram",
      accountId: "default",
      to: peer,
      text: "echo: hello there",
      replyToMessageId: messageId,
    });
    expect(connector.attempts).toHaveLength(1);
  });

  it("lands in the session the dmScope names, with the run and delivery recorded", async () => {
    // The reply goes out before the run's records reach D1: wait for the run's end.
    await gw.call("agent.wait", { runId: first.body.runId, timeoutMs: 10_000 });
    const list = await gw.call<{ count: number; sessions: Array<Record<string, unknown>> }>(
      "sessions.list",
      {},
    );
    expect(list.count).toBe(1);
    expect(list.sessions[0]).toMatchObject({
      key: expectedKey,
      sessionId: first.body.sessionId,
      channel: "telegram",
      lastTo: peer,
      deliveryContext: { channel: "telegram", to: peer, accountId: "default" },
    });
    const run = await gw.call<Record<string, unknown>>("runs.get", { runId: first.body.runId });
    expect(run).toMatchObject({
      runId: first.body.runId,
      sessionKey: expectedKey,
      sessionId: first.body.sessionId,
      trigger: "inbound",
      status: "ok",
      reply: "echo: hello there",
    });
    const deliveries = await gw.call<{ deliveries: Array<Record<string, unknown>> }>("deliveries.list", {
      sessionKey: expectedKey,
    });
    expect(deliveries.deliveries).toHaveLength(1);
    expect(deliveries.deliveries[0]).toMatchObject({
      deliveryId: `${first.body.runId}:reply`,
      status: "delivered",
      attempts: 1,
    });
  });

  it("chat.history holds the user message and the assistant reply", async () => {
    const history = await gw.call<{ sessionKey: string; sessionId: string; messages: Message[] }>(
      "chat.history",
      { sessionKey: expectedKey },
    );
    expect(history.sessionKey).toBe(expectedKey);
    expect(history.sessionId).toBe(first.body.sessionId);
    expect(history.messages.map((m) => [m.role, m.content[0]?.text])).toEqual([
      ["user", "hello there"],
      ["assistant", "echo: hello there"],
    ]);
    expect(history.messages.every((m) => m.runId === first.body.runId)).toBe(true);
  });

  it("exports the transcript as JSONL: a session header, then one chained line per message", async () => {
    const res = await gw.fetch(`/v1/transcripts/${first.body.sessionId}.jsonl`, {
      headers: { authorization: `Bearer ${GATEWAY_TOKEN}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/x-ndjson");
    const text = await res.text();
    expect(text.endsWith("\n")).toBe(true);
    const lines = text
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatchObject({
      type: "session",
      version: 1,
      id: first.body.sessionId,
      sessionKey: expectedKey,
    });
    const [user, assistant] = [lines[1], lines[2]] as Array<Record<string, unknown>>;
    expect(user).toMatchObject({ type: "message", parentId: null, message: { role: "user" } });
    expect(assistant).toMatchObject({ type: "message", parentId: user?.id, message: { role: "assistant" } });
    expect(typeof user?.id).toBe("string");
    expect(assistant?.id).not.toBe(user?.id);
  });

  it("sent again with the same messageId is a duplicate: no second run, no second delivery", async () => {
    const runBefore = await gw.call<Record<string, unknown>>("runs.get", { runId: first.body.runId });
    const again = await gw.inbound("telegram", directMessage({ messageId, from: peer, text: "hello there" }));
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ ...first.body, status: "duplicate" });
    // A wrongly started second run would be queued, running, or owe a delivery until it is done.
    await settled(gw, expectedKey);
    expect(connector.attempts).toHaveLength(1);
    expect(connector.deliveriesFor({ replyToMessageId: messageId })).toHaveLength(1);
    expect(await gw.call("runs.get", { runId: first.body.runId })).toEqual(runBefore);
    const history = await gw.call<{ messages: Message[] }>("chat.history", { sessionKey: expectedKey });
    expect(history.messages).toHaveLength(2);
    const deliveries = await gw.call<{ deliveries: unknown[] }>("deliveries.list", {});
    expect(deliveries.deliveries).toHaveLength(1);
  });
});
