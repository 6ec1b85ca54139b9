import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { databaseOfKey } from "../../src/db/placement";
import { database } from "../../src/db/queries";
import * as schema from "../../src/db/schema";
import { type RpcAnswer, seedSessions, sessionRow } from "./rpc-support";
import { rpc } from "./support";

function expectError<T>(res: RpcAnswer<T>, status: number, code: string, message: RegExp) {
  expect({ status: res.status, code: res.error?.code }).toEqual({ status, code });
  expect(res.error?.message).toMatch(message);
}

describe("runs.list", () => {
  const base = 1_500_000_000_000;
  const keyA = "agent:main:telegram:group:rl-a";
  const keyB = "agent:main:telegram:group:rl-b";
  const run = (id: string, sessionKey: string, status: string, createdAt: number) => ({
    runId: id,
    sessionKey,
    sessionId: `sid-${sessionKey}`,
    trigger: "inbound",
    status,
    createdAt,
    ...(status === "queued" ? {} : { startedAt: createdAt + 1 }),
    ...(status === "ok" || status === "error" ? { endedAt: createdAt + 250 } : {}),
    ...(status === "error" ? { error: "provider said no" } : {}),
  });
  const rows = [
    run("rl-a-1", keyA, "ok", base + 1),
    run("rl-a-2", keyA, "error", base + 2),
    run("rl-a-3", keyA, "ok", base + 3),
    run("rl-a-4", keyA, "queued", base + 3),
    run("rl-b-1", keyB, "running", base + 4),
    run("rl-b-2", keyB, "ok", base + 5),
  ];
  type Payload = { runs: Array<Record<string, unknown>>; nextCursor?: string };

  it("lists a session's runs newest first (ties by runId), without null fields", async () => {
    for (const row of rows)
      await database(databaseOfKey(env, row.sessionKey)).insert(schema.runs).values(row).run();
    const res = await rpc<Payload>("runs.list", { sessionKey: keyA });
    expect(res.status).toBe(200);
    expect(res.payload.runs.map((r) => r.runId)).toEqual(["rl-a-4", "rl-a-3", "rl-a-2", "rl-a-1"]);
    expect(res.payload.runs[2]).toEqual({ ...rows[1], deliver: false });
    expect(res.payload.nextCursor).toBeUndefined();
  });

  it("filters by status, alone and with a session", async () => {
    const errors = await rpc<Payload>("runs.list", { status: "error" });
    expect(errors.payload.runs.map((r) => r.runId)).toContain("rl-a-2");
    expect(errors.payload.runs.every((r) => r.status === "error")).toBe(true);
    const both = await rpc<Payload>("runs.list", { status: "ok", sessionKey: keyB });
    expect(both.payload.runs.map((r) => r.runId)).toEqual(["rl-b-2"]);
  });

  it("pages with cursor without duplicates or gaps", async () => {
    const ids: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < 10; i++) {
      const page = await rpc<Payload>("runs.list", {
        sessionKey: keyA,
        limit: 1,
        ...(cursor ? { cursor } : {}),
      });
      ids.push(...page.payload.runs.map((r) => String(r.runId)));
      cursor = page.payload.nextCursor;
      if (!cursor) break;
    }
    expect(ids).toEqual(["rl-a-4", "rl-a-3", "rl-a-2", "rl-a-1"]);
  });

  it("refuses an unknown status, a foreign cursor and unknown params with 400", async () => {
    expectError(await rpc("runs.list", { status: "lost" }), 400, "INVALID_REQUEST", /`status`/);
    expectError(await rpc("runs.list", { cursor: "nope" }), 400, "INVALID_REQUEST", /`cursor`/);
    expectError(await rpc("runs.list", { session: keyA }), 400, "INVALID_REQUEST", /`session`/);
  });
});

describe("sessions.get", () => {
  it("returns the full entry with its derived fields", async () => {
    const [row] = await seedSessions([
      sessionRow({ key: "agent:main:get-me", agentId: "main", label: "get-me", compactionCount: 2 }),
    ]);
    const res = await rpc<Record<string, unknown>>("sessions.get", { key: "agent:main:get-me" });
    expect(res.status).toBe(200);
    expect(res.payload).toMatchObject({
      key: "agent:main:get-me",
      sessionId: row?.sessionId,
      label: "get-me",
      compactionCount: 2,
      runStatus: "idle",
      expired: false,
      transcriptPath: `/v1/transcripts/${row?.sessionId}.jsonl`,
    });
  });

  it("answers 404 for an unknown key", async () => {
    expectError(await rpc("sessions.get", { key: "agent:main:nobody" }), 404, "NOT_FOUND", /nobody/);
  });
});

describe("sessions.list channel", () => {
  const t = Date.now() - 900_000;
  const rows = [
    sessionRow({ key: "agent:ch:telegram:dm:a", agentId: "ch", lastChannel: "telegram", updatedAt: t + 5 }),
    sessionRow({
      key: "agent:ch:slack:group:g",
      agentId: "ch",
      kind: "group",
      channel: "slack",
      updatedAt: t + 4,
    }),
    sessionRow({ key: "cron:ch-job", agentId: "ch", kind: "cron", updatedAt: t + 3 }),
    sessionRow({ key: "hook:ch-1", agentId: "ch", kind: "hook", updatedAt: t + 2 }),
    sessionRow({ key: "agent:ch:slack:dm:b", agentId: "ch", lastChannel: "slack", updatedAt: t + 1 }),
  ];
  const keys = async (params: Record<string, unknown>) =>
    (
      await rpc<{ sessions: Array<{ key: string; channel: string }> }>("sessions.list", {
        agentId: "ch",
        ...params,
      })
    ).payload.sessions;

  it("keeps the sessions whose listing channel is the one asked for", async () => {
    await seedSessions(rows);
    const slack = await keys({ channel: "slack" });
    expect(slack.map((s) => s.key)).toEqual(["agent:ch:slack:group:g", "agent:ch:slack:dm:b"]);
    expect(slack.every((s) => s.channel === "slack")).toBe(true);
    expect((await keys({ channel: "telegram" })).map((s) => s.key)).toEqual(["agent:ch:telegram:dm:a"]);
  });

  it("internal is the cron, hook and node sessions, intersected with kinds", async () => {
    expect((await keys({ channel: "internal" })).map((s) => s.key)).toEqual(["cron:ch-job", "hook:ch-1"]);
    expect((await keys({ channel: "internal", kinds: ["hook", "main"] })).map((s) => s.key)).toEqual([
      "hook:ch-1",
    ]);
    expect(await keys({ channel: "internal", kinds: ["main"] })).toEqual([]);
  });
});
