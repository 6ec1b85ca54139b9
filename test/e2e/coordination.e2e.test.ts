/**
 * Coordination end to end against `wrangler dev` (SPEC §20): a message steering a running turn
 * (`/queue steer`), its skipped tool call and its own user message; the session's signal log
 * read through `session_status { changesSince }` and `stateVersion` on `sessions.list`; a
 * message interrupting a running turn (`/queue interrupt`).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { directMessage, invokeTool, settled, waitFor } from "./support/gateway.ts";
import { startWorld, type World } from "./support/world.ts";

let world: World;

beforeAll(async () => {
  world = await startWorld({
    retry: { attempts: 1, baseDelayMs: 1 },
    agents: { defaults: { model: "fake/model-1" } },
    delivery: {},
  });
  world.model.setFallback({ text: "noted" });
});

afterAll(async () => {
  await world?.dispose();
});

let ids = 0;
async function say(from: string, text: string) {
  const ack = await world.gw.inbound("telegram", directMessage({ messageId: `co-${++ids}`, from, text }));
  expect(ack.status, JSON.stringify(ack.body)).toBe(202);
  return ack.body as { runId: string; sessionKey: string; status: string };
}

describe("steering a running turn", () => {
  it("a message joins the running turn: the tool call not started is skipped, each message its own user message", async () => {
    const from = "co-steer";
    const key = `agent:main:telegram:dm:${from}`;
    await say(from, "/queue steer");
    await waitFor(async () => world.connector.deliveriesFor({ sessionKey: key }).length > 0, 30_000, {
      what: "the /queue notice",
    });
    const hang = world.model.hang();
    const first = await say(from, "first");
    await hang.started;
    const second = await say(from, "second");
    expect(second).toMatchObject({ status: "steered", runId: first.runId });
    hang.release({ toolCalls: [{ name: "current_time" }] });
    world.model.push({ text: "answering both" });
    const wait = await world.gw.call<{ status: string }>("agent.wait", {
      runId: first.runId,
      timeoutMs: 30_000,
    });
    expect(wait.status).toBe("ok");
    const history = await world.gw.call<{
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
      async () =>
        world.connector.deliveriesFor({ sessionKey: key }).some((d) => d.body?.text === "answering both"),
      30_000,
      { what: "the steered turn's reply" },
    );

    // The signal log: the /queue change (a command, not a message of the transcript), both
    // messages, the run's end.
    const status = await invokeTool<{
      stateVersion: number;
      stateChanges: { events: Array<{ kind: string }>; historyGap: boolean };
    }>(world.gw, "session_status", { changesSince: 0 }, key);
    expect(status.stateChanges.events.map((e) => e.kind)).toEqual([
      "settings_changed",
      "human_message",
      "human_message",
      "run_completed",
    ]);
    expect(status.stateVersion).toBe(4);
    const listed = await world.gw.call<{ sessions: Array<{ key: string; stateVersion: number }> }>(
      "sessions.list",
      {
        limit: 200,
      },
    );
    expect(listed.sessions.find((s) => s.key === key)?.stateVersion).toBe(4);
  });
});

describe("interrupting a running turn", () => {
  it("a message ends the running turn (aborted, no reply) and runs next", async () => {
    const from = "co-interrupt";
    const key = `agent:main:telegram:dm:${from}`;
    await say(from, "/queue interrupt");
    await waitFor(async () => world.connector.deliveriesFor({ sessionKey: key }).length > 0, 30_000, {
      what: "the /queue notice",
    });
    const hang = world.model.hang();
    const first = await say(from, "a long question");
    await hang.started;
    // The next model call (the second message's run) answers this.
    world.model.push({ text: "answering the new one" });
    const second = await say(from, "never mind, this instead");
    expect(second.status).toBe("queued");
    expect(second.runId).not.toBe(first.runId);
    const aborted = await world.gw.call<{ status: string }>("agent.wait", {
      runId: first.runId,
      timeoutMs: 30_000,
    });
    expect(aborted.status).toBe("aborted");
    hang.release({ text: "too late" });
    const next = await world.gw.call<{ status: string }>("agent.wait", {
      runId: second.runId,
      timeoutMs: 30_000,
    });
    expect(next.status).toBe("ok");
    await settled(world.gw, key);
    const replies = world.connector
      .deliveriesFor({ sessionKey: key, kind: "reply" })
      .map((d) => d.body?.text);
    expect(replies).toContain("answering the new one");
    expect(replies).not.toContain("too late");
  });
});
