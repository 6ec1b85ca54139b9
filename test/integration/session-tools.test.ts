import { env } from "cloudflare:workers";
import { asSchema, tool } from "ai";
import { describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/schema";
import { databaseOfKey } from "../../src/db/placement";
import type { SessionRow } from "../../src/db/queries";
import { findTool } from "../../src/tools/registry";
import {
  familyKeys,
  hangingModel,
  invokeTools,
  SLOW_MODEL_CONFIG,
  seedMessages,
  seedSessions,
  sessionRow,
  type ToolAnswer,
  transcriptMessages,
  withActorConfig,
} from "./rpc-support";
import { eventually, rpc, waitRun, wrapDatabases } from "./support";

type Answer<T> = ToolAnswer<T>;

interface Row {
  key: string;
  kind: string;
  channel: string;
  agentId: string;
  sessionId: string;
  updatedAt: number;
  label?: string;
  spawnedBy?: string;
  messages?: Array<{ id: string; role: string; content: Array<{ type: string; text?: string }> }>;
  [field: string]: unknown;
}
interface ListResult {
  count: number;
  sessions: Row[];
  nextCursor?: string;
}
interface HistoryResult {
  sessionKey: string;
  sessionId: string;
  messages: Array<{ id: string; seq: number; role: string; content: Array<{ type: string; text?: string }> }>;
  hasMore: boolean;
  nextBefore?: number;
  truncated: boolean;
  droppedMessages: number;
  contentTruncated: boolean;
  contentRedacted: boolean;
  bytes: number;
}

const invoke = invokeTools;

let counter = 0;
/** A fresh agent id, so tests sharing this file's storage never see each other's sessions by agent. */
function agentId(prefix = "a"): string {
  counter++;
  return `${prefix}${counter}-${Date.now().toString(36)}`;
}

const T0 = Date.now() - 3_600_000;

function seed(fields: Partial<SessionRow> & { key: string; agentId: string }) {
  return sessionRow({ updatedAt: T0, ...fields });
}

/**
 * Agent `a` with its main session, a child it spawned, a group session and that group's child;
 * agent `b` with its main session and a child spawned by a's main; agent `c` with its main.
 */
async function family() {
  const a = agentId("a");
  const b = agentId("b");
  const c = agentId("c");
  const k = familyKeys(a, b, c);
  await seedSessions([
    seed({ key: k.aMain, agentId: a, kind: "main", updatedAt: T0 + 1 }),
    seed({ key: k.aChild, agentId: a, spawnedBy: k.aMain, updatedAt: T0 + 7 }),
    seed({
      key: k.aGroup,
      agentId: a,
      kind: "group",
      chatType: "group",
      channel: "telegram",
      updatedAt: T0 + 3,
    }),
    seed({ key: k.aGroupChild, agentId: a, spawnedBy: k.aGroup, updatedAt: T0 + 4 }),
    seed({ key: k.bMain, agentId: b, kind: "main", updatedAt: T0 + 5 }),
    seed({ key: k.bChildOfA, agentId: b, spawnedBy: k.aMain, updatedAt: T0 + 6 }),
    seed({ key: k.cMain, agentId: c, kind: "main", updatedAt: T0 + 2 }),
  ]);
  const agents = (extra: Record<string, unknown> = {}) => ({
    list: [{ id: a, ...extra }, { id: b }, { id: c }],
  });
  return { a, b, c, k, all: Object.values(k), agents };
}

/** Every key sessions_list returns (following cursors), keeping only `among` when given. */
async function listKeys(
  config: ConfigInput,
  caller: { sessionKey?: string; agentId: string },
  args: Record<string, unknown> = {},
  among?: string[],
) {
  const keys: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const res = await invoke<ListResult>(config, {
      tool: "sessions_list",
      ...caller,
      args: { ...args, limit: 200, ...(cursor ? { cursor } : {}) },
    });
    expect(res.status).toBe(200);
    keys.push(...res.result.sessions.map((s) => s.key));
    cursor = res.result.nextCursor;
    if (!cursor) return among ? keys.filter((key) => among.includes(key) || key === "main") : keys;
  }
  throw new Error("sessions_list did not end");
}

function expectNotFound<T>(res: Answer<T>, given: string) {
  expect(res.status).toBe(400);
  expect(res.ok).toBe(false);
  expect(res.error).toEqual({ type: "tool_error", message: `session not found: ${given}` });
}

// ---------------------------------------------------------------------------------------------

