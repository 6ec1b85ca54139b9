import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { getSession } from "../../src/db/queries";
import { getRun } from "../../src/db/runs";
import type { SessionActor } from "../../src/session/actor";
import type { ActorStore } from "../../src/session/storage/store";
import { withActorConfig } from "./rpc-support";
import { actor, eventually, fakeConnector, inbound, rpc, waitRun } from "./support";

const TEST_CONFIG = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;
const OWNED = {
  ...TEST_CONFIG,
  session: { identityLinks: { alice: ["telegram:alice-tg", "discord:alice-dc"] } },
  commands: { owners: ["telegram:owner-1", "alice"] },
};

let n = 0;
function say(room: string, from: string, text: string) {
  n++;
  return inbound("telegram", { messageId: `cmd-${room}-${n}`, chatType: "group", groupId: room, from, text });
}

interface Ack {
  ok: boolean;
  runId: string;
  sessionKey: string;
  sessionId: string;
  status: string;
}

async function ack(res: Promise<Response>): Promise<Ack> {
  return (await (await res).json()) as Ack;
}

/** A room whose actor runs with the owners config, with one delivered exchange in it. */
async function room(id: string, connector: ReturnType<typeof fakeConnector>) {
  const key = `agent:main:telegram:group:${id}`;
  await withActorConfig(key, OWNED);
  const first = await ack(say(id, "someone", "hello"));
  await waitRun(first.runId);
  await eventually(async () => connector.delivered.some((d) => d.body.sessionKey === key));
  return key;
}

function noticesTo(connector: ReturnType<typeof fakeConnector>, key: string): string[] {
  return connector.delivered
    .filter((d) => d.body.sessionKey === key && d.body.kind === "notice")
    .map((d) => String(d.body.text));
}

let connector: ReturnType<typeof fakeConnector> | undefined;
afterEach(() => {
  connector?.restore();
  connector = undefined;
});

describe("/send on|off|inherit", () => {
  it("from an owner, /send off blocks the next reply, which stays in the transcript as undelivered", async () => {
    connector = fakeConnector();
    const key = await room("cmd-owner", connector);
    const off = await ack(say("cmd-owner", "owner-1", "/send off"));
    expect(off.status).toBe("command");
    expect((await getSession(env, key))?.sendPolicy).toBe("deny");
    // The owner hears back once: the policy allowed posting before the change.
    await eventually(async () => noticesTo(connector!, key).length === 1);
    expect(noticesTo(connector, key)).toEqual(["Send policy: off (deny) for this session."]);

    const blocked = await ack(say("cmd-owner", "someone", "are you there?"));
    expect((await waitRun(blocked.runId)).status).toBe("ok");
    const run = await getRun(env, blocked.runId);
    expect(run).toMatchObject({ delivered: false, reply: "echo: are you there?" });
    const history = await rpc<{ messages: Array<{ role: string; runId?: string }> }>("chat.history", {
      sessionKey: key,
    });
    expect(history.payload.messages.some((m) => m.role === "assistant" && m.runId === blocked.runId)).toBe(
      true,
    );
    expect(connector.delivered.some((d) => d.body.text === "echo: are you there?")).toBe(false);

    // /send on is confirmed (the new policy allows it) and replies flow again.
    await ack(say("cmd-owner", "owner-1", "/send on"));
    expect((await getSession(env, key))?.sendPolicy).toBe("allow");
    await eventually(async () => noticesTo(connector!, key).length === 2);
    const again = await ack(say("cmd-owner", "someone", "back?"));
    await waitRun(again.runId);
    await eventually(async () => connector!.delivered.some((d) => d.body.text === "echo: back?"));

    await ack(say("cmd-owner", "owner-1", "/send inherit"));
    expect((await getSession(env, key))?.sendPolicy).toBeNull();
  });

  it("from a non-owner is refused with a notice, and nothing changes", async () => {
    connector = fakeConnector();
    const key = await room("cmd-stranger", connector);
    const res = await ack(say("cmd-stranger", "stranger", "/send off"));
    expect(res.status).toBe("command");
    await eventually(async () => noticesTo(connector!, key).length === 1);
    expect(noticesTo(connector, key)[0]).toMatch(/Only an owner can change/);
    expect((await getSession(env, key))?.sendPolicy).toBeNull();
    const next = await ack(say("cmd-stranger", "someone", "still talking"));
    await waitRun(next.runId);
    expect(await rpc("runs.get", { runId: next.runId })).toMatchObject({ payload: { delivered: true } });
  });

  it("accepts an owner named by an identity link, on any of its channels", async () => {
    connector = fakeConnector();
    const key = await room("cmd-alice", connector);
    await ack(say("cmd-alice", "alice-tg", "/send off"));
    expect((await getSession(env, key))?.sendPolicy).toBe("deny");
  });

  it("answers a wrong argument with the usage, without a model turn", async () => {
    connector = fakeConnector();
    const key = await room("cmd-usage", connector);
    const res = await ack(say("cmd-usage", "owner-1", "/send maybe"));
    expect(res.status).toBe("command");
    await eventually(async () => noticesTo(connector!, key).length === 1);
    expect(noticesTo(connector, key)).toEqual(["Usage: /send on|off|inherit"]);
    expect(await getRun(env, res.runId)).toBeUndefined();
  });
});

