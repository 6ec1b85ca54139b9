import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { appendMessages } from "../../src/db/messages";
import type { TranscriptMessage } from "../../src/transcript/message";
import { CONNECTORS, SCRIPTED_MODEL_CONFIG, scriptedWorld } from "./model-support";
import { seedSessions, sessionRow, transcriptMessages, withActorConfig } from "./rpc-support";
import { rpc, waitRun } from "./support";

let restore: (() => void) | undefined;
afterEach(() => restore?.());

describe("a turn's context", () => {
  it("includes the stored transcript of a session written to D1 before its actor existed", async () => {
    const world = scriptedWorld(() => ({ text: "noted" }));
    restore = world.restore;
    const key = "agent:main:seeded-context";
    const [row] = await seedSessions([sessionRow({ key, agentId: "main" })]);
    await appendMessages(env, key, row!.sessionId, transcriptMessages("seed", 6));
    await withActorConfig(key, { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS });

    const ack = await rpc<{ runId: string; sessionId: string }>("agent", {
      sessionKey: key,
      message: "and now?",
    });
    expect(ack.payload.sessionId).toBe(row!.sessionId);
    expect((await waitRun(ack.payload.runId)).status).toBe("ok");

    const sent = world.requests[0]!.messages.filter((m) => m.role !== "system");
    // The six stored messages, then this turn's input.
    expect(sent).toHaveLength(7);
    expect(sent.at(-1)).toMatchObject({ role: "user" });
    expect(JSON.stringify(sent.at(-1)?.content)).toContain("and now?");
  });

  it("for a transcript compacted before its actor existed, holds the latest summary and only the messages after it", async () => {
    const world = scriptedWorld(() => ({ text: "noted" }));
    restore = world.restore;
    const key = "agent:main:seeded-compacted";
    const [row] = await seedSessions([sessionRow({ key, agentId: "main", compactionCount: 2 })]);
    const older = transcriptMessages("old", 10);
    const compaction = (n: number, firstKeptId: string): TranscriptMessage => ({
      id: `seed-compaction-${n}`,
      role: "system",
      content: [{ type: "text", text: `SUMMARY ${n}` }],
      timestamp: 1_700_000_100_000 + n,
      compaction: { firstKeptId },
    });
    const newer = transcriptMessages("new", 6, { start: 1_700_000_200_000 });
    // Two compactions: the latest keeps old-9 and old-10, then six newer messages follow.
    await appendMessages(env, key, row!.sessionId, [
      ...older.slice(0, 6),
      compaction(1, "old-5"),
      ...older.slice(6),
      compaction(2, "old-9"),
      ...newer,
    ]);
    await withActorConfig(key, { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS });

    const ack = await rpc<{ runId: string }>("agent", { sessionKey: key, message: "go on" });
    expect((await waitRun(ack.payload.runId)).status).toBe("ok");
    const req = world.requests[0]!;
    expect(req.system).toContain("## Conversation summary");
    expect(req.system).toContain("SUMMARY 2");
    expect(req.system).not.toContain("SUMMARY 1");
    const sent = req.messages.filter((m) => m.role !== "system").map((m) => JSON.stringify(m.content));
    // old-9, old-10, the six newer messages, then the input: no compaction entry, nothing older.
    expect(sent).toHaveLength(9);
    expect(sent[0]).toContain("message 9");
    expect(sent.at(-1)).toContain("go on");

    // The next turn is built from the actor's copy: the same context plus the last exchange.
    const again = await rpc<{ runId: string }>("agent", { sessionKey: key, message: "and then" });
    expect((await waitRun(again.payload.runId)).status).toBe("ok");
    expect(world.requests[1]!.messages.filter((m) => m.role !== "system")).toHaveLength(11);
    expect(world.requests[1]!.system).toContain("SUMMARY 2");
  });

  it("holds no older messages for a session its actor created", async () => {
    const world = scriptedWorld(() => ({ text: "hi" }));
    restore = world.restore;
    const key = "agent:main:fresh-context";
    await withActorConfig(key, { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS });
    const first = await rpc<{ runId: string }>("agent", { sessionKey: key, message: "one" });
    await waitRun(first.payload.runId);
    const second = await rpc<{ runId: string }>("agent", { sessionKey: key, message: "two" });
    await waitRun(second.payload.runId);

    expect(world.requests[0]!.messages.filter((m) => m.role !== "system")).toHaveLength(1);
    // The second turn sees the first exchange.
    expect(world.requests[1]!.messages.filter((m) => m.role !== "system")).toHaveLength(3);
  });
});
