import { describe, expect, it } from "vitest";
import { hangingModel, SLOW_MODEL_CONFIG, withActorConfig } from "./rpc-support";
import { actor, dm, eventually, fakeConnector, inbound, rpc, waitRun } from "./support";

interface Run {
  runId: string;
  status: string;
  createdAt: number;
  startedAt: number;
  endedAt: number;
  reply: string;
}

describe("run queue", () => {
  it("answers 50 concurrent messages to one session in arrival order, one run at a time", async () => {
    const connector = fakeConnector();
    const sends = Array.from({ length: 50 }, (_, i) => dm(`message ${i}`, { from: "busy-user" }));
    const acks = await Promise.all(
      sends.map(
        async (m) => (await (await inbound("telegram", m)).json()) as { runId: string; status: string },
      ),
    );
    expect(acks.every((a) => a.status === "queued")).toBe(true);
    expect(new Set(acks.map((a) => a.runId)).size).toBe(50);
    for (const a of acks) expect((await waitRun(a.runId, 30_000)).status).toBe("ok");

    const runs = await Promise.all(
      acks.map(async (a) => (await rpc<Run>("runs.get", { runId: a.runId })).payload),
    );
    const byStart = [...runs].sort((a, b) => a.startedAt - b.startedAt);
    for (let i = 1; i < byStart.length; i++) {
      // No overlap: each run starts after the previous one ended.
      expect(byStart[i]!.startedAt).toBeGreaterThanOrEqual(byStart[i - 1]!.endedAt);
      // FIFO: execution order is the order the actor accepted them.
      expect(byStart[i]!.createdAt).toBeGreaterThanOrEqual(byStart[i - 1]!.createdAt);
    }
    await eventually(async () => connector.delivered.length === 50, 10_000);
    // Deliveries go out in the same order as the runs executed.
    expect(connector.delivered.map((d) => d.body.text)).toEqual(byStart.map((r) => r.reply));
    // The transcript holds every user message once, each followed by its reply.
    const history = await rpc<{ messages: Array<{ role: string; content: Array<{ text: string }> }> }>(
      "chat.history",
      {
        sessionKey: "agent:main:main",
        limit: 1000,
      },
    );
    const texts = history.payload.messages.map((m) => `${m.role}:${m.content[0]?.text}`);
    expect(texts).toHaveLength(100);
    for (let i = 0; i < texts.length; i += 2) {
      const user = texts[i]!.replace(/^user:/, "");
      expect(texts[i + 1]).toBe(`assistant:echo: ${user}`);
    }
    connector.restore();
  });

  it("refuses a message when the queue is full, with 429 naming the cap", async () => {
    const key = "agent:main:telegram:group:capped";
    await withActorConfig(key, { ...SLOW_MODEL_CONFIG, session: { queue: { cap: 2 } } });
    // Hold the queue: the actor is busy on a run whose model never answers, so later messages wait.
    const model = hangingModel();
    try {
      const busy = await inbound("telegram", dm("a long one", { chatType: "group", groupId: "capped" }));
      expect(busy.status).toBe(202);
      await eventually(async () => model.calls() === 1);
      const results = [];
      for (let i = 0; i < 4; i++)
        results.push(await inbound("telegram", dm(`burst ${i}`, { chatType: "group", groupId: "capped" })));
      expect(results.map((r) => r.status)).toEqual([202, 202, 429, 429]);
      const refused = results[2]!;
      expect(await refused.json()).toEqual({
        ok: false,
        error: { code: "RATE_LIMITED", message: "session queue is full (cap 2)" },
      });
    } finally {
      model.restore();
      await actor(key).abort(key, true);
    }
  });

  it("merges messages that arrive during a run into one next run in collect mode", async () => {
    const key = "agent:main:telegram:group:collector";
    const first = (await (
      await inbound("telegram", dm("first", { chatType: "group", groupId: "collector" }))
    ).json()) as {
      runId: string;
    };
    await waitRun(first.runId);
    await withActorConfig(key, { session: { queue: { mode: "collect" } } });
    const acks = await Promise.all(
      Array.from({ length: 5 }, async (_, i) => {
        const res = await inbound("telegram", dm(`part ${i}`, { chatType: "group", groupId: "collector" }));
        return (await res.json()) as { runId: string };
      }),
    );
    for (const a of acks) await waitRun(a.runId);
    const distinct = new Set(acks.map((a) => a.runId));
    // Messages that arrive before the next run starts share that run.
    expect(distinct.size).toBeLessThan(5);
    const history = await rpc<{ messages: Array<{ role: string }> }>("chat.history", { sessionKey: key });
    expect(history.payload.messages.filter((m) => m.role === "user")).toHaveLength(6);
  });
});