describe("commands follow SPEC §4's order: route, freshness, then the command", () => {
  it("/send off as a session's first message creates the entry, with its route, and sticks", async () => {
    connector = fakeConnector();
    const key = "agent:main:telegram:group:cmd-first";
    await withActorConfig(key, OWNED);
    const off = await ack(say("cmd-first", "owner-1", "/send off"));
    expect(off).toMatchObject({ status: "command", sessionKey: key, sessionId: expect.any(String) });
    expect(off.sessionId).not.toBe("");
    const entry = await getSession(env, key);
    expect(entry).toMatchObject({
      sessionId: off.sessionId,
      sendPolicy: "deny",
      lastChannel: "telegram",
      deliveryContext: { channel: "telegram", to: "cmd-first", accountId: "default" },
    });
    // The owner hears back once (the policy allowed posting before the change) ...
    await eventually(async () => noticesTo(connector!, key).length === 1);
    // ... and the next message's reply is held back.
    const next = await ack(say("cmd-first", "someone", "hello?"));
    expect(next.sessionId).toBe(off.sessionId);
    expect((await waitRun(next.runId)).status).toBe("ok");
    expect(await getRun(env, next.runId)).toMatchObject({ delivered: false });
  });

  it("a command to a session its reset policy has closed starts the new sessionId first", async () => {
    connector = fakeConnector();
    const key = await room("cmd-stale", connector);
    const before = await getSession(env, key);
    await withActorConfig(key, {
      ...OWNED,
      session: { ...OWNED.session, reset: { mode: "idle", idleMinutes: 1 } },
    });
    // The last interaction was two minutes ago.
    await runInDurableObject(actor(key), (instance: SessionActor) => {
      const store = (instance as unknown as { store: ActorStore }).store;
      const entry = store.entry()!;
      store.saveEntry({ ...entry, lastInteractionAt: Date.now() - 120_000 });
    });
    const status = await ack(say("cmd-stale", "someone", "/status"));
    expect(status.status).toBe("command");
    expect(status.sessionId).not.toBe(before?.sessionId);
    expect((await getSession(env, key))?.sessionId).toBe(status.sessionId);
    await eventually(async () => noticesTo(connector!, key).length === 1);
    expect(noticesTo(connector, key)[0]).toContain(status.sessionId);
  });
});

describe("/status", () => {
  it("answers with the status card as a notice, and nothing enters the transcript", async () => {
    connector = fakeConnector();
    const key = await room("cmd-status", connector);
    const before = await rpc<{ messages: unknown[] }>("chat.history", { sessionKey: key });
    const res = await ack(say("cmd-status", "someone", "/status"));
    expect(res.status).toBe("command");
    await eventually(async () => noticesTo(connector!, key).length === 1);
    const [card] = noticesTo(connector, key);
    const entry = await getSession(env, key);
    expect(card?.split("\n")).toEqual([
      expect.stringMatching(/^Switchboard \S+ · reachable$/),
      `Session: ${key}`,
      `Session id: ${entry?.sessionId}`,
      "Model: echo/echo",
      expect.stringMatching(
        /^Context: \d+ of 32k tokens \(\d+(\.\d)?%\) · in \d+ \/ out \d+ this session · 0 compactions$/,
      ),
      // The echo model costs nothing.
      "Cost: $0 this session (priced model calls)",
      "Thinking: off · Verbose: off",
      "Send policy: allow (inherited)",
      "Queue: 0 waiting · idle",
      expect.stringMatching(/^Last reset: \d{4}-\d\d-\d\d \d\d:\d\d UTC$/),
    ]);
    const after = await rpc<{ messages: unknown[] }>("chat.history", { sessionKey: key });
    expect(after.payload.messages).toHaveLength(before.payload.messages.length);
  });
});
