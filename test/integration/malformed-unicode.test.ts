/**
 * JSON bodies may carry lone UTF-16 surrogates (`"\ud800"`), which UTF-8 (D1, Durable Object
 * names) cannot hold. They become U+FFFD as the body is parsed, so a session key or id reads
 * back from D1 exactly as it was used. (Values are compared as JSON text: a lone surrogate in
 * a failure message would not survive the test runner's own UTF-8 channel.)
 */
import { describe, expect, it } from "vitest";
import { rpcRaw } from "./rpc-support";
import { fakeConnector, inbound, rpc, TOKEN, waitRun } from "./support";

const json = (value: unknown) => JSON.stringify(value);

describe("lone surrogates in request bodies", () => {
  it("an inbound thread id with one still lets the run be waited for and its session resolved", async () => {
    const connector = fakeConnector();
    try {
      const raw = `{"messageId":"lone-1","chatType":"direct","from":"u-lone","threadId":"t\\ud800x","text":"hi \\udc00"}`;
      const res = await inbound("telegram", raw);
      expect(res.status).toBe(202);
      const answer = (await res.json()) as { runId: string; sessionKey: string };
      expect(json(answer.sessionKey)).toBe(json("agent:main:main:thread:t\ufffdx"));
      expect((await waitRun(answer.runId))?.status).toBe("ok");
      const resolved = await rpc("sessions.resolve", { key: answer.sessionKey });
      expect(resolved.status).toBe(200);
      const history = await rpc<{ messages: Array<{ content: Array<{ text: string }> }> }>("chat.history", {
        sessionKey: answer.sessionKey,
      });
      expect(json(history.payload.messages[0]?.content[0]?.text)).toBe(json("hi \ufffd"));
    } finally {
      connector.restore();
    }
  });

  it("an RPC session key with one names the same session in every later call", async () => {
    const res = await rpcRaw("agent", {
      body: `{"message":"hi","sessionKey":"agent:main:x\\udc00y"}`,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(200);
    const sent = (await res.json()) as { payload: { runId: string; sessionKey: string } };
    expect(json(sent.payload.sessionKey)).toBe(json("agent:main:x\ufffdy"));
    expect((await waitRun(sent.payload.runId))?.status).toBe("ok");
    const run = await rpc<{ sessionKey: string }>("runs.get", { runId: sent.payload.runId });
    expect(json(run.payload.sessionKey)).toBe(json(sent.payload.sessionKey));
  });
});
