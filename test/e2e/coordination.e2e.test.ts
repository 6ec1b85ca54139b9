/**
 * Coordination end to end against `wrangler dev` (SPEC §20): a message steering a running turn
 * (`/queue steer`), its skipped tool call and its own user message; the session's signal log
 * read through `session_status { changesSince }` and `stateVersion` on `sessions.list`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import { type FakeModel, startFakeModel } from "./support/fake-model.ts";
import {
  CONNECTOR_SECRET,
  connectorConfig,
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
      connectors: connectorConfig(connector.url),
      session: { dmScope: "per-peer" },
      agents: { defaults: { model: "fake/model-1" } },
      models: {
        providers: { fake: { api: "openai-compatible", baseUrl: model.baseUrl } },
        retry: { attempts: 1, baseDelayMs: 1 },
      },
    },
  });
  model.setFallback({ text: "noted" });
});

afterAll(async () => {
  await gw?.dispose();
  await Promise.all([connector?.close(), model?.close()]);
});

let ids = 0;
async function say(from: string, text: string) {
  const ack = await gw.inbound("telegram", directMessage({ messageId: `co-${++ids}`, from, text }));
  expect(ack.status, JSON.stringify(ack.body)).toBe(202);
  return ack.body as { runId: string; sessionKey: string; status: string };
}

async function invoke<T>(tool: string, sessionKey: string, args: Record<string, unknown>): Promise<T> {
  const res = await gw.fetch("/tools/invoke", {
    method: "POST",
    headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ tool, sessionKey, args }),
  });
  const body = (await res.json()) as { ok: boolean; result: T };
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body.result;
}

describe("steering a running turn", () => {
  it("a message joins the running turn: the tool call not started is skipped, each message its own user message", async () => {
    const from = "co-steer";
    const key = `agent:main:dm:${from}`;
    await say(from, "/queue steer");
    await waitFor(async () => connector.deliveriesFor({ sessionKey: key }).length > 0, 30_000, {
      what: "the /queue notice",
    });
    const hang = model.hang();
    const first = await say(from, "first");
    await hang.started;
    const second = await say(from, "second");
    expect(second).toMatchObject({ status: "steered", runId: first.runId });
    hang.release({ toolCalls: [{ name: "current_time" }] });
    model.push({ text: "answering both" });
    const wait = await gw.call<{ status: string }>("agent.wait", { runId: first.runId, timeoutMs: 30_000 });
    expect(wait.status).toBe("ok");
    const history = await gw.call<{
      messages: Array<{ role: string; content: Array<{ type: string; text?: string }> }>;
    }>("chat.history", { sessionKey: key, includeTools: true, limit: 20 });
    const lines = history.messages.map(
      (m) => `${m.role}:${m.content.map((p) => (p.type === "text" ? p.text : p.type)).join("")}`,
    );
    expect(lines.slice(-5)).toEqual([
      "user:first",
      "assistant:toolCall",
      "toolResult:Skipped to process an incoming message.",
      "user:second",
      "assistant:answering both",
    ]);
    await waitFor(
      async () => connector.deliveriesFor({ sessionKey: key }).some((d) => d.body?.text === "answering both"),
      30_000,
      { what: "the steered turn's reply" },
    );

    // The signal log: the /queue change (a command, not a message of the transcript), both
    // messages, the run's end.
    const status = await invoke<{
      stateVersion: number;
      stateChanges: { events: Array<{ kind: string }>; historyGap: boolean };
    }>("session_status", key, { changesSince: 0 });
    expect(status.stateChanges.events.map((e) => e.kind)).toEqual([
      "settings_changed",
      "human_message",
      "human_message",
      "run_completed",
    ]);
    expect(status.stateVersion).toBe(4);
    const listed = await gw.call<{ sessions: Array<{ key: string; stateVersion: number }> }>(
      "sessions.list",
      {
        limit: 200,
      },
    );
    expect(listed.sessions.find((s) => s.key === key)?.stateVersion).toBe(4);
  });
});
