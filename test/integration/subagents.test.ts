import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { type SubagentRun, subagentsTool } from "../../src/tools/subagents";
import {
  group,
  history,
  lastToolResult,
  SCRIPTED_MODEL_CONFIG,
  sayInGroup,
  scriptedGroup,
  scriptedWorld,
  spawningScript,
} from "./model-support";
import { httpToolContext } from "./rpc-support";
import { eventually, waitRun } from "./support";

const script = spawningScript;
const requester = (id: string) => scriptedGroup(id);

async function spawn(
  id: string,
  args: Record<string, unknown>,
): Promise<{ runId: string; childSessionKey: string }> {
  await sayInGroup(id, `spawn:${JSON.stringify(args)}`);
  return lastToolResult(await history(group(id)), "sessions_spawn");
}

const config = parseConfig(JSON.stringify(SCRIPTED_MODEL_CONFIG));
const ctx = (sessionKey: string) => httpToolContext(sessionKey, config);

describe("subagents", () => {
  it("lists this session's sub-agent runs with status and task, and cancels one", {
    timeout: 20_000,
  }, async () => {
    const world = scriptedWorld(
      script((req) => {
        if (req.system.includes("This is the announce step")) return { text: "reporting" };
        if (req.lastUser.startsWith("slow")) return { text: "late", delayMs: 30_000 };
        return { text: "done quickly" };
      }),
    );
    await requester("sa1");
    const quick = await spawn("sa1", { task: "quick job", model: "fake/m", label: "quick-sa1" });
    await eventually(async () =>
      world.delivered.some((d) => d.body.kind === "announce" && String(d.body.text).startsWith("Status: ok")),
    );
    const slow = await spawn("sa1", { task: `slow job ${"x".repeat(300)}`, model: "fake/m" });
    await eventually(async () => world.requests.some((r) => r.lastUser.startsWith("slow job")));

    const listed = (await subagentsTool.execute({ action: "list" }, ctx(group("sa1")))) as {
      runs: SubagentRun[];
    };
    expect(listed.runs.map((r) => r.runId)).toEqual([slow.runId, quick.runId]);
    expect(listed.runs[0]).toMatchObject({ childSessionKey: slow.childSessionKey, status: "running" });
    expect(listed.runs[0]?.task).toHaveLength(200);
    expect(listed.runs[1]).toMatchObject({
      childSessionKey: quick.childSessionKey,
      label: "quick-sa1",
      status: "ok",
      task: "quick job",
    });

    // Another session's sub-agent run is not found here.
    await requester("sa2");
    const other = await subagentsTool.execute({ action: "cancel", runId: slow.runId }, ctx(group("sa2")));
    expect(other).toEqual({
      status: "error",
      error: `sub-agent run not found: ${slow.runId} (not one this session spawned)`,
    });
    expect(await subagentsTool.execute({ action: "cancel" }, ctx(group("sa1")))).toMatchObject({
      status: "error",
    });

    const cancelled = await subagentsTool.execute({ action: "cancel", runId: slow.runId }, ctx(group("sa1")));
    expect(cancelled).toEqual({
      status: "cancelled",
      runId: slow.runId,
      childSessionKey: slow.childSessionKey,
    });
    expect(await waitRun(slow.runId)).toMatchObject({ status: "aborted" });
    const announce = await eventually(async () =>
      world.delivered.find(
        (d) => d.body.kind === "announce" && String(d.body.text).startsWith("Status: aborted"),
      ),
    );
    expect(announce.body.to).toBe("sa1");
    const after = (await subagentsTool.execute({ action: "list" }, ctx(group("sa1")))) as {
      runs: SubagentRun[];
    };
    expect(after.runs[0]).toMatchObject({
      runId: slow.runId,
      status: "aborted",
      endedAt: expect.any(Number),
    });
    expect(await subagentsTool.execute({ action: "cancel", runId: quick.runId }, ctx(group("sa1")))).toEqual({
      status: "ended",
      runId: quick.runId,
      runStatus: "ok",
    });
    world.restore();
  });
});
