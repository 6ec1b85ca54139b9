/**
 * `sessions_yield` (SPEC §20) and the run lifecycle's `yielded` transition: the yielding run
 * ends after the tool call (no further model step), its `message` is its reply; each
 * announcement of a sub-agent it waited on then starts one run whose user message is the
 * announcement, and the yield ends with the last one. The yield survives a crash of the
 * requester's actor; a session with no sub-agent left gets a tool error.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { SessionActor } from "../../src/session/actor";
import type { YieldState } from "../../src/session/storage/documents";
import type { TranscriptMessage } from "../../src/transcript/message";
import {
  CONNECTORS,
  group,
  history,
  type ModelAnswer,
  type ModelRequest,
  SCRIPTED_MODEL_CONFIG,
  sayInGroup,
  scriptedGroup,
  scriptedWorld,
} from "./model-support";
import { withActorConfig } from "./rpc-support";
import { actor, eventually } from "./support";

const requester = (id: string) => scriptedGroup(id);
const say = sayInGroup;

function yieldingOf(key: string): Promise<YieldState | undefined> {
  return runInDurableObject(actor(key), async (instance: SessionActor) => {
    await instance.getEntry(key);
    return (instance as unknown as { store: { yielding(): YieldState | undefined } }).store.yielding();
  });
}

const textOf = (m: TranscriptMessage) => m.content.map((p) => (p.type === "text" ? p.text : "")).join("");

/** The requester spawns on `spawn:…`, yields on `yield`, and acts on each announcement it is given. */
function script(children: { held: () => boolean }) {
  return (req: ModelRequest): ModelAnswer => {
    if (req.system.includes("## Sub-agent")) {
      if (req.system.includes("This is the announce step"))
        return { text: `result of ${req.lastUser.slice(0, 0)}task` };
      return { text: `finished ${req.lastUser}`, held: children.held };
    }
    if (req.lastRole === "tool") return { text: `noted: ${req.lastTool}` };
    if (req.lastUser.startsWith("spawn:"))
      return { tool: "sessions_spawn", args: JSON.parse(req.lastUser.slice(6)) };
    if (req.lastUser === "yield") return { tool: "sessions_yield", args: { message: "Working on it" } };
    if (req.lastUser.startsWith("Status:")) return { text: `acting on: ${req.lastUser.split("\n")[0]}` };
    return { text: `answer to ${req.lastUser}` };
  };
}

describe("sessions_yield", () => {
  it("ends the turn; two sub-agents' announcements each start one run; the yield survives a crash and then ends", {
    timeout: 30_000,
  }, async () => {
    let holding = true;
    const world = scriptedWorld(script({ held: () => holding }));
    const id = "sy1";
    const key = group(id);
    await requester(id);
    await say(id, `spawn:${JSON.stringify({ task: "task A", model: "fake/m" })}`);
    await say(id, `spawn:${JSON.stringify({ task: "task B", model: "fake/m" })}`);
    await eventually(async () => world.requests.filter((r) => r.lastUser.startsWith("task ")).length === 2);

    const before = world.requests.length;
    const yieldRun = await say(id, "yield");
    // One model call (the one asking for the tool), no step after the tool's result.
    expect(world.requests.length - before).toBe(1);
    const reply = await eventually(async () =>
      world.delivered.find((d) => d.body.kind === "reply" && d.body.text === "Working on it"),
    );
    expect(reply.body.to).toBe(id);
    const yielded = await yieldingOf(key);
    expect(yielded).toMatchObject({ runId: yieldRun });
    expect(yielded?.waitingOn).toHaveLength(2);

    // Every actor dies (the children's held calls fail; their alarms resume them); the yield
    // is durable. The requester's next instance gets the scripted model again.
    await abortAllDurableObjects();
    expect((await yieldingOf(key))?.waitingOn).toHaveLength(2);
    await withActorConfig(key, { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS });

    holding = false;
    const acted = await eventually(async () => {
      const found = world.delivered.filter(
        (d) => d.body.kind === "reply" && String(d.body.text).startsWith("acting on: Status: ok"),
      );
      return found.length === 2 ? found : undefined;
    }, 20_000);
    expect(acted.map((d) => d.body.to)).toEqual([id, id]);
    await eventually(async () => (await yieldingOf(key)) === undefined);

    // Each announcement is a run's user message, once, with its provenance.
    const transcript = await history(key);
    const announcements = transcript.filter((m) => m.provenance?.kind === "subagent_announce");
    expect(announcements).toHaveLength(2);
    expect(announcements.every((m) => m.role === "user" && textOf(m).startsWith("Status: ok"))).toBe(true);
    expect(new Set(announcements.map((m) => m.runId ?? m.id)).size).toBe(2);

    // No yield, no run: an announcement after the yield ended is appended as before.
    const runsBefore = world.requests.length;
    await say(id, `spawn:${JSON.stringify({ task: "task C", model: "fake/m" })}`);
    await eventually(
      async () => (await history(key)).filter((m) => m.provenance?.kind === "subagent_announce").length === 3,
    );
    const after = world.requests.slice(runsBefore).filter((r) => r.lastUser.startsWith("Status:"));
    expect(after).toHaveLength(0);
    world.restore();
  });

  it("while the turn that calls sessions_yield ends, any sub-agent's announcement starts a run", async () => {
    let holding = true;
    const world = scriptedWorld(script({ held: () => holding }));
    const id = "sy3";
    const key = group(id);
    await requester(id);
    await say(id, `spawn:${JSON.stringify({ task: "task A", model: "fake/m" })}`);
    await eventually(async () => world.requests.some((r) => r.lastUser === "task A"));
    // A turn's step called sessions_yield (its `stepped` step marks the yield `calling`) and the
    // turn has not ended: the tool may not have counted this child, whose announcement comes now.
    await runInDurableObject(actor(key), async (instance: SessionActor) => {
      const store = (instance as unknown as { store: { setYielding(s: YieldState): void } }).store;
      store.setYielding({ runId: "turn-ending", since: Date.now(), waitingOn: [], calling: true });
    });
    holding = false;
    const acted = await eventually(async () =>
      world.delivered.find(
        (d) => d.body.kind === "reply" && String(d.body.text).startsWith("acting on: Status: ok"),
      ),
    );
    expect(acted.body.to).toBe(id);
    const announcements = (await history(key)).filter((m) => m.provenance?.kind === "subagent_announce");
    expect(announcements).toHaveLength(1);
    expect(announcements[0]?.runId).toBeDefined();
    // The turn's end, not the announcement, settles the yield.
    expect(await yieldingOf(key)).toMatchObject({ calling: true, waitingOn: [] });
    world.restore();
  });

  it("refuses with nothing to wait for when no sub-agent is running", async () => {
    const world = scriptedWorld(script({ held: () => false }));
    const id = "sy2";
    await requester(id);
    await say(id, "yield");
    const result = (await history(group(id))).find(
      (m) => m.role === "toolResult" && m.toolName === "sessions_yield",
    );
    expect(JSON.parse(textOf(result as TranscriptMessage))).toEqual({
      status: "error",
      error: "nothing to wait for: no running sub-agent",
    });
    expect(await yieldingOf(group(id))).toBeUndefined();
    world.restore();
  });
});
