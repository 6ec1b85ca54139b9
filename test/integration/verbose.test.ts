/**
 * `verboseLevel` (SPEC §3): tool activity summarized to the chat as notices while a run goes
 * on — nothing when off, the tool's name when on, its arguments and result when full — always
 * before the run's reply, and never for runs whose reply is not posted.
 */
import { afterEach, describe, expect, it } from "vitest";
import { CONNECTORS, group, groupMessage, SCRIPTED_MODEL_CONFIG, scriptedWorld } from "./model-support";
import { withActorConfig } from "./rpc-support";
import { inbound, rpc, waitRun } from "./support";

let restore: (() => void) | undefined;
afterEach(() => restore?.());

async function runWithLevel(level: "off" | "on" | "full" | null) {
  const world = scriptedWorld((r) =>
    r.lastRole === "tool" ? { text: "it is late" } : { tool: "current_time", args: {} },
  );
  restore = world.restore;
  const id = `verbose-${level}-${crypto.randomUUID().slice(0, 6)}`;
  await withActorConfig(group(id), { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS });
  const first = await inbound("telegram", groupMessage(id, "hello"));
  await waitRun(((await first.json()) as { runId: string }).runId);
  const patched = await rpc("sessions.patch", { key: group(id), verboseLevel: level });
  expect(patched.status).toBe(200);
  const before = world.delivered.length;
  const res = await inbound("telegram", groupMessage(id, "what time is it?"));
  expect((await waitRun(((await res.json()) as { runId: string }).runId)).status).toBe("ok");
  return world.delivered.slice(before).map((d) => ({ kind: d.body.kind, text: String(d.body.text) }));
}

describe("verboseLevel", () => {
  it("off (and unset): only the reply", async () => {
    expect(await runWithLevel("off")).toEqual([{ kind: "reply", text: "it is late" }]);
    expect(await runWithLevel(null)).toEqual([{ kind: "reply", text: "it is late" }]);
  });

  it("on: the tool's name as a notice, before the reply", async () => {
    expect(await runWithLevel("on")).toEqual([
      { kind: "notice", text: "🔧 current_time" },
      { kind: "reply", text: "it is late" },
    ]);
  });

  it("full: the tool's arguments and the start of its result", async () => {
    const posted = await runWithLevel("full");
    expect(posted).toHaveLength(2);
    expect(posted[0]?.kind).toBe("notice");
    expect(posted[0]?.text).toMatch(/^🔧 current_time\(\{\}\) → \{"iso":/);
    expect(posted[1]).toEqual({ kind: "reply", text: "it is late" });
  });
});
