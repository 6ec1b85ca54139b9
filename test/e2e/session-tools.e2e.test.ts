/**
 * Session tools end to end (SPEC §6 sessions_send / sessions_spawn, §17 "Agent-to-agent"):
 * a real `wrangler dev`, the real agent loop, and a model that decides from each request.
 *
 * The model (support/deciding-model.ts, driven by the request rather than a script) calls `sessions_send` / `sessions_spawn` when the last user message is
 * `send:{…}` / `spawn:{…}`, plays the reply-back rounds and the announce steps, and can hang
 * on a chosen request so the gateway can be killed mid-flow.
 *
 * One gateway for the file; the restart tests replace it, so they run last.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ANNOUNCE_TEXT,
  B_REPLY,
  type DecidingModel,
  decideSessionTools,
  decidingConfig,
  type SeenRequest,
  SUBAGENT_RESULT,
  startDecidingModel,
} from "./support/deciding-model.ts";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import { CONNECTOR_SECRET, type Gateway, settled, sleep, startGateway, waitFor } from "./support/gateway.ts";

// ---------------------------------------------------------------------------------------------

interface TranscriptMessage {
  role: string;
  runId?: string;
  toolName?: string;
  content: Array<{ type: string; text?: string }>;
  provenance?: Record<string, unknown>;
}

let gw: Gateway;
let connector: FakeConnector;
let model: DecidingModel;

const groupKey = (id: string) => `agent:main:telegram:group:${id}`;
const firstText = (m: TranscriptMessage) => m.content.find((p) => typeof p.text === "string")?.text ?? "";

beforeAll(async () => {
  [connector, model] = await Promise.all([
    startFakeConnector(CONNECTOR_SECRET),
    startDecidingModel(decideSessionTools),
  ]);
  gw = await startGateway({
    config: decidingConfig(connector.url, model.baseUrl, { visibility: "agent", maxPingPongTurns: 2 }),
  });
});

afterAll(async () => {
  await gw?.dispose();
  await Promise.all([connector?.close(), model?.close()]);
});

let messageSeq = 0;
async function groupMessage(groupId: string, text: string) {
  const ack = await gw.inbound("telegram", {
    messageId: `st-${groupId}-${++messageSeq}`,
    chatType: "group",
    from: "700000001",
    groupId,
    text,
  });
  expect(ack.status, JSON.stringify(ack.body)).toBe(202);
  expect(ack.body.sessionKey).toBe(groupKey(groupId));
  return ack.body.runId as string;
}

async function waitRun(runId: string, timeoutMs = 30_000) {
  return gw.call<{ status: string; runStatus: string }>("agent.wait", { runId, timeoutMs });
}

async function history(sessionKey: string): Promise<TranscriptMessage[]> {
  const page = await gw.call<{ messages: TranscriptMessage[] }>("chat.history", {
    sessionKey,
    limit: 1000,
    includeTools: true,
  });
  return page.messages;
}

/** Creates both group sessions with a plain first message. */
async function setupGroups(...ids: string[]) {
  for (const id of ids) {
    const wait = await waitRun(await groupMessage(id, "hello"));
    expect(wait.status).toBe("ok");
  }
}

const roundTexts = (h: TranscriptMessage[]) =>
  h
    .filter((m) => m.role === "user" && firstText(m).startsWith("[reply from"))
    .map((m) => firstText(m).split("\n")[1]);

