/**
 * Defects a user could hit, each tried from outside against `wrangler dev` as a user would
 * (SPEC §2, §4, §5, §6, §9, §10, §15): keys in another case, a run id waited on at once, full
 * listing rows, commands in the pipeline's order, a reused idempotency key, `main` over RPC,
 * channel rules on the channel a chat talks on now, `/new <model name>`, and an OpenClaw
 * config's settings.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import { type FakeModel, startFakeModel } from "./support/fake-model.ts";
import {
  CONNECTOR_SECRET,
  directMessage,
  GATEWAY_TOKEN,
  type Gateway,
  startGateway,
  waitFor,
} from "./support/gateway.ts";

let gw: Gateway;
let connector: FakeConnector;
let model: FakeModel;

beforeAll(async () => {
  [connector, model] = await Promise.all([startFakeConnector(CONNECTOR_SECRET), startFakeModel()]);
  gw = await startGateway({
    config: {
      connectors: {
        telegram: { deliverUrl: connector.url, secretEnv: "CONNECTOR_SECRET" },
        signal: { deliverUrl: connector.url, secretEnv: "CONNECTOR_SECRET" },
      },
      session: {
        dmScope: "per-peer",
        sendPolicy: { rules: [{ action: "deny", match: { channel: "signal" } }] },
      },
      // The default agent is not `main`.
      agents: { defaults: { model: "fake/m" }, list: [{ id: "ops", default: true }, { id: "main" }] },
      models: {
        providers: { fake: { api: "openai-compatible", baseUrl: model.baseUrl } },
        retry: { attempts: 1, baseDelayMs: 1 },
      },
      tools: { sessions: { visibility: "all" } },
      commands: { owners: ["telegram:owner-1"] },
    },
  });
  model.setFallback({ text: "noted" });
});

afterAll(async () => {
  await gw?.dispose();
  await Promise.all([connector?.close(), model?.close()]);
});

let n = 0;
async function say(channel: string, from: string, text: string) {
  const messageId = `defect-${++n}`;
  const ack = await gw.inbound(channel, directMessage({ messageId, from, text }));
  expect(ack.status).toBe(202);
  return { ...ack.body, messageId } as {
    runId: string;
    sessionKey: string;
    sessionId: string;
    messageId: string;
  };
}

async function settled(runId: string) {
  const wait = await gw.call<{ status: string }>("agent.wait", { runId, timeoutMs: 30_000 });
  expect(wait.status).not.toBe("timeout");
  return wait;
}

async function invoke(tool: string, args: Record<string, unknown>) {
  const res = await gw.fetch("/tools/invoke", {
    method: "POST",
    headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ tool, args }),
  });
  return { status: res.status, body: (await res.json()) as { ok: boolean; result: Record<string, unknown> } };
}

describe("a session key typed in another case", () => {
  it("finds the session stored lowercase, though some channel keeps case", async () => {
    const first = await say("telegram", "Erin1", "hello");
    expect(first.sessionKey).toBe("agent:ops:dm:erin1");
    await settled(first.runId);
    const history = await invoke("sessions_history", { sessionKey: "AGENT:OPS:DM:ERIN1" });
    expect(history.status).toBe(200);
    expect(history.body.result).toMatchObject({
      sessionKey: "agent:ops:dm:erin1",
      sessionId: first.sessionId,
    });
    const rpc = await gw.call<{ sessionKey: string }>("chat.history", { sessionKey: "Agent:Ops:DM:Erin1" });
    expect(rpc.sessionKey).toBe("agent:ops:dm:erin1");
  });
});

describe("a run id from an inbound ack", () => {
  it("is waitable and readable at once, while its run is running", async () => {
    const hang = model.hang();
    const ack = await say("telegram", "dave", "think about it");
    const wait = await gw.rpc<{ status: string; runStatus: string }>("agent.wait", {
      runId: ack.runId,
      timeoutMs: 0,
    });
    expect(wait.status).toBe(200);
    expect(wait.payload.status).toBe("timeout");
    expect(["queued", "running"]).toContain(wait.payload.runStatus);
    const run = await gw.rpc<{ runId: string; status: string; sessionKey: string }>("runs.get", {
      runId: ack.runId,
    });
    expect(run.status).toBe(200);
    expect(run.payload).toMatchObject({ runId: ack.runId, sessionKey: "agent:ops:dm:dave" });
    expect(["queued", "running"]).toContain(run.payload.status);
    await hang.started;
    hang.release({ text: "done thinking" });
    expect(await settled(ack.runId)).toMatchObject({ status: "ok" });
  });
});

describe("sessions_list rows", () => {
  it("carry every documented field, null when unset", async () => {
    const listed = await invoke("sessions_list", {});
    expect(listed.status).toBe(200);
    const rows = listed.body.result.sessions as Array<Record<string, unknown>>;
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      for (const field of [
        "key",
        "kind",
        "channel",
        "displayName",
        "label",
        "updatedAt",
        "sessionId",
        "agentId",
        "model",
        "contextTokens",
        "totalTokens",
        "thinkingLevel",
        "verboseLevel",
        "systemSent",
        "abortedLastRun",
        "sendPolicy",
        "lastChannel",
        "lastTo",
        "deliveryContext",
        "spawnedBy",
        "runStatus",
        "transcriptPath",
      ])
        expect(row, `${row.key}.${field}`).toHaveProperty(field);
    }
    expect(rows.find((r) => r.key === "agent:ops:dm:erin1")).toMatchObject({
      thinkingLevel: null,
      verboseLevel: null,
      label: null,
      spawnedBy: null,
    });
  });
});

describe("a command as a session's first message", () => {
  it("/send off from an owner creates the entry, with its route, and the override sticks", async () => {
    const ack = await say("telegram", "owner-1", "/send off");
    expect(ack).toMatchObject({ status: "command", sessionKey: "agent:ops:dm:owner-1" });
    const entry = await gw.call<Record<string, unknown>>("sessions.get", { key: "agent:ops:dm:owner-1" });
    expect(entry).toMatchObject({ sendPolicy: "deny", lastChannel: "telegram", sessionId: ack.sessionId });
  });
});

describe("an idempotency key used before for another session", () => {
  it("is refused with 409 naming the key; the same key for the same session is the same run", async () => {
    const a = await gw.call<{ runId: string }>("chat.send", {
      sessionKey: "agent:ops:dm:erin1",
      message: "first",
      idempotencyKey: "reused-key-1",
    });
    const again = await gw.call<{ runId: string }>("chat.send", {
      sessionKey: "agent:ops:dm:erin1",
      message: "first",
      idempotencyKey: "reused-key-1",
    });
    expect(again.runId).toBe(a.runId);
    const other = await gw.rpc("chat.send", {
      sessionKey: "agent:ops:dm:dave",
      message: "second",
      idempotencyKey: "reused-key-1",
    });
    expect(other.status).toBe(409);
    expect(other.error).toMatchObject({
      code: "CONFLICT",
      message: expect.stringContaining('"reused-key-1"'),
    });
    const viaAgent = await gw.rpc("agent", {
      sessionKey: "agent:ops:dm:dave",
      message: "second",
      idempotencyKey: "reused-key-1",
    });
    expect(viaAgent.status).toBe(409);
    await settled(a.runId);
  });
});

describe("`main` over RPC", () => {
  it("means the default agent's main session", async () => {
    const queued = await gw.call<{ runId: string; sessionKey: string }>("agent", {
      message: "status report",
    });
    expect(queued.sessionKey).toBe("agent:ops:main");
    await settled(queued.runId);
    const history = await gw.call<{ sessionKey: string }>("chat.history", { sessionKey: "main" });
    expect(history.sessionKey).toBe("agent:ops:main");
    expect(await gw.call<{ key: string }>("sessions.get", { key: "main" })).toMatchObject({
      key: "agent:ops:main",
    });
  });
});

describe("send policy on the channel a direct chat talks on now", () => {
  it("a rule on signal holds back the reply to signal of a session first made on telegram", async () => {
    const onTelegram = await say("telegram", "frank", "hi from telegram");
    await settled(onTelegram.runId);
    await waitFor(() => connector.deliveriesFor({ replyToMessageId: onTelegram.messageId })[0], 15_000, {
      what: "the telegram reply",
    });
    const onSignal = await say("signal", "frank", "hi from signal");
    expect(onSignal.sessionKey).toBe(onTelegram.sessionKey);
    await settled(onSignal.runId);
    const run = await gw.call<{ delivered?: boolean }>("runs.get", { runId: onSignal.runId });
    expect(run.delivered).toBe(false);
    expect(connector.attemptsFor({ replyToMessageId: onSignal.messageId })).toEqual([]);
  });
});

describe("/new <model name>", () => {
  it("resolves a family name or a bare model id from the catalog", async () => {
    // A connector's message reaches D1 with its session's next write (session.writeBehind), so
    // each entry is read once its run has ended: agent.wait answers when D1 shows it.
    const sonnet = await say("telegram", "gina", "/new sonnet");
    expect(sonnet.sessionKey).toBe("agent:ops:dm:gina");
    await settled(sonnet.runId);
    const entry = await gw.call<{ modelOverride?: string }>("sessions.get", { key: sonnet.sessionKey });
    expect(entry.modelOverride).toBe("anthropic/claude-sonnet-4");
    const gpt = await say("telegram", "gina", "/new gpt-4.1 and plan my week");
    await settled(gpt.runId);
    expect(
      (await gw.call<{ modelOverride?: string }>("sessions.get", { key: gpt.sessionKey })).modelOverride,
    ).toBe("openai/gpt-4.1");
    // An ambiguous word stays part of the message.
    const mini = await say("telegram", "gina", "/new mini golf tonight?");
    await settled(mini.runId);
    const after = await gw.call<{ modelOverride?: string }>("sessions.get", { key: mini.sessionKey });
    expect(after.modelOverride).toBe("openai/gpt-4.1");
    const history = await gw.call<{ messages: Array<{ role: string; content: Array<{ text?: string }> }> }>(
      "chat.history",
      { sessionKey: mini.sessionKey },
    );
    expect(history.messages[0]?.content[0]?.text).toBe("mini golf tonight?");
  });
});

describe("a config written for OpenClaw", () => {
  let openclaw: Gateway;
  let bridge: FakeConnector;

  beforeAll(async () => {
    bridge = await startFakeConnector(CONNECTOR_SECRET);
    openclaw = await startGateway({
      config: {
        connectors: { telegram: { deliverUrl: bridge.url, secretEnv: "CONNECTOR_SECRET" } },
        session: {
          store: "~/.openclaw/agents/{agentId}/sessions/sessions.json",
          sendPolicy: { rules: [{ action: "deny", match: { provider: "telegram", chatType: "group" } }] },
        },
      },
    });
  });

  afterAll(async () => {
    await openclaw?.dispose();
    await bridge?.close();
  });

  it("loads: session.store is accepted and reported as ignored, match.provider is read as channel", async () => {
    const status = await openclaw.call<{ config: { valid: boolean; ignored?: string[] } }>("status");
    expect(status.config.valid).toBe(true);
    expect(status.config.ignored).toEqual([expect.stringContaining("config.session.store: ignored")]);
    const ack = await openclaw.inbound("telegram", {
      messageId: "oc-1",
      chatType: "group",
      groupId: "room-1",
      from: "u1",
      text: "hello group",
    });
    expect(ack.status).toBe(202);
    await openclaw.call("agent.wait", { runId: ack.body.runId, timeoutMs: 30_000 });
    expect(await openclaw.call<{ delivered?: boolean }>("runs.get", { runId: ack.body.runId })).toMatchObject(
      {
        status: "ok",
        delivered: false,
      },
    );
  });
});