describe("session visibility (tools.sessions.visibility)", () => {
  it("tree (the default): the caller and the sessions it spawned, of any agent, newest first", async () => {
    const f = await family();
    const config = { agents: f.agents() };
    expect(await listKeys(config, { agentId: f.a })).toEqual([f.k.aChild, f.k.bChildOfA, "main"]);
    // Its child under another agent is readable too, though agentToAgent is off.
    const child = await invoke<HistoryResult>(config, {
      tool: "sessions_history",
      agentId: f.a,
      args: { sessionKey: f.k.bChildOfA },
    });
    expect(child.status).toBe(200);
    expect(child.result.sessionKey).toBe(f.k.bChildOfA);
    // From the group session: itself and its own child; a's main is not in its tree.
    expect(await listKeys(config, { agentId: f.a, sessionKey: f.k.aGroup })).toEqual([
      f.k.aGroupChild,
      f.k.aGroup,
    ]);
  });

  it("self: only the caller's own key", async () => {
    const f = await family();
    const config = { agents: f.agents(), tools: { sessions: { visibility: "self" as const } } };
    expect(await listKeys(config, { agentId: f.a })).toEqual(["main"]);
    expectNotFound(
      await invoke(config, { tool: "sessions_history", agentId: f.a, args: { sessionKey: f.k.aChild } }),
      f.k.aChild,
    );
  });

  it("agent: every session of the caller's agent, plus its own children of other agents", async () => {
    const f = await family();
    const config = { agents: f.agents(), tools: { sessions: { visibility: "agent" as const } } };
    expect(await listKeys(config, { agentId: f.a })).toEqual([
      f.k.aChild,
      f.k.bChildOfA,
      f.k.aGroupChild,
      f.k.aGroup,
      "main",
    ]);
  });

  it("all without tools.agentToAgent.enabled: other agents' sessions stay hidden (as missing)", async () => {
    const f = await family();
    const config = { agents: f.agents(), tools: { sessions: { visibility: "all" as const } } };
    expect(await listKeys(config, { agentId: f.a }, {}, f.all)).toEqual([
      f.k.aChild,
      f.k.bChildOfA,
      f.k.aGroupChild,
      f.k.aGroup,
      "main",
    ]);
    expectNotFound(
      await invoke(config, { tool: "sessions_history", agentId: f.a, args: { sessionKey: f.k.bMain } }),
      f.k.bMain,
    );
  });

  it("all with agentToAgent enabled and an empty allow list: every session", async () => {
    const f = await family();
    const config = {
      agents: f.agents(),
      tools: { sessions: { visibility: "all" as const }, agentToAgent: { enabled: true } },
    };
    expect(await listKeys(config, { agentId: f.a }, {}, f.all)).toEqual([
      f.k.aChild,
      f.k.bChildOfA,
      f.k.bMain,
      f.k.aGroupChild,
      f.k.aGroup,
      f.k.cMain,
      "main",
    ]);
    const history = await invoke<HistoryResult>(config, {
      tool: "sessions_history",
      agentId: f.a,
      args: { sessionKey: f.k.cMain },
    });
    expect(history.status).toBe(200);
    expect(history.result.sessionKey).toBe(f.k.cMain);
  });

  it("all with allow patterns: only agents the patterns match along with the caller's", async () => {
    const f = await family();
    const config = {
      agents: f.agents(),
      tools: {
        sessions: { visibility: "all" as const },
        agentToAgent: { enabled: true, allow: [f.a, `${f.b.slice(0, 2)}*`] },
      },
    };
    expect(await listKeys(config, { agentId: f.a }, {}, f.all)).toEqual([
      f.k.aChild,
      f.k.bChildOfA,
      f.k.bMain,
      f.k.aGroupChild,
      f.k.aGroup,
      "main",
    ]);
    expectNotFound(
      await invoke(config, { tool: "session_status", agentId: f.a, args: { sessionKey: f.k.cMain } }),
      f.k.cMain,
    );
    // c is not matched by the patterns, so from c nothing of a or b is visible.
    expect(await listKeys(config, { agentId: f.c }, {}, f.all)).toEqual(["main"]);
  });

  it("a sandboxed agent under sessionToolsVisibility spawned sees only its tree, whatever visibility says", async () => {
    const f = await family();
    const config = {
      agents: f.agents({ sandbox: { mode: "all" } }),
      tools: { sessions: { visibility: "all" as const }, agentToAgent: { enabled: true } },
    };
    expect(await listKeys(config, { agentId: f.a }, {}, f.all)).toEqual([f.k.aChild, f.k.bChildOfA, "main"]);
    expectNotFound(
      await invoke(config, { tool: "sessions_history", agentId: f.a, args: { sessionKey: f.k.aGroup } }),
      f.k.aGroup,
    );
  });

  it("a sandboxed agent under sessionToolsVisibility all keeps tools.sessions.visibility", async () => {
    const f = await family();
    const config = {
      agents: {
        defaults: { sandbox: { sessionToolsVisibility: "all" as const } },
        ...f.agents({ sandbox: { mode: "all" } }),
      },
      tools: { sessions: { visibility: "all" as const }, agentToAgent: { enabled: true } },
    };
    expect(await listKeys(config, { agentId: f.a }, {}, f.all)).toHaveLength(7);
  });

  it("sandbox mode non-main clamps every session of the agent but its main", async () => {
    const f = await family();
    const config = {
      agents: f.agents({ sandbox: { mode: "non-main" } }),
      tools: { sessions: { visibility: "agent" as const } },
    };
    expect(await listKeys(config, { agentId: f.a })).toHaveLength(5);
    expect(await listKeys(config, { agentId: f.a, sessionKey: f.k.aGroup })).toEqual([
      f.k.aGroupChild,
      f.k.aGroup,
    ]);
  });

  it("answers a hidden session exactly like a missing one, by key and by sessionId", async () => {
    const f = await family();
    const config = { agents: f.agents() };
    const missingKey = `agent:${f.a}:telegram:group:nope`;
    const hiddenKey = f.k.aGroup;
    const hidden = await invoke(config, {
      tool: "sessions_history",
      agentId: f.a,
      args: { sessionKey: hiddenKey },
    });
    const missing = await invoke(config, {
      tool: "sessions_history",
      agentId: f.a,
      args: { sessionKey: missingKey },
    });
    expectNotFound(hidden, hiddenKey);
    expectNotFound(missing, missingKey);
    expect(hidden.error?.message.replace(hiddenKey, "<key>")).toBe(
      missing.error?.message.replace(missingKey, "<key>"),
    );

    const row = (await rpc<{ sessionId: string }>("sessions.resolve", { key: hiddenKey })).payload;
    const unknownId = crypto.randomUUID();
    for (const toolName of ["sessions_history", "session_status"]) {
      expectNotFound(
        await invoke(config, { tool: toolName, agentId: f.a, args: { sessionKey: row.sessionId } }),
        row.sessionId,
      );
      expectNotFound(
        await invoke(config, { tool: toolName, agentId: f.a, args: { sessionKey: unknownId } }),
        unknownId,
      );
    }
  });
});

