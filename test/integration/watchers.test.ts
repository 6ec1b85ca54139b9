/**
 * Watchers (SPEC §20 "State awareness"): a session watches the sub-agents it spawns and the
 * targets of its `sessions_send { watch: true }`; when a person or an operator changes a watched
 * session (a message, a reset, a setting), the watcher's next run starts with one note per
 * session however many changes there were, a later change opens a new one, and pending notes
 * survive a crash.
 */
import { abortAllDurableObjects } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  CONNECTORS,
  group,
  history,
  lastToolResult,
  type ModelAnswer,
  type ModelRequest,
  SCRIPTED_MODEL_CONFIG,
  sayInGroup,
  scriptedWorld,
} from "./model-support";
import { withActorConfig } from "./rpc-support";
import { drain, rpc, waitRun } from "./support";

const CONFIG = {
  ...SCRIPTED_MODEL_CONFIG,
  connectors: CONNECTORS,
  tools: { sessions: { visibility: "agent" } },
};

function script(req: ModelRequest): ModelAnswer {
  if (req.system.includes("## Sub-agent")) return { text: "done" };
  if (req.lastRole === "tool") return { text: `ok: ${req.lastTool}` };
  if (req.lastUser.startsWith("send:"))
    return { tool: "sessions_send", args: JSON.parse(req.lastUser.slice(5)) };
  if (req.lastUser.startsWith("spawn:"))
    return { tool: "sessions_spawn", args: JSON.parse(req.lastUser.slice(6)) };
  return { text: `answer to ${req.lastUser}` };
}

async function say(id: string, text: string): Promise<string> {
  const runId = await sayInGroup(id, text);
  expect(await waitRun(runId)).toMatchObject({ status: "ok" });
  return runId;
}

/** The "Sessions you watch" notes of the system prompt of the model call answering `text`. */
function notesFor(requests: ModelRequest[], text: string): string[] {
  const req = [...requests].reverse().find((r) => r.lastUser === text);
  const section = req?.system.split("## Sessions you watch\n")[1]?.split("\n\n")[0];
  return section ? section.split("\n").filter((l) => l.startsWith("Session ")) : [];
}

describe("watchers", () => {
  it("twenty changes to a watched session make one note, which survives a crash and is shown once", async () => {
    const world = scriptedWorld(script);
    const watcher = "watch-a";
    const target = "watch-b";
    await say(target, "hello from b");
    await say(watcher, "hello from a");
    await withActorConfig(group(watcher), CONFIG);
    await say(
      watcher,
      `send:${JSON.stringify({ sessionKey: group(target), message: "hi", timeoutSeconds: 0, watch: true })}`,
    );
    const result = lastToolResult<{ watched?: boolean; watchVersion?: number }>(
      await history(group(watcher)),
      "sessions_send",
    );
    expect(result).toMatchObject({ watched: true, watchVersion: expect.any(Number) });
    // The exchange the message started (the target's run, its reply in the watcher) ends first.
    await drain(group(watcher), group(target));

    for (let i = 0; i < 20; i++) {
      expect((await rpc("sessions.patch", { key: group(target), label: `watched-${i}` })).status).toBe(200);
    }
    // The watcher's actor dies before its next run: the note is not lost.
    await abortAllDurableObjects();
    await withActorConfig(group(watcher), CONFIG);

    await say(watcher, "what changed");
    const notes = notesFor(world.requests, "what changed");
    expect(notes).toHaveLength(1);
    const quoted = JSON.stringify(group(target));
    expect(notes[0]).toMatch(
      new RegExp(
        `^Session ${quoted} changed \\(settings_changed\\)\\. Reconcile before acting: session_status sessionKey ${quoted} changesSince \\d+\\.$`,
      ),
    );
    // Consumed by the run that showed it.
    await say(watcher, "anything else");
    expect(notesFor(world.requests, "anything else")).toEqual([]);
    // A later change opens a new note: a person's message in the target.
    await say(target, "a person writes");
    await say(watcher, "and now");
    expect(notesFor(world.requests, "and now")).toHaveLength(1);
    expect(notesFor(world.requests, "and now")[0]).toContain("(human_message)");
    world.restore();
  });

  it("a session watches the sub-agent it spawned; a reset of the watcher drops its watches", async () => {
    const world = scriptedWorld(script);
    const id = "watch-spawn";
    await say(id, "hello");
    await withActorConfig(group(id), CONFIG);
    await say(id, `spawn:${JSON.stringify({ task: "a task", model: "fake/m" })}`);
    const child = lastToolResult<{ childSessionKey: string }>(
      await history(group(id)),
      "sessions_spawn",
    ).childSessionKey;
    expect((await rpc("sessions.patch", { key: child, label: "renamed-child" })).status).toBe(200);
    await say(id, "check");
    expect(notesFor(world.requests, "check")[0]).toContain(`Session "${child}" changed (settings_changed)`);

    expect((await rpc("sessions.reset", { key: group(id) })).status).toBe(200);
    expect((await rpc("sessions.patch", { key: child, label: "renamed-again" })).status).toBe(200);
    await say(id, "after reset");
    expect(notesFor(world.requests, "after reset")).toEqual([]);
    world.restore();
  });
});
