import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { parseConfig } from "../../src/config/load";
import { sessionsSendTool } from "../../src/tools/sessions-send";
import type { SessionPort, ToolContext } from "../../src/tools/types";
import type { TranscriptMessage } from "../../src/transcript/message";
import {
  CONNECTORS,
  group,
  history,
  type ModelAnswer,
  type ModelRequest,
  groupMessage as msg,
  SCRIPTED_MODEL_CONFIG,
  scriptedWorld,
} from "./model-support";
import { seedSessions, sessionRow, withActorConfig } from "./rpc-support";
import { drain, eventually, holdClock, inbound, waitRun } from "./support";

/** A: calls sessions_send when told to; everyone: answers, and plays the rounds as scripted. */
function agentScript(opts: { rounds?: (req: ModelRequest) => string; announce?: string }) {
  return (req: ModelRequest): ModelAnswer => {
    if (req.system.includes("This is the announce step"))
      return { text: opts.announce ?? "B announces: all done" };
    if (req.system.includes("reply-back round")) return { text: opts.rounds?.(req) ?? "REPLY_SKIP" };
    if (req.lastRole === "tool") return { text: `tool said ${req.lastTool}` };
    if (req.lastUser.startsWith("send:")) {
      return { tool: "sessions_send", args: JSON.parse(req.lastUser.slice("send:".length)) };
    }
    return { text: `answer to ${req.lastUser}` };
  };
}

async function setup(ids: string[], extra: Record<string, unknown> = {}) {
  const config = {
    ...SCRIPTED_MODEL_CONFIG,
    connectors: CONNECTORS,
    tools: { sessions: { visibility: "agent" } },
    session: { agentToAgent: { maxPingPongTurns: 3 } },
    ...extra,
  };
  for (const id of ids) {
    const ack = (await (await inbound("telegram", msg(id, "hello"))).json()) as { runId: string };
    await waitRun(ack.runId);
    await withActorConfig(group(id), config);
  }
}

