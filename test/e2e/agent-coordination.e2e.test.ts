/**
 * An agent coordinating its sub-agents and watching other sessions, end to end against
 * `wrangler dev` (SPEC §20): `sessions_yield` ends the turn and each sub-agent's announcement
 * then starts one run in which the agent acts on it; `subagents` lists the runs a session
 * spawned and cancels one; twenty changes to a session watched through `sessions_send
 * { watch: true }` reach the watcher's next turn as one note. With four databases too
 * (e2e-d1x4): requester, children and watched sessions are spread over them.
 *
 * The model (support/deciding-model.ts) answers from the request: `spawn:{…}` / `send:{…}` call
 * the session tools, `yield` calls sessions_yield, `subagents:{…}` calls subagents, and a turn
 * whose user message is an announcement (`Status: …`) acts on it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Answer,
  type DecidingModel,
  decideSessionTools,
  decidingConfig,
  type SeenRequest,
  startDecidingModel,
} from "./support/deciding-model.ts";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import { CONNECTOR_SECRET, type Gateway, settled, startGateway, waitFor } from "./support/gateway.ts";

const WORKING = "Working on it";

function decide(r: SeenRequest): Answer {
  if (!r.system.includes("## Sub-agent") && r.lastRole === "user") {
    if (r.lastUser === "yield") return { tool: "sessions_yield", args: { message: WORKING } };
    const subagents = /^subagents:(\{.*\})$/s.exec(r.lastUser);
    if (subagents) return { tool: "subagents", args: JSON.parse(subagents[1] ?? "{}") };
    if (r.lastUser.startsWith("Status:")) return { text: `acting on: ${r.lastUser.split("\n")[0]}` };
  }
  return decideSessionTools(r);
}

interface TranscriptMessage {
  role: string;
  runId?: string;
  toolName?: string;
  content: Array<{ type: string; text?: string }>;
  provenance?: { kind?: string; sourceSessionKey?: string };
}

let gw: Gateway;
let connector: FakeConnector;
let model: DecidingModel;

const groupKey = (id: string) => `agent:main:telegram:group:${id}`;
const textOf = (m: TranscriptMessage) => m.content.map((p) => p.text ?? "").join("");

beforeAll(async () => {
  [connector, model] = await Promise.all([startFakeConnector(CONNECTOR_SECRET), startDecidingModel(decide)]);
  gw = await startGateway({
    config: decidingConfig(connector.url, model.baseUrl, { visibility: "all", maxPingPongTurns: 0 }),
  });
});

afterAll(async () => {
  await gw?.dispose();
  await Promise.all([connector?.close(), model?.close()]);
});

let seq = 0;
async function say(groupId: string, text: string): Promise<string> {
  const ack = await gw.inbound("telegram", {
    messageId: `ac-${groupId}-${++seq}`,
    chatType: "group",
    from: "700000002",
    groupId,
    text,
  });
  expect(ack.status, JSON.stringify(ack.body)).toBe(202);
  const runId = ack.body.runId as string;
  expect((await gw.call<{ status: string }>("agent.wait", { runId, timeoutMs: 30_000 })).status).toBe("ok");
  return runId;
}

async function history(sessionKey: string): Promise<TranscriptMessage[]> {
  const page = await gw.call<{ messages: TranscriptMessage[] }>("chat.history", {
    sessionKey,
    limit: 1000,
    includeTools: true,
  });
  return page.messages;
}

async function lastToolResult<T>(sessionKey: string, toolName: string): Promise<T> {
  const found = (await history(sessionKey)).filter((m) => m.role === "toolResult" && m.toolName === toolName);
  const last = found.at(-1);
  if (!last) throw new Error(`no ${toolName} result in ${sessionKey}`);
  return JSON.parse(textOf(last)) as T;
}

/** A sub-agent task's model call (not its announce step) for `task`. */
const taskCall = (task: string) => (r: SeenRequest) =>
  r.system.includes("## Sub-agent") && !r.system.includes("announce step") && r.lastUser === task;