describe("session key arguments", () => {
  it("accept the caller's main as `main` in any case, and show it as `main` both ways", async () => {
    const a = agentId();
    const main = `agent:${a}:main`;
    const [row] = await seedSessions([seed({ key: main, agentId: a, kind: "main" })]);
    const config = { agents: { list: [{ id: a }] } };
    for (const given of ["main", "MAIN", " Main ", main, main.toUpperCase()]) {
      const res = await invoke<HistoryResult>(config, {
        tool: "sessions_history",
        agentId: a,
        args: { sessionKey: given },
      });
      expect(res.status).toBe(200);
      expect(res.result).toMatchObject({ sessionKey: "main", sessionId: row?.sessionId });
    }
  });

  it("show another agent's main with its full key", async () => {
    const f = await family();
    const config = {
      agents: f.agents(),
      tools: { sessions: { visibility: "all" as const }, agentToAgent: { enabled: true } },
    };
    const res = await invoke<HistoryResult>(config, {
      tool: "sessions_history",
      agentId: f.b,
      args: { sessionKey: f.k.aMain },
    });
    expect(res.result.sessionKey).toBe(f.k.aMain);
    const rows = await invoke<ListResult>(config, {
      tool: "sessions_list",
      agentId: f.b,
      args: { agentId: f.a },
    });
    expect(rows.result.sessions.map((s) => s.key)).toContain(f.k.aMain);
    expect(rows.result.sessions.map((s) => s.key)).not.toContain("main");
    // b's own child of a is shown with a's main as its spawner, in full.
    const child = (
      await invoke<ListResult>(config, { tool: "sessions_list", agentId: f.b, args: { agentId: f.b } })
    ).result.sessions.find((s) => s.key === f.k.bChildOfA);
    expect(child?.spawnedBy).toBe(f.k.aMain);
  });

  it("show the spawner of the caller's children as `main`", async () => {
    const f = await family();
    const res = await invoke<ListResult>({ agents: f.agents() }, { tool: "sessions_list", agentId: f.a });
    expect(res.result.sessions.find((s) => s.key === f.k.aChild)?.spawnedBy).toBe("main");
  });

  it("accept a sessionId from sessions_list", async () => {
    const f = await family();
    const config = { agents: f.agents() };
    const listed = await invoke<ListResult>(config, { tool: "sessions_list", agentId: f.a });
    const child = listed.result.sessions.find((s) => s.key === f.k.aChild);
    expect(child).toBeDefined();
    const res = await invoke<HistoryResult>(config, {
      tool: "sessions_history",
      agentId: f.a,
      args: { sessionKey: child?.sessionId.toUpperCase() },
    });
    expect(res.status).toBe(200);
    expect(res.result).toMatchObject({ sessionKey: f.k.aChild, sessionId: child?.sessionId });
  });

  it("under scope global: `main` and `global` both mean the shared key, listed and shown as `main`", async () => {
    const a = agentId();
    const [row] = await seedSessions([seed({ key: "global", agentId: a, kind: "main", updatedAt: T0 + 10 })]);
    await seedSessions([
      seed({ key: `agent:${a}:subagent:g1`, agentId: a, spawnedBy: "global", updatedAt: T0 + 11 }),
    ]);
    const config = { session: { scope: "global" as const }, agents: { list: [{ id: a }] } };
    for (const given of ["main", "global", "GLOBAL"]) {
      const res = await invoke<HistoryResult>(config, {
        tool: "sessions_history",
        agentId: a,
        args: { sessionKey: given },
      });
      expect(res.result).toMatchObject({ sessionKey: "main", sessionId: row?.sessionId });
    }
    const listed = await invoke<ListResult>(config, { tool: "sessions_list", agentId: a });
    expect(listed.result.sessions.map((s) => [s.key, s.spawnedBy])).toEqual([
      [`agent:${a}:subagent:g1`, "main"],
      ["main", null],
    ]);
    // The operator API keeps showing the stored key.
    const rpcListed = await rpc<{ sessions: Array<{ key: string }> }>("sessions.list", {
      agentId: a,
      includeGlobal: true,
    });
    expect(rpcListed.payload.sessions.map((s) => s.key)).toContain("global");
  });

  it("never list the reserved keys global and unknown", async () => {
    const a = agentId();
    await seedSessions([
      seed({ key: `agent:${a}:main`, agentId: a, kind: "main" }),
      seed({ key: "global", agentId: a, kind: "main", updatedAt: T0 + 20 }),
      seed({ key: "unknown", agentId: a, updatedAt: T0 + 21 }),
    ]);
    const config = { agents: { list: [{ id: a }] }, tools: { sessions: { visibility: "agent" as const } } };
    expect(await listKeys(config, { agentId: a })).toEqual(["main"]);
    expectNotFound(
      await invoke(config, { tool: "sessions_history", agentId: a, args: { sessionKey: "unknown" } }),
      "unknown",
    );
  });

  it("refuse a malformed key with an error saying what to pass", async () => {
    const a = agentId();
    const res = await invoke({}, { tool: "sessions_history", agentId: a, args: { sessionKey: "agent::x" } });
    expect(res.status).toBe(400);
    expect(res.error?.type).toBe("tool_error");
    expect(res.error?.message).toMatch(
      /empty segment.*pass a key from sessions_list, `main`, or a sessionId$/,
    );
  });
});

