import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { appendMessages } from "../../src/db/queries";
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
    await appendMessages(env, row!.sessionId, transcriptMessages("seed", 6));
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