describe("sessions_send between two telegram groups", () => {
  it("returns B's reply, records inter_session provenance, alternates reply-back rounds and announces to B", async () => {
    const started = performance.now();
    const [a, b] = ["st-a1", "st-b1"];
    await setupGroups(a, b);
    const send = JSON.stringify({ sessionKey: groupKey(b), message: "ping", timeoutSeconds: 10 });
    const runId = await groupMessage(a, `send:${send}`);
    expect((await waitRun(runId)).status).toBe("ok");

    const aHistory = await history(groupKey(a));
    const toolResult = aHistory.find((m) => m.role === "toolResult" && m.toolName === "sessions_send");
    expect(toolResult, "A's sessions_send tool result").toBeDefined();
    expect(JSON.parse(firstText(toolResult as TranscriptMessage))).toMatchObject({
      status: "ok",
      reply: B_REPLY,
      sessionKey: groupKey(b),
    });

    const announce = await waitFor(() => connector.deliveriesFor({ kind: "announce", to: b })[0], 30_000, {
      intervalMs: 100,
      what: "the announce to B's group",
    });
    expect(announce.body).toMatchObject({
      kind: "announce",
      to: b,
      sessionKey: groupKey(b),
      text: ANNOUNCE_TEXT,
    });
    expect(announce.signatureCheck).toBe("ok");
    console.log(`sessions_send flow: announce after ${(performance.now() - started).toFixed(0)} ms`);

    const bHistory = await history(groupKey(b));
    const ping = bHistory.find((m) => m.role === "user" && firstText(m) === "ping");
    expect(ping?.provenance).toEqual({
      kind: "inter_session",
      sourceSessionKey: groupKey(a),
      sourceChannel: "telegram",
      sourceTool: "sessions_send",
    });
    // maxPingPongTurns 2: round 1 in A (carrying B's reply), round 2 in B (carrying A's round reply).
    expect(roundTexts(await history(groupKey(a)))).toEqual([B_REPLY]);
    expect(roundTexts(bHistory)).toEqual(["round reply 1"]);
    // Only the announce reaches B's chat from this flow (B's own "hello" reply aside).
    await settled(gw, [groupKey(a), groupKey(b)]);
    expect(connector.deliveriesFor({ to: b }).filter((d) => d.body?.kind !== "reply")).toHaveLength(1);
    expect(connector.deliveriesFor({ to: b, kind: "reply" })).toHaveLength(1);
  });
});

describe("sessions_spawn from a telegram group", () => {
  it("posts the normalized announcement to the requester's group", async () => {
    const started = performance.now();
    const a = "st-a3";
    await setupGroups(a);
    const runId = await groupMessage(a, `spawn:${JSON.stringify({ task: "compute 6*7" })}`);
    expect((await waitRun(runId)).status).toBe("ok");
    const tool = (await history(groupKey(a))).find((m) => m.toolName === "sessions_spawn");
    const result = JSON.parse(firstText(tool as TranscriptMessage)) as {
      status: string;
      childSessionKey: string;
    };
    expect(result).toMatchObject({ status: "accepted", runId: expect.any(String) });
    expect(result.childSessionKey).toMatch(/^agent:main:subagent:[0-9a-f-]{36}$/);

    const announce = await waitFor(() => connector.deliveriesFor({ kind: "announce", to: a })[0], 30_000, {
      intervalMs: 100,
      what: "the sub-agent announcement to A's group",
    });
    console.log(`sessions_spawn: announcement after ${(performance.now() - started).toFixed(0)} ms`);
    const text = announce.body?.text ?? "";
    expect(text.startsWith(`Status: ok\nResult: ${SUBAGENT_RESULT}\n`), text).toBe(true);
    const stats = text.split("\n").find((l) => l.startsWith("Stats: "));
    expect(stats, text).toBeDefined();
    expect(stats).toMatch(/^Stats: runtime \d+(m\d\d)?s • tokens \S+ \(in \S+ \/ out \S+\)/);
    expect(stats).toContain(`sessionKey ${result.childSessionKey}`);
    expect(stats).toMatch(/sessionId [0-9a-f-]{36}/);
    expect(stats).toMatch(/transcript \S+/);
    await settled(gw, [result.childSessionKey, groupKey(a)]);
    expect(connector.deliveriesFor({ kind: "announce", to: a })).toHaveLength(1);
  });
});