describe("sessions_list", () => {
  async function agentWith(rows: number, fields: (i: number) => Partial<SessionRow> = () => ({})) {
    const a = agentId();
    const seeded = await seedSessions(
      Array.from({ length: rows }, (_, i) =>
        seed({
          key: `agent:${a}:dm:peer-${String(i).padStart(3, "0")}`,
          agentId: a,
          updatedAt: T0 + i,
          ...fields(i),
        }),
      ),
    );
    return {
      a,
      seeded,
      config: { agents: { list: [{ id: a }] }, tools: { sessions: { visibility: "agent" as const } } },
    };
  }

  it("returns { count, sessions, nextCursor } with 50 rows by default", async () => {
    const { a, config } = await agentWith(55);
    const res = await invoke<ListResult>(config, { tool: "sessions_list", agentId: a });
    expect(res.status).toBe(200);
    expect(res.result.count).toBe(50);
    expect(res.result.sessions).toHaveLength(50);
    expect(res.result.nextCursor).toEqual(expect.any(String));
    expect(res.result.sessions[0]?.key).toBe(`agent:${a}:dm:peer-054`);
  });

  it("clamps limit to 1..200 and truncates fractions instead of refusing", async () => {
    const { a, config } = await agentWith(205);
    const count = async (limit: number) =>
      (await invoke<ListResult>(config, { tool: "sessions_list", agentId: a, args: { limit } })).result.count;
    expect(await count(0)).toBe(1);
    expect(await count(-5)).toBe(1);
    expect(await count(2.9)).toBe(2);
    expect(await count(500)).toBe(200);
  });

  it("pages newest first with stable cursors, also across equal timestamps and new rows", async () => {
    const a = agentId();
    const rows = await seedSessions(
      ["p1", "p2", "p3", "p4", "p5", "p6", "p7"].map((p, i) =>
        seed({ key: `agent:${a}:dm:${p}`, agentId: a, updatedAt: T0 + Math.floor(i / 3) }),
      ),
    );
    const config = { agents: { list: [{ id: a }] }, tools: { sessions: { visibility: "agent" as const } } };
    const expected = [...rows]
      .sort((x, y) => y.updatedAt - x.updatedAt || (x.key < y.key ? 1 : -1))
      .map((r) => r.key);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 5; page++) {
      const res = await invoke<ListResult>(config, {
        tool: "sessions_list",
        agentId: a,
        args: { limit: 3, ...(cursor ? { cursor } : {}) },
      });
      seen.push(...res.result.sessions.map((s) => s.key));
      cursor = res.result.nextCursor;
      // A session updated while paging lands before the cursor: it does not shift later pages.
      if (page === 0)
        await seedSessions([seed({ key: `agent:${a}:dm:late`, agentId: a, updatedAt: T0 + 100 })]);
      if (!cursor) break;
    }
    expect(seen).toEqual(expected);
  });

  it("pages the union of visibility scopes (caller, children, agents) without gaps or repeats", async () => {
    const f = await family();
    const extra = await seedSessions(
      [1, 2, 3, 4].map((i) =>
        seed({ key: `agent:${f.c}:subagent:x${i}`, agentId: f.c, spawnedBy: f.k.aMain, updatedAt: T0 + 2 }),
      ),
    );
    const config = {
      agents: f.agents(),
      tools: { sessions: { visibility: "all" as const }, agentToAgent: { enabled: true, allow: [f.a, f.b] } },
    };
    const expected = [
      f.k.aChild,
      f.k.bChildOfA,
      f.k.bMain,
      f.k.aGroupChild,
      f.k.aGroup,
      ...extra
        .map((r) => r.key)
        .sort()
        .reverse(),
      "main",
    ];
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const res = await invoke<ListResult>(config, {
        tool: "sessions_list",
        agentId: f.a,
        args: { limit: 2, ...(cursor ? { cursor } : {}) },
      });
      expect(res.result.count).toBeLessThanOrEqual(2);
      seen.push(...res.result.sessions.map((s) => s.key));
      cursor = res.result.nextCursor;
      if (!cursor) break;
    }
    expect(seen).toEqual(expected);
  });

  it("refuses a cursor it did not issue", async () => {
    const { a, config } = await agentWith(1);
    const res = await invoke(config, { tool: "sessions_list", agentId: a, args: { cursor: "garbage" } });
    expect(res.status).toBe(400);
    expect(res.error).toEqual({
      type: "tool_error",
      message: "`cursor` is not a cursor returned by sessions_list; omit it to start from the newest",
    });
  });

  it("filters by kinds and refuses unknown kinds naming the allowed values", async () => {
    const a = agentId();
    await seedSessions([
      seed({ key: `agent:${a}:main`, agentId: a, kind: "main" }),
      seed({ key: `agent:${a}:slack:group:g`, agentId: a, kind: "group", updatedAt: T0 + 1 }),
      seed({ key: `cron:job-${a}`, agentId: a, kind: "cron", updatedAt: T0 + 2 }),
      seed({ key: `hook:${a}`, agentId: a, kind: "hook", updatedAt: T0 + 3 }),
      seed({ key: `node-${a}`, agentId: a, kind: "node", updatedAt: T0 + 4 }),
      seed({ key: `agent:${a}:dm:x`, agentId: a, kind: "other", updatedAt: T0 + 5 }),
    ]);
    const config = { agents: { list: [{ id: a }] }, tools: { sessions: { visibility: "agent" as const } } };
    expect(await listKeys(config, { agentId: a }, { kinds: ["group", "cron"] })).toEqual([
      `cron:job-${a}`,
      `agent:${a}:slack:group:g`,
    ]);
    expect(await listKeys(config, { agentId: a }, { kinds: ["main"] })).toEqual(["main"]);
    const rows = (await invoke<ListResult>(config, { tool: "sessions_list", agentId: a })).result.sessions;
    expect(Object.fromEntries(rows.map((r) => [r.key, r.channel]))).toMatchObject({
      [`cron:job-${a}`]: "internal",
      [`hook:${a}`]: "internal",
      [`node-${a}`]: "internal",
    });
    const bad = await invoke(config, { tool: "sessions_list", agentId: a, args: { kinds: ["group", "dm"] } });
    expect(bad.status).toBe(400);
    expect(bad.error).toEqual({
      type: "invalid_request",
      message: 'args: `kinds.1` must be one of "main", "group", "cron", "hook", "node", "other"',
    });
  });

  it("filters by activeMinutes, agentId and label", async () => {
    const f = await family();
    const a = f.a;
    await seedSessions([
      seed({ key: `agent:${a}:dm:fresh`, agentId: a, updatedAt: Date.now() - 60_000, label: `fresh-${a}` }),
    ]);
    const config = {
      agents: f.agents(),
      tools: { sessions: { visibility: "all" as const }, agentToAgent: { enabled: true } },
    };
    expect(await listKeys(config, { agentId: a }, { activeMinutes: 30 })).toEqual([`agent:${a}:dm:fresh`]);
    expect(await listKeys(config, { agentId: a }, { agentId: f.b.toUpperCase() })).toEqual([
      f.k.bChildOfA,
      f.k.bMain,
    ]);
    expect(await listKeys(config, { agentId: a }, { label: `fresh-${a}` })).toEqual([`agent:${a}:dm:fresh`]);
    // Without agentToAgent, asking for another agent's sessions finds none but a's own children there.
    expect(
      await listKeys(
        { agents: f.agents(), tools: { sessions: { visibility: "all" } } },
        { agentId: a },
        { agentId: f.b },
      ),
    ).toEqual([f.k.bChildOfA]);
  });

  it('hides archived sessions by default; archived: true lists only them, "all" both', async () => {
    const a = agentId();
    const main = `agent:${a}:main`;
    await seedSessions([
      seed({ key: main, agentId: a, kind: "main" }),
      seed({ key: `agent:${a}:subagent:live`, agentId: a, spawnedBy: main, updatedAt: T0 + 1 }),
      seed({
        key: `agent:${a}:subagent:old`,
        agentId: a,
        spawnedBy: main,
        updatedAt: T0 + 2,
        archivedAt: T0 + 3,
      }),
    ]);
    const config = { agents: { list: [{ id: a }] } };
    expect(await listKeys(config, { agentId: a })).toEqual([`agent:${a}:subagent:live`, "main"]);
    expect(await listKeys(config, { agentId: a }, { archived: true })).toEqual([`agent:${a}:subagent:old`]);
    expect(await listKeys(config, { agentId: a }, { archived: "all" })).toEqual([
      `agent:${a}:subagent:old`,
      `agent:${a}:subagent:live`,
      "main",
    ]);
  });

  it("includes the last messageLimit messages per row (capped at 20, tool results left out, secrets redacted)", async () => {
    const a = agentId();
    const [row] = await seedSessions([seed({ key: `agent:${a}:main`, agentId: a, kind: "main" })]);
    const id = row?.sessionId ?? "";
    await seedMessages(id, transcriptMessages(`ml-${a}`, 45, { toolEvery: 3 }));
    await seedMessages(id, [
      {
        id: `ml-${a}-secret`,
        role: "user",
        content: [{ type: "text", text: "my key is sk-ant-api03-abcdefghijklmnop" }],
        timestamp: 1,
      },
    ]);
    const config = { agents: { list: [{ id: a }] } };
    const list = async (args: Record<string, unknown>) =>
      (await invoke<ListResult>(config, { tool: "sessions_list", agentId: a, args })).result.sessions[0];

    expect((await list({}))?.messages).toBeUndefined();
    expect((await list({ messageLimit: 0 }))?.messages).toBeUndefined();
    const three = await list({ messageLimit: 3 });
    expect(three?.messages?.map((m) => m.id)).toEqual([`ml-${a}-43`, `ml-${a}-44`, `ml-${a}-secret`]);
    expect(three?.messages?.[2]?.content[0]?.text).toBe("my key is [REDACTED]");
    const capped = await list({ messageLimit: 50 });
    expect(capped?.messages).toHaveLength(20);
    expect(capped?.messages?.some((m) => m.role === "toolResult")).toBe(false);
  });

  it("bounds a page with messages at 80 KB in all: rows share the room, each keeping its newest messages", async () => {
    const rows = 30;
    const perRow = 20;
    const { a, seeded, config } = await agentWith(rows);
    for (const row of seeded) {
      await seedMessages(
        row.sessionId,
        Array.from({ length: perRow }, (_, i) => ({
          id: `${row.key}:m${i}`,
          role: "user" as const,
          content: [{ type: "text" as const, text: `${i} ${"w".repeat(1000)}` }],
          timestamp: T0 + i,
        })),
      );
    }
    const res = await invoke<
      ListResult & {
        truncated: boolean;
        droppedMessages: number;
        contentTruncated: boolean;
        contentRedacted: boolean;
      }
    >(config, { tool: "sessions_list", agentId: a, args: { limit: rows, messageLimit: perRow } });
    expect(res.status).toBe(200);
    expect(new TextEncoder().encode(JSON.stringify(res.result)).length).toBeLessThanOrEqual(80 * 1024);
    expect(res.result.count).toBe(rows);
    const kept = res.result.sessions.map((s) => s.messages ?? []);
    // Each row keeps a suffix of its transcript: its newest messages, in order.
    for (const [i, s] of res.result.sessions.entries()) {
      const ids = (kept[i] ?? []).map((m) => m.id);
      const all = Array.from({ length: perRow }, (_, n) => `${s.key}:m${n}`);
      expect(ids).toEqual(all.slice(perRow - ids.length));
    }
    // Equal rows share the room equally, and no row is left without messages here.
    const counts = kept.map((m) => m.length);
    expect(Math.min(...counts)).toBeGreaterThan(0);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
    const total = counts.reduce((x, y) => x + y, 0);
    expect(res.result).toMatchObject({
      truncated: true,
      droppedMessages: rows * perRow - total,
      contentTruncated: false,
      contentRedacted: false,
    });
  });

  it("reads every row's messages with one D1 query per database, not one query per row", async () => {
    const rows = 60;
    const { a, seeded, config } = await agentWith(rows);
    for (const row of seeded) {
      await seedMessages(row.sessionId, transcriptMessages(`${row.key}:fan`, 5, { toolEvery: 3 }));
    }
    const reads: string[] = [];
    const counted = (db: D1Database) =>
      new Proxy(db, {
        get(target, prop) {
          if (prop === "prepare") {
            return (query: string) => {
              if (/\b(from|join)\s+["`]?messages["`]?/i.test(query)) reads.push(query);
              return target.prepare(query);
            };
          }
          const value = Reflect.get(target, prop);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    const res = await invoke<ListResult>(
      config,
      { tool: "sessions_list", agentId: a, args: { limit: rows, messageLimit: 20 } },
      (e) => wrapDatabases(e, counted),
    );
    expect(res.status).toBe(200);
    expect(res.result.sessions).toHaveLength(rows);
    for (const s of res.result.sessions) {
      expect(s.messages?.map((m) => m.id)).toEqual([1, 2, 4, 5].map((n) => `${s.key}:fan-${n}`));
    }
    // A transcript lives in its session's database (SPEC §19): one statement for each database
    // holding some of the rows, whatever the number of rows.
    const holding = new Set(res.result.sessions.map((s) => databaseOfKey(env, s.key)));
    expect(reads).toHaveLength(holding.size);
  });

  it("rows carry the SPEC §6 fields", async () => {
    const a = agentId();
    const [row] = await seedSessions([
      seed({
        key: `agent:${a}:telegram:group:room`,
        agentId: a,
        kind: "group",
        chatType: "group",
        channel: "telegram",
        displayName: "Room",
        label: `room-${a}`,
        model: "echo/echo",
        contextTokens: 1000,
        totalTokens: 10,
        sendPolicy: "deny",
        lastChannel: "telegram",
        lastTo: "room",
      }),
    ]);
    const config = { agents: { list: [{ id: a }] }, tools: { sessions: { visibility: "agent" as const } } };
    const res = await invoke<ListResult>(config, { tool: "sessions_list", agentId: a });
    expect(res.result.sessions[0]).toEqual({
      key: `agent:${a}:telegram:group:room`,
      kind: "group",
      channel: "telegram",
      displayName: "Room",
      label: `room-${a}`,
      updatedAt: T0,
      sessionId: row?.sessionId,
      agentId: a,
      model: "echo/echo",
      contextTokens: 1000,
      totalTokens: 10,
      costUsd: 0,
      systemSent: false,
      abortedLastRun: false,
      thinkingLevel: null,
      verboseLevel: null,
      sendPolicy: "deny",
      lastChannel: "telegram",
      lastTo: "room",
      deliveryContext: null,
      spawnedBy: null,
      runStatus: "idle",
      stateVersion: 0,
      expired: false,
      transcriptPath: `/v1/transcripts/${row?.sessionId}.jsonl`,
    });
  });
});

describe("sessions_history", () => {
  async function sessionWith(messages: number, opts: { toolEvery?: number } = {}) {
    const a = agentId();
    const [row] = await seedSessions([seed({ key: `agent:${a}:main`, agentId: a, kind: "main" })]);
    const prefix = `h-${a}`;
    await seedMessages(row?.sessionId ?? "", transcriptMessages(prefix, messages, opts));
    return { a, prefix, row: row as SessionRow, config: { agents: { list: [{ id: a }] } } };
  }

  const history = (config: ConfigInput, a: string, args: Record<string, unknown>) =>
    invoke<HistoryResult>(config, {
      tool: "sessions_history",
      agentId: a,
      args: { sessionKey: "main", ...args },
    });

  it("returns the newest 50 messages oldest first, without tool results, and pages with before", async () => {
    const { a, prefix, row, config } = await sessionWith(120, { toolEvery: 4 });
    const first = await history(config, a, {});
    expect(first.status).toBe(200);
    const nonTool = transcriptMessages(prefix, 120, { toolEvery: 4 }).filter((m) => m.role !== "toolResult");
    expect(first.result.messages.map((m) => m.id)).toEqual(nonTool.slice(-50).map((m) => m.id));
    expect(first.result).toMatchObject({
      sessionKey: "main",
      sessionId: row.sessionId,
      hasMore: true,
      nextBefore: first.result.messages[0]?.seq,
      truncated: false,
      droppedMessages: 0,
      contentTruncated: false,
      contentRedacted: false,
    });
    const second = await history(config, a, { before: first.result.nextBefore });
    expect(second.result.messages.map((m) => m.id)).toEqual(nonTool.slice(-90, -50).map((m) => m.id));
    expect(second.result.hasMore).toBe(false);
    expect(second.result.nextBefore).toBeUndefined();
  });

  it("includes tool results with includeTools: true", async () => {
    const { a, config } = await sessionWith(12, { toolEvery: 4 });
    const res = await history(config, a, { includeTools: true });
    expect(res.result.messages.map((m) => m.role).filter((r) => r === "toolResult")).toHaveLength(3);
    expect(res.result.messages).toHaveLength(12);
  });

  it("clamps limit to 1..200", async () => {
    const { a, config } = await sessionWith(230);
    expect((await history(config, a, { limit: 0 })).result.messages).toHaveLength(1);
    expect((await history(config, a, { limit: 3.7 })).result.messages).toHaveLength(3);
    const max = await history(config, a, { limit: 1000 });
    expect(max.result.messages).toHaveLength(200);
    expect(max.result.hasMore).toBe(true);
  });

  it("redacts secrets, cuts long texts and bounds the result at 80 KB, oldest dropped first", async () => {
    const a = agentId();
    const [row] = await seedSessions([seed({ key: `agent:${a}:main`, agentId: a, kind: "main" })]);
    const big = Array.from({ length: 40 }, (_, i) => ({
      id: `big-${a}-${i}`,
      role: "user" as const,
      content: [{ type: "text" as const, text: `${i} ${"z".repeat(6000)}` }],
      timestamp: T0 + i,
    }));
    await seedMessages(row?.sessionId ?? "", [
      ...big,
      {
        id: `big-${a}-secret`,
        role: "assistant",
        content: [
          {
            type: "text",
            text: "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY----- and xoxb-1234567890-abc",
          },
        ],
        timestamp: T0 + 99,
      },
    ]);
    const res = await history({ agents: { list: [{ id: a }] } }, a, {});
    const json = JSON.stringify(res.result);
    expect(new TextEncoder().encode(json).length).toBeLessThanOrEqual(80 * 1024);
    expect(json).not.toContain("MIIE");
    expect(json).not.toContain("xoxb-1234567890");
    expect(res.result.contentRedacted).toBe(true);
    expect(res.result.contentTruncated).toBe(true);
    expect(res.result.truncated).toBe(true);
    expect(res.result.droppedMessages).toBe(41 - res.result.messages.length);
    expect(res.result.messages.at(-1)?.id).toBe(`big-${a}-secret`);
    expect(res.result.messages[0]?.content[0]?.text).toMatch(/…\[truncated: \d+ more characters\]$/);
    // The dropped (older) messages are one `before` away.
    expect(res.result.hasMore).toBe(true);
    const older = await history({ agents: { list: [{ id: a }] } }, a, { before: res.result.nextBefore });
    expect(older.result.messages.at(-1)?.id).toBe(`big-${a}-${40 - res.result.messages.length}`);
  });

  it("requires sessionKey", async () => {
    const res = await invoke({}, { tool: "sessions_history", args: {} });
    expect(res.status).toBe(400);
    expect(res.error).toEqual({ type: "invalid_request", message: "args: `sessionKey` is required" });
  });
});

describe("agents_list", () => {
  it("lists only the requester's own agent by default", async () => {
    const a = agentId();
    const res = await invoke(
      { agents: { list: [{ id: a, name: "Alpha" }, { id: agentId() }] } },
      { tool: "agents_list", agentId: a },
    );
    expect(res.status).toBe(200);
    expect(res.result).toEqual({
      requester: a,
      allowAny: false,
      agents: [{ id: a, name: "Alpha", configured: true }],
    });
  });

  it("adds subagents.allowAgents, requester first", async () => {
    const [a, b, c] = [agentId(), agentId(), agentId()];
    const config = {
      agents: { list: [{ id: b, name: "Bee" }, { id: a, subagents: { allowAgents: [b] } }, { id: c }] },
    };
    const res = await invoke(config, { tool: "agents_list", agentId: a });
    expect(res.result).toEqual({
      requester: a,
      allowAny: false,
      agents: [
        { id: a, configured: true },
        { id: b, name: "Bee", configured: true },
      ],
    });
  });

  it('["*"] allows every configured agent', async () => {
    const [a, b, c] = [agentId(), agentId(), agentId()];
    const config = { agents: { list: [{ id: b }, { id: c }, { id: a, subagents: { allowAgents: ["*"] } }] } };
    const res = await invoke<{ allowAny: boolean; agents: Array<{ id: string }> }>(config, {
      tool: "agents_list",
      agentId: a,
    });
    expect(res.result.allowAny).toBe(true);
    expect(res.result.agents.map((x) => x.id)).toEqual([a, b, c]);
  });

  it("with no agents configured, the implicit main agent", async () => {
    const res = await invoke({}, { tool: "agents_list" });
    expect(res.result).toEqual({
      requester: "main",
      allowAny: false,
      agents: [{ id: "main", configured: false }],
    });
  });

  it("tells a sub-agent session that it cannot spawn", async () => {
    const a = agentId();
    const res = await invoke(
      { agents: { list: [{ id: a, subagents: { allowAgents: ["*"] } }] } },
      { tool: "agents_list", sessionKey: `agent:${a}:subagent:x` },
    );
    expect(res.result).toMatchObject({ requester: a, allowAny: false, agents: [] });
  });
});

describe("session_status", () => {
  it("describes the calling session by default", async () => {
    const a = agentId();
    const [row] = await seedSessions([
      seed({
        key: `agent:${a}:main`,
        agentId: a,
        kind: "main",
        model: "echo/echo",
        contextTokens: 1000,
        totalTokens: 255,
        inputTokens: 200,
        outputTokens: 55,
        thinkingLevel: "high",
        sendPolicy: "deny",
        sessionStartedAt: T0 - 5,
        label: `status-${a}`,
      }),
    ]);
    const res = await invoke({ agents: { list: [{ id: a }] } }, { tool: "session_status", agentId: a });
    expect(res.status).toBe(200);
    expect(res.result).toEqual({
      ok: true,
      key: "main",
      sessionId: row?.sessionId,
      agentId: a,
      kind: "main",
      label: `status-${a}`,
      model: "echo/echo",
      contextTokens: 1000,
      totalTokens: 255,
      inputTokens: 200,
      outputTokens: 55,
      costUsd: 0,
      percentUsed: 25.5,
      compactionCount: 0,
      thinkingLevel: "high",
      verboseLevel: "off",
      sendPolicy: { effective: "deny", override: "deny" },
      queueDepth: 0,
      runStatus: "idle",
      lastResetAt: T0 - 5,
      updatedAt: T0,
      stateVersion: 0,
    });
  });

  it("describes another visible session; the effective send policy follows the rules", async () => {
    const f = await family();
    const config = {
      agents: f.agents(),
      session: {
        sendPolicy: {
          rules: [{ action: "deny" as const, match: { channel: "telegram", chatType: "group" as const } }],
        },
      },
      tools: { sessions: { visibility: "agent" as const } },
    };
    const res = await invoke(config, {
      tool: "session_status",
      agentId: f.a,
      args: { sessionKey: f.k.aGroup },
    });
    expect(res.result).toMatchObject({
      ok: true,
      key: f.k.aGroup,
      percentUsed: null,
      model: "echo/echo",
      sendPolicy: { effective: "deny", override: null },
    });
  });

  it("answers for a session that has never run", async () => {
    const a = agentId();
    const res = await invoke(
      { agents: { list: [{ id: a, model: "echo/other" }] } },
      { tool: "session_status", agentId: a },
    );
    expect(res.result).toEqual({
      ok: true,
      key: "main",
      agentId: a,
      created: false,
      model: "echo/other",
      queueDepth: 0,
      runStatus: "idle",
      stateVersion: 0,
    });
  });

  it("reports the queue depth and the running run from the session's actor", async () => {
    const model = hangingModel();
    const key = "agent:main:status-queue";
    await withActorConfig(key, SLOW_MODEL_CONFIG);
    const first = await rpc<{ runId: string }>("agent", { sessionKey: key, message: "one" });
    await eventually(
      async () => (await rpc("runs.get", { runId: first.payload.runId })).payload.status === "running",
    );
    await rpc("agent", { sessionKey: key, message: "two" });
    await rpc("agent", { sessionKey: key, message: "three" });
    const res = await invoke({}, { tool: "session_status", sessionKey: key });
    expect(res.result).toMatchObject({ ok: true, key, queueDepth: 2, runStatus: "running" });
    await rpc("sessions.delete", { key });
    await waitRun(first.payload.runId);
    model.restore();
  });

  it("works from inside a run of the session it describes", async () => {
    const key = "agent:main:status-self";
    const queued = await rpc<{ runId: string }>("agent", {
      sessionKey: key,
      message: "call:session_status {}",
    });
    expect(await waitRun(queued.payload.runId)).toMatchObject({ status: "ok" });
    const run = await rpc<{ reply: string }>("runs.get", { runId: queued.payload.runId });
    const output = JSON.parse(run.payload.reply.replace(/^echo: session_status -> /, "")) as {
      value: unknown;
    };
    expect(output.value).toMatchObject({
      ok: true,
      key,
      agentId: "main",
      queueDepth: 0,
      runStatus: "running",
    });
  });
});

describe("tool schemas", () => {
  it("declare integer-valued parameters as JSON number, for broad model compatibility", async () => {
    for (const name of ["sessions_list", "sessions_history", "agents_list", "session_status"]) {
      const def = findTool(name);
      expect(def).toBeDefined();
      const schema = await asSchema(tool({ description: "", inputSchema: def?.schema as never }).inputSchema)
        .jsonSchema;
      const json = JSON.stringify(schema);
      expect(json).not.toContain('"integer"');
      expect(schema).toMatchObject({ type: "object", additionalProperties: false });
    }
    const list = await asSchema(
      tool({ description: "", inputSchema: findTool("sessions_list")?.schema as never }).inputSchema,
    ).jsonSchema;
    expect(list).toMatchObject({
      properties: {
        limit: { type: "number" },
        messageLimit: { type: "number" },
        activeMinutes: { type: "number" },
      },
    });
  });
});
