import { createExecutionContext, createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { runScheduled } from "../../src/cron/scheduled";
import { actorSessions } from "../../src/session/client";
import { sessionsSpawnTool } from "../../src/tools/sessions-spawn";
import type { TranscriptMessage } from "../../src/transcript/message";
import {
  CONNECTORS,
  group,
  history,
  groupMessage as msg,
  SCRIPTED_MODEL_CONFIG,
  scriptedGroup,
  scriptedWorld,
  spawningScript,
} from "./model-support";
import { httpToolContext, withActorConfig } from "./rpc-support";
import { eventually, inbound, rpc, waitRun } from "./support";

const script = spawningScript;

async function requester(id: string, extra: Record<string, unknown> = {}) {
  await scriptedGroup(id, extra);
}

function toolResultOf(h: TranscriptMessage[], name: string) {
  const m = h.find((x) => x.role === "toolResult" && x.toolName === name);
  return JSON.parse((m!.content[0] as { text: string }).text) as Record<string, unknown>;
}

describe("sessions_spawn", () => {
  it("returns accepted in the same turn, runs the child, and announces Status/Result/Stats to the requester", async () => {
    const world = scriptedWorld(
      script((req) =>
        req.system.includes("This is the announce step")
          ? { text: "The answer is 42." }
          : { text: "computed 42" },
      ),
    );
    // The child session's actor runs with the global config: route its model too.
    await requester("s1");
    const ack = (await (
      await inbound(
        "telegram",
        msg("s1", `spawn:${JSON.stringify({ task: "compute the answer", label: "calc" })}`),
      )
    ).json()) as { runId: string };
    await waitRun(ack.runId);
    const accepted = toolResultOf(await history(group("s1")), "sessions_spawn");
    expect(accepted).toEqual({
      status: "accepted",
      runId: expect.any(String),
      childSessionKey: expect.any(String),
    });
    const childKey = accepted.childSessionKey as string;
    expect(childKey).toMatch(/^agent:main:subagent:[0-9a-f-]{36}$/);
    await withActorConfig(childKey, { ...SCRIPTED_MODEL_CONFIG, connectors: CONNECTORS });
    // If the child ran before the patch it used echo; either way an announcement arrives.
    const announce = await eventually(
      async () => world.delivered.find((d) => d.body.kind === "announce" && d.body.to === "s1"),
      10_000,
    );
    const lines = String(announce.body.text).split("\n");
    expect(lines[0]).toBe("Status: ok");
    expect(lines[1]).toMatch(/^Result: /);
    const stats = lines.find((l) => l.startsWith("Stats: "));
    expect(stats).toMatch(
      /^Stats: runtime \d+s • tokens [\d.]+k? \(in [\d.]+k? \/ out [\d.]+k?\) • est \$[\d.]+ • sessionKey agent:main:subagent:/,
    );
    expect(stats).toContain(`sessionKey ${childKey}`);
    expect(stats).toMatch(/sessionId [0-9a-f-]{36} • transcript \/v1\/transcripts\/[0-9a-f-]{36}\.jsonl$/);

    const entry = await rpc<{ sessions: Array<{ key: string; spawnedBy?: string; label?: string }> }>(
      "sessions.list",
      {},
    );
    expect(entry.payload.sessions.find((s) => s.key === childKey)).toMatchObject({
      spawnedBy: group("s1"),
      label: "calc",
    });
    // The requester's transcript holds the announcement with subagent_announce provenance.
    const recorded = (await history(group("s1"))).find((m) => m.provenance?.kind === "subagent_announce");
    expect(recorded?.provenance).toEqual({
      kind: "subagent_announce",
      sourceSessionKey: childKey,
      sourceTool: "sessions_spawn",
    });
    expect((recorded!.content[0] as { text: string }).text).toBe(announce.body.text);
    world.restore();
  });

  it("reports Status: error with the cause in Notes when the child's model fails", async () => {
    const world = scriptedWorld(script(() => ({ status: 429, error: "Rate limit reached" })));
    await requester("s2");
    // All sub-agent runs use the scripted model through the global config route below.
    const ack = (await (
      await inbound(
        "telegram",
        msg("s2", `spawn:${JSON.stringify({ task: "fail please", model: "fake/m" })}`),
      )
    ).json()) as { runId: string };
    await waitRun(ack.runId);
    const announce = await eventually(
      async () => world.delivered.find((d) => d.body.kind === "announce" && d.body.to === "s2"),
      10_000,
    );
    const text = String(announce.body.text);
    expect(text.split("\n")[0]).toBe("Status: error");
    expect(text).toMatch(/Notes: provider error 429.*Rate limit reached/);
    world.restore();
  });

  it("reports the latest tool result when the child's final reply is empty", async () => {
    const world = scriptedWorld(
      script((req) => {
        if (req.system.includes("This is the announce step")) return { text: "" };
        if (req.lastRole === "tool") return { text: "" };
        return { tool: "current_time", args: {} };
      }),
    );
    await requester("s3");
    const ack = (await (
      await inbound(
        "telegram",
        msg("s3", `spawn:${JSON.stringify({ task: "what time is it", model: "fake/m" })}`),
      )
    ).json()) as { runId: string };
    await waitRun(ack.runId);
    const announce = await eventually(
      async () => world.delivered.find((d) => d.body.kind === "announce" && d.body.to === "s3"),
      10_000,
    );
    expect(String(announce.body.text)).toMatch(/^Status: ok\nResult: \{"iso":"/);
    world.restore();
  });
});

describe("sub-agent lifecycle", () => {
  it("deletes the child entry and transcript once the announcement is recorded with cleanup: delete", async () => {
    const world = scriptedWorld(script(() => ({ text: "done and gone" })));
    await requester("s5");
    const ack = (await (
      await inbound(
        "telegram",
        msg("s5", `spawn:${JSON.stringify({ task: "brief job", model: "fake/m", cleanup: "delete" })}`),
      )
    ).json()) as { runId: string };
    await waitRun(ack.runId);
    const { childSessionKey } = toolResultOf(await history(group("s5")), "sessions_spawn") as {
      childSessionKey: string;
    };
    await eventually(
      async () => world.delivered.find((d) => d.body.kind === "announce" && d.body.to === "s5"),
      10_000,
    );
    await eventually(async () => {
      const r = await rpc("sessions.resolve", { key: childSessionKey });
      return r.status === 404;
    });
    world.restore();
  });

  it("archives idle sub-agent sessions after archiveAfterMinutes, from the cron sweep", async () => {
    const world = scriptedWorld(script(() => ({ text: "kept" })));
    await requester("s6");
    const ack = (await (
      await inbound("telegram", msg("s6", `spawn:${JSON.stringify({ task: "keep me", model: "fake/m" })}`))
    ).json()) as { runId: string };
    await waitRun(ack.runId);
    const { childSessionKey } = toolResultOf(await history(group("s6")), "sessions_spawn") as {
      childSessionKey: string;
    };
    await eventually(
      async () => world.delivered.find((d) => d.body.kind === "announce" && d.body.to === "s6"),
      10_000,
    );
    const listed = async (archived: boolean | "all") =>
      (
        await rpc<{ sessions: Array<{ key: string; archivedAt?: number }> }>("sessions.list", {
          archived,
          limit: 200,
        })
      ).payload.sessions.find((x) => x.key === childSessionKey);
    await eventually(async () => (await listed(false)) !== undefined);
    // Not yet due: a sweep now (archiveAfterMinutes 60) leaves it alone.
    await runScheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
    expect(await listed(false)).toBeDefined();
    // Two hours later it is archived: hidden from the default list, shown with archived: true.
    const later = Date.now() + 2 * 3_600_000;
    await runScheduled(createScheduledController({ scheduledTime: later, cron: "* * * * *" }), env);
    expect(await listed(false)).toBeUndefined();
    expect((await listed(true))?.archivedAt).toBe(later);
    world.restore();
  });

  it("refuses a spawn over agents.defaults.subagents.maxConcurrent", async () => {
    const cfg = parseConfig(
      JSON.stringify({
        ...SCRIPTED_MODEL_CONFIG,
        agents: { defaults: { model: "fake/m", subagents: { maxConcurrent: 1 } } },
      }),
    );
    const caller = { sessionKey: "agent:main:telegram:group:s7", agentId: "main", trigger: "http" as const };
    const world = scriptedWorld(() => ({ text: "slow", delayMs: 5_000 }));
    const first = (await sessionsSpawnTool.execute(
      { task: "one", model: "fake/m" },
      { caller, sessions: actorSessions(env), toolCallId: crypto.randomUUID(), config: cfg, env },
    )) as { status: string };
    expect(first.status).toBe("accepted");
    await eventually(async () => world.requests.some((r) => r.lastUser === "one"));
    const second = await sessionsSpawnTool.execute(
      { task: "two", model: "fake/m" },
      { caller, sessions: actorSessions(env), toolCallId: crypto.randomUUID(), config: cfg, env },
    );
    expect(second).toEqual({
      status: "error",
      error:
        "1 sub-agents of this session are still running (agents.defaults.subagents.maxConcurrent is 1); wait for an announcement first",
    });
    world.restore();
  });
});

describe("/stop", () => {
  it("aborts the session's sub-agent runs and says how many were stopped", { timeout: 15_000 }, async () => {
    const world = scriptedWorld(
      script((req) =>
        req.system.includes("This is the announce step")
          ? { text: "stopped early" }
          : { text: "late", delayMs: 30_000 },
      ),
    );
    await requester("s4");
    const ack = (await (
      await inbound("telegram", msg("s4", `spawn:${JSON.stringify({ task: "a long job", model: "fake/m" })}`))
    ).json()) as { runId: string };
    await waitRun(ack.runId);
    const spawned = toolResultOf(await history(group("s4")), "sessions_spawn");
    await eventually(async () => world.requests.some((r) => r.lastUser === "a long job"));

    const stop = await inbound("telegram", msg("s4", "/stop"));
    expect(await stop.json()).toMatchObject({ ok: true, status: "command" });
    const notice = await eventually(async () =>
      world.delivered.find((d) => d.body.kind === "notice" && d.body.to === "s4"),
    );
    expect(notice.body.text).toBe("Stopped 0 runs in this session and 1 sub-agent run.");
    // The child's task run ended aborted.
    expect(await waitRun(spawned.runId as string)).toMatchObject({ status: "aborted", runStatus: "aborted" });
    const announce = await eventually(
      async () => world.delivered.find((d) => d.body.kind === "announce" && d.body.to === "s4"),
      10_000,
    );
    expect(String(announce.body.text).split("\n")[0]).toBe("Status: aborted");
    world.restore();
  });
});

describe("sessions_spawn refusals", () => {
  const config = parseConfig(
    JSON.stringify({
      agents: {
        list: [
          { id: "main", default: true, subagents: { allowAgents: ["research"] } },
          { id: "research" },
          { id: "ops" },
        ],
      },
    }),
  );
  const ctx = (sessionKey: string) => httpToolContext(sessionKey, config);

  void createExecutionContext;

  it("forbids spawning from a sub-agent session", async () => {
    const result = await sessionsSpawnTool.execute({ task: "x" }, ctx("agent:main:subagent:0000"));
    expect(result).toEqual({
      status: "forbidden",
      error: expect.stringContaining("sub-agent sessions may not call sessions_spawn"),
    });
  });

  it("forbids an agent that allowAgents does not list, naming the allowed ids", async () => {
    const result = await sessionsSpawnTool.execute({ task: "x", agentId: "ops" }, ctx("agent:main:main"));
    expect(result).toEqual({
      status: "forbidden",
      error: 'agent "ops" is not allowed by agents.list[main].subagents.allowAgents; allowed: main, research',
    });
  });

  it("refuses an invalid model and creates nothing", async () => {
    const before = await rpc<{ count: number }>("sessions.list", { archived: "all", limit: 200 });
    const result = await sessionsSpawnTool.execute({ task: "x", model: "nope/none" }, ctx("agent:main:main"));
    expect(result).toEqual({ status: "error", error: expect.stringContaining('unknown model "nope/none"') });
    const after = await rpc<{ count: number }>("sessions.list", { archived: "all", limit: 200 });
    expect(after.payload.count).toBe(before.payload.count);
  });

  it("allows its own agent and an allowed one", async () => {
    for (const agentId of ["main", "research"]) {
      const result = (await sessionsSpawnTool.execute({ task: "noop", agentId }, ctx("agent:main:main"))) as {
        status: string;
        childSessionKey: string;
      };
      expect(result.status).toBe("accepted");
      expect(result.childSessionKey.startsWith(`agent:${agentId}:subagent:`)).toBe(true);
    }
  });
});