describe("a gateway killed mid-flow", () => {
  it("resumes the reply-back rounds after a restart and announces exactly once", async () => {
    const started = performance.now();
    const [a, b] = ["st-a2", "st-b2"];
    await setupGroups(a, b);
    const hang = model.hangOn(
      (r) => r.system.includes("This is reply-back round 1") && r.system.includes(groupKey(b)),
    );
    const send = JSON.stringify({ sessionKey: groupKey(b), message: "ping", timeoutSeconds: 10 });
    const runId = await groupMessage(a, `send:${send}`);
    expect((await waitRun(runId)).status).toBe("ok");

    const hung = await Promise.race([
      hang.started,
      sleep(30_000).then(() => {
        throw new Error("the model never got the first reply-back round");
      }),
    ]);
    expect(hung.system).toContain(`- session key: ${groupKey(a)}`);

    const { persistTo, options } = gw;
    await gw.stop("SIGKILL");
    gw = await startGateway({ ...options, persistTo });
    hang.release();

    const announce = await waitFor(() => connector.deliveriesFor({ kind: "announce", to: b })[0], 45_000, {
      intervalMs: 100,
      what: "the announce to B's group after the restart",
    });
    expect(announce.body).toMatchObject({ sessionKey: groupKey(b), text: ANNOUNCE_TEXT });
    console.log(`restart mid-flow: announce after ${(performance.now() - started).toFixed(0)} ms`);
    expect(hung.outcome).toBe("client-closed");

    // The killed round was run again by the new gateway, once.
    const round1 = model.requests.filter(
      (r) => r.system.includes("This is reply-back round 1") && r.system.includes(groupKey(b)),
    );
    expect(round1.map((r) => r.outcome)).toEqual(["client-closed", "answered"]);

    // Nothing is delivered twice: both sessions settle with one announce.
    await settled(gw, [groupKey(a), groupKey(b)]);
    expect(connector.deliveriesFor({ kind: "announce", to: b })).toHaveLength(1);
    expect(connector.attemptsFor({ kind: "announce", to: b })).toHaveLength(1);
    // Each round ran to completion once in the transcripts.
    expect(roundTexts(await history(groupKey(a)))).toEqual([B_REPLY]);
    expect(roundTexts(await history(groupKey(b)))).toEqual(["round reply 1"]);
    expect(
      model.requests.filter(
        (r) =>
          r.system.includes("This is the announce step") &&
          r.system.includes(groupKey(b)) &&
          r.outcome === "answered",
      ),
    ).toHaveLength(1);
  });

  it("the sub-agent announcement completes after the gateway is killed mid-task", async () => {
    const started = performance.now();
    const a = "st-a4";
    await setupGroups(a);
    const task = "compute 6*7 across a restart";
    const isTask = (r: SeenRequest) =>
      r.system.includes("## Sub-agent") && !r.system.includes("announce step") && r.lastUser.includes(task);
    const hang = model.hangOn(isTask);
    const runId = await groupMessage(a, `spawn:${JSON.stringify({ task })}`);
    expect((await waitRun(runId)).status).toBe("ok");
    const tool = (await history(groupKey(a))).find((m) => m.toolName === "sessions_spawn");
    const spawned = JSON.parse(firstText(tool as TranscriptMessage)) as { childSessionKey: string };
    expect(spawned).toMatchObject({ status: "accepted" });

    const hung = await Promise.race([
      hang.started,
      sleep(30_000).then(() => {
        throw new Error("the model never got the sub-agent's task request");
      }),
    ]);

    const { persistTo, options } = gw;
    await gw.stop("SIGKILL");
    const requestsBeforeRestart = model.requests.length;
    gw = await startGateway({ ...options, persistTo });
    hang.release();

    const announce = await waitFor(() => connector.deliveriesFor({ kind: "announce", to: a })[0], 45_000, {
      intervalMs: 100,
      what: "the sub-agent announcement to A's group after the restart",
    });
    console.log(`restart mid-task: announcement after ${(performance.now() - started).toFixed(0)} ms`);
    const text = announce.body?.text ?? "";
    expect(text.startsWith(`Status: ok\nResult: ${SUBAGENT_RESULT}\n`), text).toBe(true);
    expect(announce.body).toMatchObject({ kind: "announce", to: a, sessionKey: groupKey(a) });
    expect(hung.outcome).toBe("client-closed");

    // Nothing is announced twice: the requester settles with one announcement.
    await settled(gw, [spawned.childSessionKey, groupKey(a)]);
    expect(connector.deliveriesFor({ kind: "announce", to: a })).toHaveLength(1);
    expect(connector.attemptsFor({ kind: "announce", to: a })).toHaveLength(1);
    // The killed task request was run again by the new gateway, and answered once.
    const after = model.requests.slice(requestsBeforeRestart).filter(isTask);
    expect(after.map((r) => r.outcome)).toEqual(["answered"]);
    expect(model.requests.filter(isTask).map((r) => r.outcome)).toEqual(["client-closed", "answered"]);
  });
});