describe("sessions_send", () => {
  it("waits for the target's reply, then runs alternating reply-back rounds and announces in the target", {
    timeout: 20_000,
  }, async () => {
    let round = 0;
    const world = scriptedWorld(
      agentScript({ rounds: () => (++round < 3 ? `round reply ${round}` : "REPLY_SKIP") }),
    );
    await setup(["a1", "b1"]);
    const send = JSON.stringify({ sessionKey: group("b1"), message: "ping", timeoutSeconds: 10 });
    const ack = (await (await inbound("telegram", msg("a1", `send:${send}`))).json()) as { runId: string };
    expect((await waitRun(ack.runId)).status).toBe("ok");

    // A's tool call got B's reply to this very run.
    const aHistory = await history(group("a1"));
    const toolResult = aHistory.find((m) => m.role === "toolResult" && m.toolName === "sessions_send");
    const result = JSON.parse((toolResult!.content[0] as { text: string }).text);
    expect(result).toMatchObject({ status: "ok", reply: "answer to ping", sessionKey: group("b1") });

    // B got the message as an inter-session user message.
    const announce = await eventually(
      async () => world.delivered.find((d) => d.body.kind === "announce" && d.body.to === "b1"),
      10_000,
    );
    expect(announce.body.text).toBe("B announces: all done");
    const bHistory = await history(group("b1"));
    const ping = bHistory.find(
      (m) => m.role === "user" && (m.content[0] as { text: string }).text === "ping",
    );
    expect(ping?.provenance).toEqual({
      kind: "inter_session",
      sourceSessionKey: group("a1"),
      sourceChannel: "telegram",
      sourceTool: "sessions_send",
    });

    // Rounds alternate: round 1 in A, round 2 in B, round 3 in A (REPLY_SKIP ends it).
    const roundMsgs = (h: TranscriptMessage[]) =>
      h.filter((m) => m.role === "user" && (m.content[0] as { text: string }).text.startsWith("[reply from"));
    const aRounds = roundMsgs(await history(group("a1")));
    const bRounds = roundMsgs(bHistory);
    expect(aRounds.map((m) => (m.content[0] as { text: string }).text.split("\n")[1])).toEqual([
      "answer to ping",
      "round reply 2",
    ]);
    expect(bRounds.map((m) => (m.content[0] as { text: string }).text.split("\n")[1])).toEqual([
      "round reply 1",
    ]);
    expect(round).toBe(3);
    // The target's primary run and rounds never deliver to B's chat; only the announce does.
    expect(world.delivered.filter((d) => d.body.to === "b1" && d.body.kind !== "reply")).toHaveLength(1);
    world.restore();
  });

  it("stays silent when the announce step answers ANNOUNCE_SKIP", async () => {
    const world = scriptedWorld(agentScript({ announce: "ANNOUNCE_SKIP" }));
    await setup(["a2", "b2"]);
    const send = JSON.stringify({ sessionKey: group("b2"), message: "quiet please", timeoutSeconds: 10 });
    const ack = (await (await inbound("telegram", msg("a2", `send:${send}`))).json()) as { runId: string };
    await waitRun(ack.runId);
    await eventually(
      async () => world.requests.some((r) => r.system.includes("This is the announce step")),
      10_000,
    );
    // A's own reply reaches its chat; the announce step's ANNOUNCE_SKIP reaches nobody.
    await eventually(async () =>
      world.delivered.some(
        (d) => d.body.to === "a2" && d.body.kind === "reply" && d.body.text !== "echo: hello",
      ),
    );
    // Both sides done, every delivery made: the announce step posted nothing.
    await drain(group("a2"), group("b2"));
    expect(world.delivered.filter((d) => d.body.kind === "announce")).toEqual([]);
    world.restore();
  });

  it("returns accepted at once with timeoutSeconds 0", async () => {
    const world = scriptedWorld(agentScript({}));
    await setup(["a3", "b3"]);
    const send = JSON.stringify({ sessionKey: group("b3"), message: "fire and forget", timeoutSeconds: 0 });
    const ack = (await (await inbound("telegram", msg("a3", `send:${send}`))).json()) as { runId: string };
    await waitRun(ack.runId);
    const result = (await history(group("a3"))).find((m) => m.toolName === "sessions_send");
    expect(JSON.parse((result!.content[0] as { text: string }).text)).toEqual({
      runId: expect.any(String),
      status: "accepted",
      sessionKey: group("b3"),
    });
    world.restore();
  });

  it("returns timeout when the target is slow, and the reply is still announced later", {
    timeout: 15_000,
  }, async () => {
    const world = scriptedWorld((req) => {
      if (req.lastUser === "take your time") return { text: "finally done", delayMs: 1500 };
      return agentScript({ announce: "B: the slow job finished" })(req);
    });
    await setup(["a7", "b7"], { session: { agentToAgent: { maxPingPongTurns: 0 } } });
    const send = JSON.stringify({ sessionKey: group("b7"), message: "take your time", timeoutSeconds: 0.5 });
    const ack = (await (await inbound("telegram", msg("a7", `send:${send}`))).json()) as { runId: string };
    await waitRun(ack.runId);
    const result = (await history(group("a7"))).find((m) => m.toolName === "sessions_send");
    const parsed = JSON.parse((result!.content[0] as { text: string }).text);
    expect(parsed).toMatchObject({ status: "timeout", runStatus: "running", sessionKey: group("b7") });
    expect(parsed.error).toMatch(/no reply within 0.5s; the run continues/);
    const announce = await eventually(
      async () => world.delivered.find((d) => d.body.kind === "announce" && d.body.to === "b7"),
      10_000,
    );
    expect(announce.body.text).toBe("B: the slow job finished");
    world.restore();
  });

  it("returns error quoting the provider's 429 when the target's model fails, not timeout", async () => {
    const world = scriptedWorld((req) => {
      if (req.lastUser === "doomed") return { status: 429, error: "Rate limit reached for requests" };
      return agentScript({})(req);
    });
    await setup(["a4", "b4"]);
    const send = JSON.stringify({ sessionKey: group("b4"), message: "doomed", timeoutSeconds: 10 });
    const ack = (await (await inbound("telegram", msg("a4", `send:${send}`))).json()) as { runId: string };
    await waitRun(ack.runId);
    const result = (await history(group("a4"))).find((m) => m.toolName === "sessions_send");
    const parsed = JSON.parse((result!.content[0] as { text: string }).text);
    expect(parsed.status).toBe("error");
    expect(parsed.error).toMatch(/429/);
    expect(parsed.error).toMatch(/Rate limit reached/);
    world.restore();
  });

  it("refuses a send that would exceed session.agentToAgent.maxHops", async () => {
    const world = scriptedWorld(agentScript({}));
    await setup(["a5", "b5", "c5"], { session: { agentToAgent: { maxHops: 1, maxPingPongTurns: 0 } } });
    // A → B is hop 1; B's run (triggered by that message) tries B → C, which would be hop 2.
    const inner = JSON.stringify({ sessionKey: group("c5"), message: "too far", timeoutSeconds: 0 });
    const send = JSON.stringify({ sessionKey: group("b5"), message: `send:${inner}`, timeoutSeconds: 10 });
    const ack = (await (await inbound("telegram", msg("a5", `send:${send}`))).json()) as { runId: string };
    await waitRun(ack.runId);
    const bTool = await eventually(async () =>
      (await history(group("b5"))).find((m) => m.role === "toolResult" && m.toolName === "sessions_send"),
    );
    const parsed = JSON.parse((bTool.content[0] as { text: string }).text);
    expect(parsed.status).toBe("error");
    expect(parsed.error).toContain("session.agentToAgent.maxHops (1)");
    expect(
      (await history(group("c5"))).some((m) => (m.content[0] as { text: string }).text === "too far"),
    ).toBe(false);
    world.restore();
  });

  it("stops three sessions that keep relaying to each other at maxHops, with a clear error", {
    timeout: 15_000,
  }, async () => {
    const next: Record<string, string> = {
      [group("a8")]: group("b8"),
      [group("b8")]: group("c8"),
      [group("c8")]: group("a8"),
    };
    const world = scriptedWorld((req) => {
      const self = /- session key: (\S+)/.exec(req.system)?.[1] ?? "";
      if (req.lastRole === "tool") return { text: `relayed: ${req.lastTool}` };
      if (req.lastUser.startsWith("relay")) {
        return {
          tool: "sessions_send",
          args: { sessionKey: next[self], message: "relay", timeoutSeconds: 0 },
        };
      }
      return agentScript({})(req);
    });
    await setup(["a8", "b8", "c8"], { session: { agentToAgent: { maxHops: 4, maxPingPongTurns: 0 } } });
    const ack = (await (await inbound("telegram", msg("a8", "relay"))).json()) as { runId: string };
    await waitRun(ack.runId);
    // Hops 1 (A→B), 2 (B→C), 3 (C→A), 4 (A→B) are sent; B's next send would be hop 5.
    const refusal = await eventually(async () => {
      for (const id of ["a8", "b8", "c8"]) {
        for (const m of await history(group(id))) {
          if (m.role !== "toolResult" || m.toolName !== "sessions_send") continue;
          const r = JSON.parse((m.content[0] as { text: string }).text) as { status: string; error?: string };
          if (r.status === "error") return { id, error: r.error ?? "" };
        }
      }
      return undefined;
    }, 10_000);
    expect(refusal.id).toBe("b8");
    expect(refusal.error).toContain("hop 5");
    expect(refusal.error).toContain("session.agentToAgent.maxHops (4)");
    // Every session done: no send was made after the refused one.
    await drain(group("a8"), group("b8"), group("c8"));
    const sends = world.requests.filter(
      (r) => r.lastUser.startsWith("relay") && r.lastRole === "user",
    ).length;
    expect(sends).toBe(5);
    world.restore();
  });

  it("does not deadlock when two sessions message each other at the same time", {
    timeout: 15_000,
  }, async () => {
    const world = scriptedWorld(agentScript({}));
    await setup(["a9", "b9"], { session: { agentToAgent: { maxPingPongTurns: 0 } } });
    const toB = JSON.stringify({ sessionKey: group("b9"), message: "from a", timeoutSeconds: 8 });
    const toA = JSON.stringify({ sessionKey: group("a9"), message: "from b", timeoutSeconds: 8 });
    const [ackA, ackB] = await Promise.all([
      inbound("telegram", msg("a9", `send:${toB}`)).then((r) => r.json() as Promise<{ runId: string }>),
      inbound("telegram", msg("b9", `send:${toA}`)).then((r) => r.json() as Promise<{ runId: string }>),
    ]);
    expect((await waitRun(ackA.runId)).status).toBe("ok");
    expect((await waitRun(ackB.runId)).status).toBe("ok");
    const statuses = [];
    for (const id of ["a9", "b9"]) {
      const m = (await history(group(id))).find((x) => x.toolName === "sessions_send");
      statuses.push((JSON.parse((m!.content[0] as { text: string }).text) as { status: string }).status);
    }
    // At most one of them waited for the other; neither deadlocked: a side that sees the other
    // waiting on it does not wait (one that waited out its 8 s would say "timeout").
    for (const status of statuses) expect(["accepted", "ok"]).toContain(status);
    world.restore();
  });

  it("does not deadlock when a session messages itself", async () => {
    const world = scriptedWorld(agentScript({}));
    await setup(["a6"]);
    const send = JSON.stringify({ sessionKey: "main", message: "note to self", timeoutSeconds: 10 });
    // `main` is the agent's main key here, not this group: use the group key explicitly.
    const selfSend = send.replace('"main"', JSON.stringify(group("a6")));
    const ack = (await (await inbound("telegram", msg("a6", `send:${selfSend}`))).json()) as {
      runId: string;
    };
    expect((await waitRun(ack.runId)).status).toBe("ok");
    // It did not wait for itself (that wait could only run out: "timeout").
    const result = (await history(group("a6"))).find((m) => m.toolName === "sessions_send");
    expect(JSON.parse((result!.content[0] as { text: string }).text)).toMatchObject({ status: "accepted" });
    await eventually(async () =>
      (await history(group("a6"))).some((m) => (m.content[0] as { text?: string })?.text === "note to self"),
    );
    world.restore();
  });
});