describe("sessions_yield", () => {
  it("ends the turn; two sub-agents' announcements each start one run that acts on it", async () => {
    const id = "ac-yield";
    const key = groupKey(id);
    await say(id, "hello");
    const a = model.hangOn(taskCall("task A"));
    const b = model.hangOn(taskCall("task B"));
    await say(id, `spawn:${JSON.stringify({ task: "task A" })}`);
    await say(id, `spawn:${JSON.stringify({ task: "task B" })}`);
    await Promise.all([a.started, b.started]);

    const calls = model.requests.length;
    const yielded = await say(id, "yield");
    // One model call asked for the tool; none came after its result.
    expect(model.requests.length - calls).toBe(1);
    expect(await lastToolResult(key, "sessions_yield")).toMatchObject({
      status: "yielded",
      message: WORKING,
    });
    await waitFor(() => connector.deliveriesFor({ to: id, kind: "reply", text: WORKING })[0], 30_000, {
      what: "the yielding turn's reply",
    });
    expect(connector.deliveriesFor({ deliveryId: `${yielded}:reply` })).toHaveLength(1);

    a.release();
    b.release();
    const acted = await waitFor(
      () => {
        const found = connector
          .deliveriesFor({ to: id, kind: "reply" })
          .filter((d) => String(d.body?.text).startsWith("acting on: Status: ok"));
        return found.length === 2 ? found : undefined;
      },
      60_000,
      { what: "two runs acting on the announcements" },
    );
    expect(new Set(acted.map((d) => d.body?.deliveryId)).size).toBe(2);
    await settled(gw, key);
    // Each announcement is the user message of its own run, once.
    const announcements = (await history(key)).filter((m) => m.provenance?.kind === "subagent_announce");
    expect(announcements).toHaveLength(2);
    expect(new Set(announcements.map((m) => m.runId)).size).toBe(2);
    expect(announcements.every((m) => m.role === "user" && textOf(m).startsWith("Status: ok"))).toBe(true);
    // And each is still posted to the chat as an announcement.
    expect(connector.deliveriesFor({ to: id, kind: "announce" })).toHaveLength(2);
  });
});

describe("subagents", () => {
  it("lists the session's sub-agent runs with their status and cancels one", async () => {
    const id = "ac-subagents";
    const key = groupKey(id);
    await say(id, "hello");
    const hang = model.hangOn(taskCall("task C"));
    await say(id, `spawn:${JSON.stringify({ task: "task C" })}`);
    await hang.started;

    await say(id, `subagents:${JSON.stringify({ action: "list" })}`);
    const listed = await lastToolResult<{ runs: Array<{ runId: string; status: string; task?: string }> }>(
      key,
      "subagents",
    );
    expect(listed.runs).toHaveLength(1);
    const run = listed.runs[0];
    expect(run).toMatchObject({ status: "running", task: "task C" });

    await say(id, `subagents:${JSON.stringify({ action: "cancel", runId: run?.runId })}`);
    expect(await lastToolResult(key, "subagents")).toMatchObject({ status: "cancelled", runId: run?.runId });
    const ended = await gw.call<{ status: string }>("agent.wait", { runId: run?.runId, timeoutMs: 30_000 });
    expect(ended.status).toBe("aborted");
    hang.release();

    await say(id, `subagents:${JSON.stringify({ action: "list" })}`);
    const after = await lastToolResult<{ runs: Array<{ runId: string; status: string }> }>(key, "subagents");
    expect(after.runs).toEqual([expect.objectContaining({ runId: run?.runId, status: "aborted" })]);
  });
});

describe("watchers", () => {
  it("twenty changes to a watched session make one note in the watcher's next turn", async () => {
    const [watcher, target] = ["ac-watcher", "ac-watched"];
    await say(target, "hello");
    await say(watcher, "hello");
    await say(
      watcher,
      `send:${JSON.stringify({ sessionKey: groupKey(target), message: "hi", timeoutSeconds: 0, watch: true })}`,
    );
    expect(await lastToolResult(groupKey(watcher), "sessions_send")).toMatchObject({ watched: true });
    await settled(gw, [groupKey(watcher), groupKey(target)]);

    for (let i = 0; i < 20; i++) {
      await gw.call("sessions.patch", { key: groupKey(target), label: `watched ${i}` });
    }
    const before = model.requests.length;
    await say(watcher, "what changed?");
    const turn = model.requests.slice(before).find((r) => r.lastUser === "what changed?");
    const notes = (turn?.system.split("## Sessions you watch\n")[1] ?? "")
      .split("\n")
      .filter((l) => l.startsWith("Session "));
    expect(notes).toHaveLength(1);
    expect(notes[0]).toContain(`Session "${groupKey(target)}" changed (settings_changed)`);

    // Shown once: the turn after it has no note.
    const next = model.requests.length;
    await say(watcher, "anything else?");
    const again = model.requests.slice(next).find((r) => r.lastUser === "anything else?");
    expect(again?.system).not.toContain("## Sessions you watch");
  });
});
