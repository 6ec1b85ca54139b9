/**
 * Every stored row stays well under the 2 MB row limit of D1 and DO SQLite, whatever the input
 * (SPEC §16): a run's checkpoint does not grow with its steps, collect-mode merges are bounded
 * by `session.queue.cap`, and a transcript message longer than MAX_MESSAGE_CHARS is cut with a
 * marker instead of failing its write.
 */
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { queuedRunCodec } from "../../src/session/storage/documents";
import { currentTimeTool } from "../../src/tools/current-time";
import { MAX_MESSAGE_CHARS } from "../../src/transcript/message";
import {
  CONNECTORS,
  group,
  groupMessage,
  history,
  SCRIPTED_MODEL_CONFIG,
  scriptedWorld,
} from "./model-support";
import { withActorConfig } from "./rpc-support";
import { actor, eventually, inbound, waitRun } from "./support";

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
  vi.restoreAllMocks();
});

async function say(id: string, text: string) {
  const res = await inbound("telegram", groupMessage(id, text));
  return { status: res.status, body: (await res.json()) as { runId: string; error?: { message: string } } };
}

const text = (m: { content: Array<{ type: string; text?: string }> }) =>
  m.content.map((p) => (p.type === "text" ? (p.text ?? "") : "")).join("");

describe("a run's checkpoint", () => {
  it("stores each step once, in its own row, and stays small however many steps the run takes", async () => {
    let calls = 0;
    const world = scriptedWorld(() => {
      calls++;
      if (calls <= 12) return { tool: "current_time", args: {} };
      return { text: "done", delayMs: 60_000 };
    });
    restore = world.restore;
    const id = `steps-${crypto.randomUUID().slice(0, 6)}`;
    const key = group(id);
    await withActorConfig(key, { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS });
    const ack = await say(id, "go");
    await eventually(async () => calls > 12, 10_000);
    const stored = await runInDurableObject(actor(key), (_i, state) => ({
      checkpoint: state.storage.sql
        .exec<{ checkpoint: string }>(`SELECT checkpoint FROM queue WHERE run_id = ?`, ack.body.runId)
        .one().checkpoint,
      steps: state.storage.sql
        .exec<{ n: number }>(`SELECT COUNT(*) AS n FROM run_steps WHERE run_id = ?`, ack.body.runId)
        .one().n,
    }));
    // 12 model steps with a tool call each, and 12 tool results.
    expect(stored.steps).toBe(24);
    expect(stored.checkpoint.length).toBeLessThan(600);
    expect(stored.checkpoint).not.toContain("current_time");
    await inbound("telegram", groupMessage(id, "/stop"));
    expect((await waitRun(ack.body.runId)).status).toBe("aborted");
  });
});

describe("collect mode", () => {
  it("merges at most session.queue.cap messages into one waiting run, and refuses past the cap", async () => {
    const world = scriptedWorld(() => ({ text: "slow", delayMs: 60_000 }));
    restore = world.restore;
    const id = `collect-cap-${crypto.randomUUID().slice(0, 6)}`;
    const key = group(id);
    await withActorConfig(key, {
      ...SCRIPTED_MODEL_CONFIG,
      connectors: CONNECTORS,
      session: { queue: { mode: "collect", cap: 3 } },
    });
    const running = await say(id, "first");
    await eventually(async () => world.calls() > 0);
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) statuses.push((await say(id, `burst ${i}`)).status);
    const queued = await runInDurableObject(actor(key), (_i, state) =>
      state.storage.sql
        .exec<{ spec: string }>(`SELECT spec FROM queue WHERE state = 'queued' ORDER BY pos`)
        .toArray()
        .map((r) => queuedRunCodec.decode(r.spec).req.inputs.length),
    );
    // Three waiting runs of three merged messages each; the rest refused (429).
    expect(queued).toEqual([3, 3, 3]);
    expect(statuses.filter((s) => s === 202)).toHaveLength(9);
    expect(statuses.filter((s) => s === 429)).toHaveLength(3);
    await inbound("telegram", groupMessage(id, "/stop"));
    expect((await waitRun(running.body.runId)).status).toBe("aborted");
  });
});

describe("a transcript message", () => {
  it("longer than the bound is cut with a marker, from a tool and from a person", async () => {
    vi.spyOn(currentTimeTool, "execute").mockResolvedValue({ blob: "x".repeat(300_000) });
    const id = `huge-${crypto.randomUUID().slice(0, 6)}`;
    const ack = await say(id, "call:current_time {}");
    expect((await waitRun(ack.body.runId)).status).toBe("ok");
    const huge = `${"y".repeat(200_000)}`;
    const second = await say(id, huge);
    expect(second.status).toBe(202);
    expect((await waitRun(second.body.runId)).status).toBe("ok");

    const transcript = await history(group(id));
    const result = transcript.find((m) => m.role === "toolResult");
    expect(text(result!).length).toBeLessThan(MAX_MESSAGE_CHARS + 200);
    expect(text(result!)).toMatch(/more characters cut: a transcript message holds at most 64,000 …\]$/);
    const input = transcript.find((m) => m.role === "user" && text(m).startsWith("yyy"));
    expect(text(input!).length).toBeLessThan(MAX_MESSAGE_CHARS + 200);
    expect(text(input!)).toContain("136000 more characters cut");
  });
});
