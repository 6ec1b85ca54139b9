/**
 * `subagents` (SPEC §20): the sub-agent runs a session spawned, newest first with their live
 * status and task, and `cancel`, which aborts one (its announcement then says Status: aborted);
 * a run the session did not spawn is not found.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { actorSessions } from "../../src/session/client";
import { type SubagentRun, subagentsTool } from "../../src/tools/subagents";
import type { ToolContext } from "../../src/tools/types";
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
import { withActorConfig } from "./rpc-support";
import { eventually, inbound, waitRun } from "./support";

function script(child: (req: ModelRequest) => ModelAnswer) {
  return (req: ModelRequest): ModelAnswer => {
    if (req.system.includes("## Sub-agent")) return child(req);
    if (req.lastRole === "tool") return { text: `spawned: ${req.lastTool}` };
    if (req.lastUser.startsWith("spawn:"))
      return { tool: "sessions_spawn", args: JSON.parse(req.lastUser.slice(6)) };
    return { text: `answer to ${req.lastUser}` };
  };
}

async function requester(id: string) {
  const ack = (await (await inbound("telegram", msg(id, "hello"))).json()) as { runId: string };
  await waitRun(ack.runId);
  await withActorConfig(group(id), { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS });
}

async function spawn(
  id: string,
  args: Record<string, unknown>,
): Promise<{ runId: string; childSessionKey: string }> {
  const ack = (await (await inbound("telegram", msg(id, `spawn:${JSON.stringify(args)}`))).json()) as {
    runId: string;
  };
  await waitRun(ack.runId);
  const results = (await history(group(id))).filter(
    (m: TranscriptMessage) => m.role === "toolResult" && m.toolName === "sessions_spawn",
  );
  const last = results[results.length - 1];
  if (!last) throw new Error(`no sessions_spawn result in ${group(id)}`);
  return JSON.parse((last.content[0] as { text: string }).text);
}

const config = parseConfig(JSON.stringify(SCRIPTED_MODEL_CONFIG));
const ctx = (sessionKey: string): ToolContext => ({
  caller: { sessionKey, agentId: "main", trigger: "http" },
  sessions: actorSessions(env),
  toolCallId: crypto.randomUUID(),
  config,
  env,
});

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