describe("sessions_send's wait", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("ends timeoutSeconds after the model asked, also when a resumed run repeats the call", async () => {
    const config = parseConfig(JSON.stringify({ tools: { sessions: { visibility: "agent" } } }));
    const [target] = await seedSessions([
      sessionRow({ key: "agent:main:telegram:group:wait-target", agentId: "main" }),
    ]);
    const waits: number[] = [];
    const sessions: SessionPort = {
      enqueue: async (req) => ({
        ok: true,
        runId: req.runId,
        sessionKey: req.sessionKey,
        sessionId: target?.sessionId ?? "",
        status: "queued",
      }),
      waitForRun: async (_key, runId, timeoutMs) => {
        waits.push(timeoutMs);
        return { runId, status: "timeout", runStatus: "queued" };
      },
      queueDepth: async () => ({ waiting: 0, running: false }),
      runInput: async () => undefined,
      note: async () => ({ ok: true as const }),
      stateChanges: async () => ({ stateVersion: 0 }),
      abort: async () => ({ aborted: 0 }),
    };
    const ctx = (calledAt?: number): ToolContext => ({
      caller: {
        sessionKey: "agent:main:telegram:group:wait-source",
        agentId: "main",
        runId: "r-wait",
        trigger: "inbound",
      },
      sessions,
      toolCallId: "c1",
      ...(calledAt === undefined ? {} : { calledAt }),
      config,
      env,
    });
    const args = { sessionKey: "agent:main:telegram:group:wait-target", message: "ping", timeoutSeconds: 5 };
    // The clock stands still: what is left of the wait is exactly timeoutSeconds less the delay.
    const now = holdClock(0);
    await sessionsSendTool.execute(args, ctx(now));
    // Resumed 4 s after the model asked: 1 s is left.
    await sessionsSendTool.execute(args, ctx(now - 4_000));
    // Resumed after the deadline: the target is asked once, without waiting.
    const late = await sessionsSendTool.execute(args, ctx(now - 60_000));
    // Over HTTP there is no earlier try.
    await sessionsSendTool.execute(args, ctx());
    expect(waits).toEqual([5_000, 1_000, 0, 5_000]);
    expect(late).toMatchObject({ status: "timeout", error: expect.stringContaining("no reply within 5s") });
  });
});
