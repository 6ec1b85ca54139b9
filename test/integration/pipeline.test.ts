import { describe, expect, it } from "vitest";
import { verifySignature } from "../../src/auth/signature";
import { dm, drain, eventually, fakeConnector, inbound, rpc, SECRET, waitRun } from "./support";

describe("inbound pipeline", () => {
  it("answers 202, runs the agent, delivers a signed reply and records the transcript", async () => {
    const connector = fakeConnector();
    const msg = dm("hello there", { from: "alice" });
    const res = await inbound("telegram", msg);
    expect(res.status).toBe(202);
    const ack = (await res.json()) as {
      sessionKey: string;
      sessionId: string;
      runId: string;
      status: string;
    };
    expect(ack).toMatchObject({ ok: true, sessionKey: "agent:main:main", status: "queued" });

    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok", runStatus: "ok" });
    await eventually(async () => connector.delivered.length > 0);
    expect(connector.delivered).toHaveLength(1);
    const delivery = connector.delivered[0]!;
    expect(delivery.body).toMatchObject({
      kind: "reply",
      sessionKey: "agent:main:main",
      channel: "telegram",
      accountId: "default",
      to: "alice",
      text: "echo: hello there",
      replyToMessageId: msg.messageId,
    });
    expect(await verifySignature(SECRET, delivery.signature, JSON.stringify(delivery.body))).toEqual({
      ok: true,
    });

    const history = await rpc<{ messages: Array<{ role: string; content: unknown }> }>("chat.history", {
      sessionKey: ack.sessionKey,
    });
    expect(history.payload.messages.map((m) => m.role)).toEqual(["user", "assistant"]);

    const run = await rpc("runs.get", { runId: ack.runId });
    expect(run.payload).toMatchObject({ status: "ok", reply: "echo: hello there", deliver: true });
    expect(run.payload.delivered).toBe(true);
    connector.restore();
  });
});

describe("inbound dedupe", () => {
  it("answers a repeated messageId with duplicate and starts nothing", async () => {
    const connector = fakeConnector();
    const msg = dm("once only", { from: "dedupe-user", chatType: "group", groupId: "g-dedupe" });
    const first = (await (await inbound("telegram", msg)).json()) as { runId: string; sessionKey: string };
    await waitRun(first.runId);
    await eventually(async () => connector.delivered.length === 1);

    const again = await inbound("telegram", msg);
    expect(again.status).toBe(202);
    expect(await again.json()).toEqual({
      ok: true,
      sessionKey: first.sessionKey,
      sessionId: expect.any(String),
      runId: first.runId,
      status: "duplicate",
    });
    const history = await rpc<{ messages: unknown[] }>("chat.history", { sessionKey: first.sessionKey });
    expect(history.payload.messages).toHaveLength(2);
    // A run the repeat had started would be done by now, its reply delivered.
    await drain(first.sessionKey);
    expect(connector.delivered).toHaveLength(1);
    connector.restore();
  });

  it("treats two concurrent copies of one message as one run", async () => {
    const msg = dm("twice at once", { from: "racer" });
    const [a, b] = await Promise.all([inbound("telegram", msg), inbound("telegram", msg)]);
    const bodies = [
      (await a.json()) as { runId: string; status: string },
      (await b.json()) as { runId: string; status: string },
    ];
    expect(bodies[0]!.runId).toBe(bodies[1]!.runId);
    expect(bodies.map((x) => x.status).sort()).toEqual(["duplicate", "queued"]);
  });
});
