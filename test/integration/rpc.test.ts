import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { allDatabases, databaseOfKey } from "../../src/db/placement";
import { getSession } from "../../src/db/queries";
import { app } from "../../src/http/app";
import { VERSION } from "../../src/version";
import {
  exportTranscript,
  hangingModel,
  jsonLines,
  type RpcAnswer,
  rpcRaw,
  rpcWithConfig,
  SLOW_MODEL_CONFIG,
  seedDeliveries,
  seedMessages,
  seedSessions,
  sessionRow,
  transcriptMessages,
  withActorConfig,
} from "./rpc-support";
import { dm, drain, eventually, fakeConnector, inbound, rpc, TOKEN, waitRun } from "./support";

interface Row {
  key: string;
  kind: string;
  channel: string;
  label?: string;
  updatedAt: number;
  sessionId: string;
  agentId: string;
  messages?: Array<{ id: string; role: string }>;
  [field: string]: unknown;
}
interface ListPayload {
  count: number;
  sessions: Row[];
  nextCursor?: string;
}
interface Queued {
  runId: string;
  sessionKey: string;
  sessionId: string;
  status: string;
}
interface HistoryPayload {
  sessionKey: string;
  sessionId: string;
  messages: Array<{ id: string; seq: number; role: string; content: Array<{ type: string; text?: string }> }>;
  hasMore: boolean;
  nextBefore?: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function expectError<T>(res: RpcAnswer<T>, status: number, code: string, message?: string | RegExp) {
  expect({ status: res.status, ok: res.ok, code: res.error?.code }).toEqual({ status, ok: false, code });
  if (typeof message === "string") expect(res.error?.message).toBe(message);
  else if (message) expect(res.error?.message).toMatch(message);
}

async function ackOf(res: Response) {
  expect(res.status).toBe(202);
  return (await res.json()) as Queued;
}

/** A group chat on telegram; returns its key once the first run has finished. */
async function groupSession(groupId: string, text = "hello") {
  const ack = await ackOf(await inbound("telegram", dm(text, { chatType: "group", groupId, from: "gm" })));
  expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
  return ack;
}

/** A session created by the operator (`agent` with a key): it has no delivery route. */
async function operatorSession(sessionKey: string, message = "create") {
  const res = await rpc<Queued>("agent", { sessionKey, message });
  expect(res.status).toBe(200);
  expect(await waitRun(res.payload.runId)).toMatchObject({ status: "ok" });
  return res.payload;
}

/** Every key `sessions.list` returns for `params`, following cursors to the end. */
async function listAll(params: Record<string, unknown>) {
  const keys: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 50; page++) {
    const res = await rpc<ListPayload>("sessions.list", {
      ...params,
      limit: 200,
      ...(cursor ? { cursor } : {}),
    });
    expect(res.status).toBe(200);
    keys.push(...res.payload.sessions.map((s) => s.key));
    cursor = res.payload.nextCursor;
    if (!cursor) return keys;
  }
  throw new Error("sessions.list did not end");
}

// ---------------------------------------------------------------------------------------------

describe("POST /rpc/:method", () => {
  it("refuses a call without a bearer token with 401 UNAUTHORIZED", async () => {
    const res = await rpcRaw("status", {});
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      ok: false,
      error: { code: "UNAUTHORIZED", message: "missing bearer token: send `Authorization: Bearer <token>`" },
    });
  });

  it("refuses another auth scheme as a missing bearer token", async () => {
    const res = await rpcRaw("status", { headers: { authorization: `Basic ${btoa(`x:${TOKEN}`)}` } });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("UNAUTHORIZED");
  });

  it("refuses a wrong token with 401 UNAUTHORIZED", async () => {
    for (const token of ["wrong-token", `${TOKEN}x`, TOKEN.slice(0, -1)]) {
      const res = await rpcRaw("status", { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({
        ok: false,
        error: { code: "UNAUTHORIZED", message: "invalid bearer token" },
      });
    }
  });

  it("accepts the bearer scheme in any case", async () => {
    const res = await rpcRaw("status", { headers: { authorization: `bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
  });

  it("answers 503 UNAVAILABLE naming GATEWAY_TOKEN when the secret is not configured", async () => {
    const { GATEWAY_TOKEN: _unset, ...withoutToken } = env;
    for (const e of [withoutToken, { ...env, GATEWAY_TOKEN: "" }]) {
      const res = await app.fetch(
        new Request("http://gw.test/rpc/status", {
          method: "POST",
          headers: { authorization: "Bearer anything" },
          body: "{}",
        }),
        e as unknown as Env,
        createExecutionContext(),
      );
      expect(res.status).toBe(503);
      const body = (await res.json()) as { ok: boolean; error: { code: string; message: string } };
      expect(body.ok).toBe(false);
      expect(body.error.code).toBe("UNAVAILABLE");
      expect(body.error.message).toContain("GATEWAY_TOKEN");
    }
  });

  it("answers an unknown method with 404 NOT_FOUND naming it", async () => {
    const res = await rpc("sessions.nuke", {});
    expectError(res, 404, "NOT_FOUND", /^unknown method "sessions\.nuke"/);
  });

  it("refuses unknown params with 400 INVALID_REQUEST naming the field", async () => {
    expectError(await rpc("status", { verbose: true }), 400, "INVALID_REQUEST", "unknown field `verbose`");
    expectError(
      await rpc("sessions.list", { limit: 5, agentid: "main" }),
      400,
      "INVALID_REQUEST",
      "unknown field `agentid`",
    );
  });

  it("refuses a param of the wrong type with 400 naming the field", async () => {
    expectError(await rpc("sessions.list", { limit: "ten" }), 400, "INVALID_REQUEST", /`limit`/);
  });

  it("refuses malformed JSON with 400 INVALID_REQUEST", async () => {
    const res = await rpcRaw("status", { body: "{not json", headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { ok: boolean; error: { code: string; message: string } };
    expect(body.ok).toBe(false);
    expect(body.error.code).toBe("INVALID_REQUEST");
    expect(body.error.message).toMatch(/^body is not valid JSON/);
  });

  it("refuses a body that is not an object with 400", async () => {
    const res = await rpcRaw("status", { body: "[1,2]", headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("INVALID_REQUEST");
  });

  it("treats an empty body as no params", async () => {
    const res = await rpcRaw("status", { body: "", headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
  });

  it("refuses a body over 1 MB with 413 PAYLOAD_TOO_LARGE", async () => {
    const body = JSON.stringify({ sessionKey: "main", message: "x".repeat(1024 * 1024 + 10) });
    const res = await rpcRaw("chat.send", { body, headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("PAYLOAD_TOO_LARGE");
  });
});

describe("status", () => {
  it("reports version, defaults, connectors and queue settings", async () => {
    const res = await rpc("status");
    expect(res.status).toBe(200);
    expect(res.ok).toBe(true);
    expect(res.payload).toEqual({
      version: VERSION,
      now: expect.any(Number),
      config: { valid: true },
      defaultAgentId: "main",
      defaultModel: "echo/echo",
      agents: [],
      connectors: [
        { channel: "telegram", type: "webhook", deliverUrl: true, secretSet: true },
        { channel: "slack", type: "webhook", deliverUrl: true, secretSet: true },
      ],
      access: { refused: {}, pendingPairingCodes: 0 },
      queue: { mode: "followup", cap: 50 },
      deadRecords: 0,
      search: { indexed: 0, pending: 0 },
      overBudget: [],
      maintenance: {},
      jobs: [],
    });
    expect(Math.abs((res.payload.now as number) - Date.now())).toBeLessThan(60_000);
  });

  it("says when a connector's secret is not set", async () => {
    const res = await rpcWithConfig({ connectors: { discord: { secretEnv: "DISCORD_SECRET" } } }, "status");
    expect(res.payload.connectors).toEqual([
      { channel: "discord", type: "webhook", deliverUrl: false, secretSet: false },
    ]);
  });
});

describe("agents.list", () => {
  it("lists the implicit main agent when none is configured", async () => {
    const res = await rpc("agents.list");
    expect(res.payload).toEqual({
      defaultId: "main",
      agents: [{ id: "main", default: true, model: "echo/echo" }],
    });
  });

  it("lists configured agents with the default marked and models resolved", async () => {
    const res = await rpcWithConfig(
      {
        agents: {
          defaults: { model: "echo/base" },
          list: [
            { id: "main", name: "Main" },
            { id: "research", default: true, model: "echo/deep" },
          ],
        },
      },
      "agents.list",
    );
    expect(res.payload).toEqual({
      defaultId: "research",
      agents: [
        { id: "main", name: "Main", default: false, model: "echo/base" },
        { id: "research", default: true, model: "echo/deep" },
      ],
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe("sessions.list", () => {
  it("lists newest updatedAt first, and count is the number of rows in the page", async () => {
    const t = Date.now() - 60_000;
    await seedSessions([
      sessionRow({ key: "agent:order:dm:a", agentId: "order", updatedAt: t + 1 }),
      sessionRow({ key: "agent:order:dm:b", agentId: "order", updatedAt: t + 3 }),
      sessionRow({ key: "agent:order:dm:c", agentId: "order", updatedAt: t + 2 }),
    ]);
    const res = await rpc<ListPayload>("sessions.list", { agentId: "order" });
    expect(res.payload.sessions.map((s) => s.key)).toEqual([
      "agent:order:dm:b",
      "agent:order:dm:c",
      "agent:order:dm:a",
    ]);
    expect(res.payload.count).toBe(3);
    expect(res.payload).not.toHaveProperty("nextCursor");
    const page = await rpc<ListPayload>("sessions.list", { agentId: "order", limit: 2 });
    expect(page.payload.count).toBe(2);
    expect(page.payload.sessions).toHaveLength(2);
  });

  it("returns rows in the list-row shape with canonical keys and derived channel", async () => {
    const t = Date.now() - 120_000;
    const [group, direct, cron, sub] = await seedSessions([
      sessionRow({
        key: "agent:shape:telegram:group:g1",
        agentId: "shape",
        kind: "group",
        chatType: "group",
        channel: "telegram",
        label: "team",
        displayName: "Team chat",
        updatedAt: t + 4,
        model: "echo/echo",
        contextTokens: 32000,
        totalTokens: 120,
        deliveryContext: { channel: "telegram", to: "g1", accountId: "default" },
        lastChannel: "telegram",
        lastTo: "g1",
      }),
      sessionRow({
        key: "agent:shape:main",
        agentId: "shape",
        kind: "main",
        lastChannel: "slack",
        updatedAt: t + 3,
      }),
      sessionRow({ key: "cron:shape-digest", agentId: "shape", kind: "cron", updatedAt: t + 2 }),
      sessionRow({
        key: "agent:shape:subagent:0b6c",
        agentId: "shape",
        spawnedBy: "agent:shape:main",
        updatedAt: t + 1,
      }),
    ]);
    const res = await rpc<ListPayload>("sessions.list", { agentId: "shape" });
    // Every documented field is there, null when unset (SPEC §6).
    const base = (r: typeof group) => ({
      key: r!.key,
      kind: r!.kind,
      displayName: null,
      label: null,
      updatedAt: r!.updatedAt,
      sessionId: r!.sessionId,
      agentId: "shape",
      model: null,
      contextTokens: r!.contextTokens,
      totalTokens: r!.totalTokens,
      costUsd: 0,
      thinkingLevel: null,
      verboseLevel: null,
      systemSent: false,
      abortedLastRun: false,
      sendPolicy: null,
      lastChannel: null,
      lastTo: null,
      deliveryContext: null,
      spawnedBy: null,
      runStatus: "idle",
      stateVersion: 0,
      expired: false,
      transcriptPath: `/v1/transcripts/${r!.sessionId}.jsonl`,
    });
    expect(res.payload.sessions).toEqual([
      {
        ...base(group),
        channel: "telegram",
        label: "team",
        displayName: "Team chat",
        model: "echo/echo",
        lastChannel: "telegram",
        lastTo: "g1",
        deliveryContext: { channel: "telegram", to: "g1", accountId: "default" },
      },
      { ...base(direct), channel: "slack", lastChannel: "slack" },
      { ...base(cron), channel: "internal" },
      { ...base(sub), channel: "unknown", spawnedBy: "agent:shape:main" },
    ]);
  });

  it("clamps limit to 1..200 instead of refusing it", async () => {
    const t = Date.now() - 3_600_000;
    await seedSessions(
      Array.from({ length: 201 }, (_, i) =>
        sessionRow({
          key: `agent:bulk:dm:p${String(i).padStart(3, "0")}`,
          agentId: "bulk",
          updatedAt: t + i,
        }),
      ),
    );
    const big = await rpc<ListPayload>("sessions.list", { agentId: "bulk", limit: 500 });
    expect(big.status).toBe(200);
    expect(big.payload.count).toBe(200);
    expect(big.payload.sessions).toHaveLength(200);
    expect(big.payload.nextCursor).toEqual(expect.any(String));
    const zero = await rpc<ListPayload>("sessions.list", { agentId: "bulk", limit: 0 });
    expect(zero.status).toBe(200);
    expect(zero.payload.count).toBe(1);
    expect(zero.payload.sessions.map((s) => s.key)).toEqual(["agent:bulk:dm:p200"]);
    const negative = await rpc<ListPayload>("sessions.list", { agentId: "bulk", limit: -7 });
    expect(negative.payload.count).toBe(1);
    const fallback = await rpc<ListPayload>("sessions.list", { agentId: "bulk" });
    expect(fallback.payload.count).toBe(50);
  });

  describe("filters", () => {
    const t = Date.now() - 600_000;
    const rows = [
      sessionRow({ key: "agent:kinds:main", agentId: "kinds", kind: "main", updatedAt: t + 6 }),
      sessionRow({ key: "agent:kinds:telegram:group:g", agentId: "kinds", kind: "group", updatedAt: t + 5 }),
      sessionRow({ key: "cron:kinds-job", agentId: "kinds", kind: "cron", updatedAt: t + 4 }),
      sessionRow({ key: "hook:kinds-1", agentId: "kinds", kind: "hook", updatedAt: t + 3 }),
      sessionRow({ key: "node-kinds", agentId: "kinds", kind: "node", updatedAt: t + 2 }),
      sessionRow({ key: "agent:kinds:dm:bob", agentId: "kinds", kind: "other", updatedAt: t + 1 }),
    ];

    it("kinds keeps only sessions of those kinds, newest first", async () => {
      await seedSessions(rows);
      const res = await rpc<ListPayload>("sessions.list", { agentId: "kinds", kinds: ["hook", "cron"] });
      expect(res.payload.sessions.map((s) => s.key)).toEqual(["cron:kinds-job", "hook:kinds-1"]);
      expect(res.payload.count).toBe(2);
      const one = await rpc<ListPayload>("sessions.list", { agentId: "kinds", kinds: ["other"] });
      expect(one.payload.sessions.map((s) => s.key)).toEqual(["agent:kinds:dm:bob"]);
      const all = await rpc<ListPayload>("sessions.list", {
        agentId: "kinds",
        kinds: ["main", "group", "cron", "hook", "node", "other"],
      });
      expect(all.payload.sessions.map((s) => s.key)).toEqual(rows.map((r) => r.key));
    });

    it("kinds pages across several kinds without duplicates or gaps", async () => {
      const kinds = ["main", "group", "node", "other"];
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let i = 0; i < 10; i++) {
        const res = await rpc<ListPayload>("sessions.list", {
          agentId: "kinds",
          kinds,
          limit: 1,
          ...(cursor ? { cursor } : {}),
        });
        seen.push(...res.payload.sessions.map((s) => s.key));
        cursor = res.payload.nextCursor;
        if (!cursor) break;
      }
      expect(seen).toEqual([
        "agent:kinds:main",
        "agent:kinds:telegram:group:g",
        "node-kinds",
        "agent:kinds:dm:bob",
      ]);
    });

    it("refuses an unknown kind with 400 naming kinds", async () => {
      expectError(
        await rpc("sessions.list", { kinds: ["main", "dm"] }),
        400,
        "INVALID_REQUEST",
        /`kinds\.1`/,
      );
    });

    it("agentId keeps one agent's sessions and is normalized like an id", async () => {
      const res = await rpc<ListPayload>("sessions.list", { agentId: " KINDS " });
      expect(res.payload.count).toBe(6);
      expect(new Set(res.payload.sessions.map((s) => s.agentId))).toEqual(new Set(["kinds"]));
    });

    it("label keeps the session with that label", async () => {
      await seedSessions([
        sessionRow({ key: "agent:labelled:dm:x", agentId: "labelled", label: "ops-room", updatedAt: t }),
        sessionRow({ key: "agent:labelled:dm:y", agentId: "labelled", label: "other-room", updatedAt: t }),
      ]);
      const res = await rpc<ListPayload>("sessions.list", { label: "ops-room" });
      expect(res.payload.sessions.map((s) => s.key)).toEqual(["agent:labelled:dm:x"]);
    });

    it("activeMinutes keeps sessions updated in the last N minutes", async () => {
      const now = Date.now();
      await seedSessions([
        sessionRow({ key: "agent:active:dm:recent", agentId: "active", updatedAt: now - 5 * 60_000 }),
        sessionRow({ key: "agent:active:dm:stale", agentId: "active", updatedAt: now - 30 * 60_000 }),
      ]);
      const recent = await rpc<ListPayload>("sessions.list", { agentId: "active", activeMinutes: 10 });
      expect(recent.payload.sessions.map((s) => s.key)).toEqual(["agent:active:dm:recent"]);
      const wider = await rpc<ListPayload>("sessions.list", { agentId: "active", activeMinutes: 60 });
      expect(wider.payload.sessions.map((s) => s.key)).toEqual([
        "agent:active:dm:recent",
        "agent:active:dm:stale",
      ]);
    });

    it("archived: false by default, true for archived only, all for both", async () => {
      await seedSessions([
        sessionRow({ key: "agent:arch:dm:live", agentId: "arch", updatedAt: t + 2 }),
        sessionRow({ key: "agent:arch:subagent:old", agentId: "arch", updatedAt: t + 1, archivedAt: t + 1 }),
      ]);
      const keys = async (archived?: boolean | "all") =>
        (
          await rpc<ListPayload>("sessions.list", {
            agentId: "arch",
            ...(archived === undefined ? {} : { archived }),
          })
        ).payload.sessions.map((s) => s.key);
      expect(await keys()).toEqual(["agent:arch:dm:live"]);
      expect(await keys(false)).toEqual(["agent:arch:dm:live"]);
      expect(await keys(true)).toEqual(["agent:arch:subagent:old"]);
      expect(await keys("all")).toEqual(["agent:arch:dm:live", "agent:arch:subagent:old"]);
    });
  });

  describe("cursor paging", () => {
    it("pages through every row once, in order, and omits nextCursor on the last page", async () => {
      const t = Date.now() - 900_000;
      const updated = [1, 2, 2, 2, 3, 4, 4];
      await seedSessions(
        updated.map((u, i) =>
          sessionRow({ key: `agent:pager:dm:s${i}`, agentId: "pager", updatedAt: t + u }),
        ),
      );
      const full = (await rpc<ListPayload>("sessions.list", { agentId: "pager" })).payload.sessions.map(
        (s) => s.key,
      );
      expect(full).toHaveLength(7);

      const page1 = await rpc<ListPayload>("sessions.list", { agentId: "pager", limit: 3 });
      expect(page1.payload.count).toBe(3);
      expect(page1.payload.nextCursor).toEqual(expect.any(String));
      // A session updated between pages does not shift the following pages.
      await seedSessions([
        sessionRow({ key: "agent:pager:dm:newcomer", agentId: "pager", updatedAt: Date.now() }),
      ]);
      const page2 = await rpc<ListPayload>("sessions.list", {
        agentId: "pager",
        limit: 3,
        cursor: page1.payload.nextCursor,
      });
      expect(page2.payload.count).toBe(3);
      expect(page2.payload.nextCursor).toEqual(expect.any(String));
      const page3 = await rpc<ListPayload>("sessions.list", {
        agentId: "pager",
        limit: 3,
        cursor: page2.payload.nextCursor,
      });
      expect(page3.payload.count).toBe(1);
      expect(page3.payload).not.toHaveProperty("nextCursor");

      const paged = [page1, page2, page3].flatMap((p) => p.payload.sessions.map((s) => s.key));
      expect(paged).toEqual(full);
    });

    it("omits nextCursor when the last page is exactly full", async () => {
      const t = Date.now() - 900_000;
      await seedSessions(
        [1, 2, 3, 4].map((u) =>
          sessionRow({ key: `agent:exact:dm:s${u}`, agentId: "exact", updatedAt: t + u }),
        ),
      );
      const page1 = await rpc<ListPayload>("sessions.list", { agentId: "exact", limit: 2 });
      const page2 = await rpc<ListPayload>("sessions.list", {
        agentId: "exact",
        limit: 2,
        cursor: page1.payload.nextCursor,
      });
      expect(page2.payload.sessions.map((s) => s.key)).toEqual(["agent:exact:dm:s2", "agent:exact:dm:s1"]);
      expect(page2.payload).not.toHaveProperty("nextCursor");
    });

    it("refuses a cursor it did not issue with 400", async () => {
      for (const cursor of ["not-a-cursor", btoa('{"a":1}'), btoa('["x", 1]')]) {
        expectError(await rpc("sessions.list", { cursor }), 400, "INVALID_REQUEST", /`cursor`/);
      }
    });
  });

  describe("messageLimit", () => {
    it("includes the last N messages of each row, oldest first, without tool results", async () => {
      const [row] = await seedSessions([sessionRow({ key: "agent:msgs:dm:a", agentId: "msgs" })]);
      // 45 messages, every third a tool result: ids msgs-1 … msgs-45.
      await seedMessages(row!.sessionId, transcriptMessages("msgs", 45, { toolEvery: 3 }));
      const res = await rpc<ListPayload>("sessions.list", { agentId: "msgs", messageLimit: 5 });
      const messages = res.payload.sessions[0]!.messages!;
      expect(messages.map((m) => m.id)).toEqual(["msgs-38", "msgs-40", "msgs-41", "msgs-43", "msgs-44"]);
    });

    it("caps messageLimit at 20", async () => {
      const res = await rpc<ListPayload>("sessions.list", { agentId: "msgs", messageLimit: 500 });
      const messages = res.payload.sessions[0]!.messages!;
      expect(messages).toHaveLength(20);
      expect(messages.some((m) => m.role === "toolResult")).toBe(false);
      expect(messages.at(-1)!.id).toBe("msgs-44");
    });

    it("includes no messages by default", async () => {
      const res = await rpc<ListPayload>("sessions.list", { agentId: "msgs" });
      expect(res.payload.sessions[0]).not.toHaveProperty("messages");
    });

    it("still returns the last N non-tool messages when tool results dominate the tail", async () => {
      const [row] = await seedSessions([sessionRow({ key: "agent:msgtools:dm:a", agentId: "msgtools" })]);
      const talk = transcriptMessages("talk", 30);
      const calls = Array.from({ length: 80 }, (_, i) => ({
        id: `burst-${i}`,
        role: "toolResult" as const,
        content: [{ type: "text" as const, text: "{}" }],
        toolCallId: `burst-call-${i}`,
        toolName: "current_time",
        timestamp: 1_800_000_000_000 + i,
      }));
      await seedMessages(row!.sessionId, [...talk, ...calls]);
      const res = await rpc<ListPayload>("sessions.list", { agentId: "msgtools", messageLimit: 20 });
      expect(res.payload.sessions[0]!.messages!.map((m) => m.id)).toEqual(
        Array.from({ length: 20 }, (_, i) => `talk-${i + 11}`),
      );
    });
  });

  it("never lists global or unknown; includeGlobal adds global only", async () => {
    const t = Date.now() - 30_000;
    await seedSessions([
      sessionRow({ key: "global", agentId: "main", kind: "main", label: "reserved-probe", updatedAt: t }),
      sessionRow({ key: "unknown", agentId: "nobody", label: "reserved-probe", updatedAt: t }),
    ]);
    const plain = await rpc<ListPayload>("sessions.list", { label: "reserved-probe" });
    expect(plain.payload).toEqual({ count: 0, sessions: [] });
    const withGlobal = await rpc<ListPayload>("sessions.list", {
      label: "reserved-probe",
      includeGlobal: true,
    });
    expect(withGlobal.payload.sessions.map((s) => s.key)).toEqual(["global"]);
    const everything = await listAll({});
    expect(everything).not.toContain("global");
    expect(everything).not.toContain("unknown");
    expect(await listAll({ includeGlobal: true })).toContain("global");
  });
});

// ---------------------------------------------------------------------------------------------

describe("sessions.resolve", () => {
  const t = Date.now() - 1000;
  const rows = [
    sessionRow({
      key: "agent:res:telegram:group:room-1",
      agentId: "res",
      kind: "group",
      label: "war-room",
      updatedAt: t,
    }),
    sessionRow({ key: "agent:res2:dm:ann", agentId: "res2", label: "war-room", updatedAt: t }),
    sessionRow({ key: "agent:res2:dm:bob", agentId: "res2", label: "solo", updatedAt: t }),
  ];

  it("resolves a key in any case to its canonical key and sessionId", async () => {
    await seedSessions(rows);
    const res = await rpc("sessions.resolve", { key: "Agent:RES:Telegram:Group:ROOM-1" });
    expect(res.status).toBe(200);
    expect(res.payload).toEqual({ key: "agent:res:telegram:group:room-1", sessionId: rows[0]!.sessionId });
  });

  it("resolves the literal main to the default agent's main key", async () => {
    const created = await operatorSession("agent:main:main", "resolve me");
    const res = await rpc("sessions.resolve", { key: "main" });
    expect(res.payload).toEqual({ key: "agent:main:main", sessionId: created.sessionId });
  });

  it("resolves a sessionId", async () => {
    const res = await rpc("sessions.resolve", { sessionId: rows[2]!.sessionId });
    expect(res.payload).toEqual({ key: "agent:res2:dm:bob", sessionId: rows[2]!.sessionId });
  });

  it("resolves a label, scoped by agentId when given", async () => {
    expect((await rpc("sessions.resolve", { label: "solo" })).payload).toEqual({
      key: "agent:res2:dm:bob",
      sessionId: rows[2]!.sessionId,
    });
    expect((await rpc("sessions.resolve", { label: "war-room", agentId: "res" })).payload).toEqual({
      key: "agent:res:telegram:group:room-1",
      sessionId: rows[0]!.sessionId,
    });
    expect((await rpc("sessions.resolve", { label: "war-room", agentId: "res2" })).payload).toEqual({
      key: "agent:res2:dm:ann",
      sessionId: rows[1]!.sessionId,
    });
  });

  it("refuses a label used by several agents without agentId with 409", async () => {
    expectError(await rpc("sessions.resolve", { label: "war-room" }), 409, "CONFLICT", /agentId/);
  });

  it("needs exactly one of key, sessionId, label (400)", async () => {
    expectError(
      await rpc("sessions.resolve", {}),
      400,
      "INVALID_REQUEST",
      /exactly one of `key`, `sessionId`, `label`/,
    );
    expectError(
      await rpc("sessions.resolve", { key: rows[0]!.key, sessionId: rows[0]!.sessionId }),
      400,
      "INVALID_REQUEST",
      /exactly one/,
    );
    expectError(
      await rpc("sessions.resolve", { sessionId: "x", label: "solo" }),
      400,
      "INVALID_REQUEST",
      /exactly one/,
    );
    expectError(await rpc("sessions.resolve", { agentId: "res" }), 400, "INVALID_REQUEST", /exactly one/);
  });

  it("answers an unknown key, sessionId or label with 404 naming it", async () => {
    expectError(
      await rpc("sessions.resolve", { key: "agent:res:dm:nobody" }),
      404,
      "NOT_FOUND",
      "session not found: agent:res:dm:nobody",
    );
    expectError(
      await rpc("sessions.resolve", { sessionId: "0000" }),
      404,
      "NOT_FOUND",
      "session not found: 0000",
    );
    expectError(
      await rpc("sessions.resolve", { label: "no-such-label" }),
      404,
      "NOT_FOUND",
      "session not found: no-such-label",
    );
    expectError(await rpc("sessions.resolve", { label: "solo", agentId: "res" }), 404, "NOT_FOUND");
  });
});

// ---------------------------------------------------------------------------------------------

describe("sessions.patch", () => {
  const t = Date.now() - 5000;
  const a = sessionRow({ key: "agent:patch:dm:a", agentId: "patch", updatedAt: t });
  const b = sessionRow({ key: "agent:patch:dm:b", agentId: "patch", updatedAt: t });
  const other = sessionRow({ key: "agent:patch2:dm:c", agentId: "patch2", updatedAt: t });

  it("sets a label and returns the updated entry", async () => {
    await seedSessions([a, b, other]);
    const before = Date.now();
    const res = await rpc<Row>("sessions.patch", { key: a.key, label: "alpha" });
    expect(res.status).toBe(200);
    expect(res.payload).toMatchObject({
      key: a.key,
      agentId: "patch",
      sessionId: a.sessionId,
      label: "alpha",
      transcriptPath: `/v1/transcripts/${a.sessionId}.jsonl`,
    });
    expect(res.payload.updatedAt).toBeGreaterThanOrEqual(before);
    expect((await getSession(env, a.key))?.label).toBe("alpha");
    const listed = await rpc<ListPayload>("sessions.list", { label: "alpha", agentId: "patch" });
    expect(listed.payload.sessions.map((s) => s.key)).toEqual([a.key]);
  });

  it("refuses a label already used by another session of the agent with 409 CONFLICT", async () => {
    const res = await rpc("sessions.patch", { key: b.key, label: "alpha" });
    expectError(res, 409, "CONFLICT", 'label "alpha" is already used by another session of agent patch');
    expect((await getSession(env, b.key))?.label).toBeNull();
    expect(
      (await rpc<ListPayload>("sessions.list", { label: "alpha", agentId: "patch" })).payload.count,
    ).toBe(1);
  });

  it("refuses a label taken in the same database or in another one (SPEC §19)", async () => {
    const holder = sessionRow({ key: "agent:patch3:dm:holder", agentId: "patch3" });
    const candidates = Array.from({ length: 40 }, (_, i) =>
      sessionRow({ key: `agent:patch3:dm:c${i}`, agentId: "patch3" }),
    );
    const home = databaseOfKey(env, holder.key);
    const same = candidates.find((r) => databaseOfKey(env, r.key) === home);
    const elsewhere = candidates.find((r) => databaseOfKey(env, r.key) !== home);
    const contenders = allDatabases(env).length > 1 ? [same, elsewhere] : [same];
    await seedSessions([holder, ...contenders.map((r) => r!)]);
    expect((await rpc("sessions.patch", { key: holder.key, label: "taken" })).status).toBe(200);
    for (const row of contenders) {
      const res = await rpc("sessions.patch", { key: row!.key, label: "taken" });
      expectError(res, 409, "CONFLICT", 'label "taken" is already used by another session of agent patch3');
      expect((await getSession(env, row!.key))?.label).toBeNull();
    }
  });

  it("allows the same label in another agent", async () => {
    const res = await rpc<Row>("sessions.patch", { key: other.key, label: "alpha" });
    expect(res.status).toBe(200);
    expect(res.payload.label).toBe("alpha");
  });

  it("re-applying a session's own label is not a conflict", async () => {
    const res = await rpc<Row>("sessions.patch", { key: a.key, label: "alpha" });
    expect(res.status).toBe(200);
  });

  it("clears a label with null, freeing it for another session", async () => {
    const res = await rpc<Row>("sessions.patch", { key: a.key, label: null });
    expect(res.status).toBe(200);
    expect(res.payload).not.toHaveProperty("label");
    expect((await getSession(env, a.key))?.label).toBeNull();
    const taken = await rpc<Row>("sessions.patch", { key: b.key, label: "alpha" });
    expect(taken.status).toBe(200);
    expect(taken.payload.label).toBe("alpha");
  });

  it("sets a model override and refuses an unknown model with 400 naming the choices", async () => {
    const set = await rpc<Row>("sessions.patch", { key: a.key, model: "echo/other" });
    expect(set.payload.modelOverride).toBe("echo/other");
    const bad = await rpc("sessions.patch", { key: a.key, model: "gpt-9" });
    expectError(
      bad,
      400,
      "INVALID_REQUEST",
      '`model`: unknown model "gpt-9": use one of echo/<model>, openai/<model>, anthropic/<model>, workers-ai/<model>, fake/<model>',
    );
    expect((await getSession(env, a.key))?.modelOverride).toBe("echo/other");
  });

  it("resolves a model alias to provider/model", async () => {
    const res = await rpcWithConfig<Row>({ models: { aliases: { fast: "echo/fast" } } }, "sessions.patch", {
      key: a.key,
      model: "fast",
    });
    expect(res.status).toBe(200);
    expect(res.payload.modelOverride).toBe("echo/fast");
  });

  it("clears the model override with null", async () => {
    const res = await rpc<Row>("sessions.patch", { key: a.key, model: null });
    expect(res.payload).not.toHaveProperty("modelOverride");
    expect((await getSession(env, a.key))?.modelOverride).toBeNull();
  });

  it("sets sendPolicy allow or deny and clears it with null", async () => {
    expect((await rpc<Row>("sessions.patch", { key: a.key, sendPolicy: "deny" })).payload.sendPolicy).toBe(
      "deny",
    );
    expect((await getSession(env, a.key))?.sendPolicy).toBe("deny");
    expect((await rpc<Row>("sessions.patch", { key: a.key, sendPolicy: "allow" })).payload.sendPolicy).toBe(
      "allow",
    );
    const cleared = await rpc<Row>("sessions.patch", { key: a.key, sendPolicy: null });
    expect(cleared.payload).not.toHaveProperty("sendPolicy");
    expect((await getSession(env, a.key))?.sendPolicy).toBeNull();
    expectError(
      await rpc("sessions.patch", { key: a.key, sendPolicy: "inherit" }),
      400,
      "INVALID_REQUEST",
      /`sendPolicy`/,
    );
  });

  it("sets thinkingLevel and verboseLevel, refusing values outside their choices", async () => {
    const res = await rpc<Row>("sessions.patch", { key: a.key, thinkingLevel: "high", verboseLevel: "on" });
    expect(res.payload).toMatchObject({ thinkingLevel: "high", verboseLevel: "on" });
    expect(await getSession(env, a.key)).toMatchObject({ thinkingLevel: "high", verboseLevel: "on" });
    expectError(
      await rpc("sessions.patch", { key: a.key, thinkingLevel: "extreme" }),
      400,
      "INVALID_REQUEST",
      /`thinkingLevel`/,
    );
    const cleared = await rpc<Row>("sessions.patch", { key: a.key, thinkingLevel: null });
    expect(cleared.payload).not.toHaveProperty("thinkingLevel");
    expect(cleared.payload.verboseLevel).toBe("on");
  });

  it("leaves fields it was not given unchanged", async () => {
    await rpc("sessions.patch", { key: b.key, sendPolicy: "deny", thinkingLevel: "low" });
    const res = await rpc<Row>("sessions.patch", { key: b.key, verboseLevel: "full" });
    expect(res.payload).toMatchObject({
      label: "alpha",
      sendPolicy: "deny",
      thinkingLevel: "low",
      verboseLevel: "full",
    });
  });

  it("answers an unknown session with 404", async () => {
    expectError(
      await rpc("sessions.patch", { key: "agent:patch:dm:ghost", label: "x" }),
      404,
      "NOT_FOUND",
      "session not found: agent:patch:dm:ghost",
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe("sessions.reset", () => {
  it("issues a new sessionId, keeps settings and route, zeroes token counters, and keeps the old transcript", async () => {
    const connector = fakeConnector();
    const first = await groupSession("reset-room", "before the reset");
    const key = first.sessionKey;
    expect(key).toBe("agent:main:telegram:group:reset-room");
    await rpc("sessions.patch", {
      key,
      label: "reset-room",
      model: "echo/other",
      sendPolicy: "allow",
      thinkingLevel: "low",
      verboseLevel: "on",
    });
    const before = (await getSession(env, key))!;
    expect(before.inputTokens).toBeGreaterThan(0);
    expect(before.outputTokens).toBeGreaterThan(0);
    expect(before.totalTokens).toBeGreaterThan(0);

    const res = await rpc<{ key: string; sessionId: string }>("sessions.reset", { key });
    expect(res.status).toBe(200);
    expect(res.payload).toEqual({ key, sessionId: expect.stringMatching(UUID) });
    expect(res.payload.sessionId).not.toBe(first.sessionId);

    const after = (await getSession(env, key))!;
    expect(after).toMatchObject({
      sessionId: res.payload.sessionId,
      label: "reset-room",
      modelOverride: "echo/other",
      sendPolicy: "allow",
      thinkingLevel: "low",
      verboseLevel: "on",
      channel: before.channel,
      deliveryContext: before.deliveryContext,
      origin: before.origin,
      lastChannel: before.lastChannel,
      lastTo: before.lastTo,
      inputTokens: 0,
      outputTokens: 0,
      totalTokens: 0,
    });
    expect(after.deliveryContext).toEqual({ channel: "telegram", to: "reset-room", accountId: "default" });

    const history = await rpc<HistoryPayload>("chat.history", { sessionKey: key });
    expect(history.payload).toMatchObject({ sessionId: res.payload.sessionId, messages: [], hasMore: false });

    const old = await exportTranscript(`${first.sessionId}.jsonl`);
    expect(old.status).toBe(200);
    const lines = await jsonLines(old);
    expect(lines[0]).toMatchObject({ type: "session", id: first.sessionId, sessionKey: key });
    expect(lines.slice(1).map((l) => (l.message as { role: string }).role)).toEqual(["user", "assistant"]);

    // The next message runs in the new session, with the kept model override.
    const next = await rpc<Queued>("chat.send", { sessionKey: key, message: "after the reset" });
    expect(next.payload.sessionId).toBe(res.payload.sessionId);
    await waitRun(next.payload.runId);
    expect((await rpc("runs.get", { runId: next.payload.runId })).payload).toMatchObject({
      sessionId: res.payload.sessionId,
      model: "echo/other",
      reply: "echo: after the reset",
    });
    connector.restore();
  });

  it("answers an unknown session with 404", async () => {
    expectError(await rpc("sessions.reset", { key: "agent:main:dm:ghost" }), 404, "NOT_FOUND");
  });
});

// ---------------------------------------------------------------------------------------------

describe("sessions.delete", () => {
  it("refuses the main session with 403, under its key or the alias main", async () => {
    const main = await operatorSession("agent:main:main", "keep me");
    for (const key of ["agent:main:main", "main"]) {
      const res = await rpc("sessions.delete", { key });
      expectError(res, 403, "FORBIDDEN", /agent:main:main/);
    }
    expect((await rpc("sessions.resolve", { key: "agent:main:main" })).payload).toEqual({
      key: "agent:main:main",
      sessionId: main.sessionId,
    });
  });

  it("deletes another key with its transcript; the next message recreates it", async () => {
    const connector = fakeConnector();
    const first = await groupSession("delete-room", "remember this");
    const key = first.sessionKey;
    const res = await rpc("sessions.delete", { key });
    expect(res.status).toBe(200);
    expect(res.payload).toEqual({ key, deleted: true, abortedRuns: 0 });

    expectError(await rpc("sessions.resolve", { key }), 404, "NOT_FOUND");
    expectError(await rpc("chat.history", { sessionKey: key }), 404, "NOT_FOUND");
    expect(await getSession(env, key)).toBeUndefined();
    const transcript = await exportTranscript(`${first.sessionId}.jsonl`);
    expect(transcript.status).toBe(404);
    expect(await listAll({ kinds: ["group"] })).not.toContain(key);

    const again = await groupSession("delete-room", "fresh start");
    expect(again.sessionKey).toBe(key);
    expect(again.sessionId).not.toBe(first.sessionId);
    const history = await rpc<HistoryPayload>("chat.history", { sessionKey: key });
    expect(history.payload.sessionId).toBe(again.sessionId);
    expect(history.payload.messages.map((m) => m.content[0]?.text)).toEqual([
      "fresh start",
      "echo: fresh start",
    ]);
    connector.restore();
  });

  it("keeps the transcript with deleteTranscript: false", async () => {
    const first = await operatorSession("agent:main:keep-transcript", "archive me");
    const res = await rpc("sessions.delete", { key: first.sessionKey, deleteTranscript: false });
    expect(res.payload).toEqual({ key: first.sessionKey, deleted: true, abortedRuns: 0 });
    expectError(await rpc("sessions.resolve", { key: first.sessionKey }), 404, "NOT_FOUND");
    const transcript = await exportTranscript(`${first.sessionId}.jsonl`);
    expect(transcript.status).toBe(200);
    expect((await jsonLines(transcript)).length).toBe(3);
  });

  it("answers an unknown key with 404", async () => {
    expectError(
      await rpc("sessions.delete", { key: "agent:main:dm:ghost" }),
      404,
      "NOT_FOUND",
      "session not found: agent:main:dm:ghost",
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe("chat.history", () => {
  const row = sessionRow({ key: "agent:hist:telegram:group:h1", agentId: "hist", kind: "group" });

  it("returns the newest 200 messages by default, oldest first, with hasMore and nextBefore", async () => {
    await seedSessions([row]);
    // 250 messages, every fifth a tool result.
    await seedMessages(row.sessionId, transcriptMessages("hist", 250, { toolEvery: 5 }));
    const res = await rpc<HistoryPayload>("chat.history", { sessionKey: row.key });
    expect(res.status).toBe(200);
    expect(res.payload.sessionKey).toBe(row.key);
    expect(res.payload.sessionId).toBe(row.sessionId);
    expect(res.payload.messages).toHaveLength(200);
    expect(res.payload.messages.map((m) => m.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 51));
    expect(res.payload.hasMore).toBe(true);
    expect(res.payload.nextBefore).toBe(51);
  });

  it("pages older messages with before, ending with hasMore false and no nextBefore", async () => {
    const res = await rpc<HistoryPayload>("chat.history", { sessionKey: row.key, before: 51 });
    expect(res.payload.messages.map((m) => m.id)).toEqual(
      Array.from({ length: 50 }, (_, i) => `hist-${i + 1}`),
    );
    expect(res.payload.hasMore).toBe(false);
    expect(res.payload).not.toHaveProperty("nextBefore");
  });

  it("walks the whole transcript with small pages without gaps or repeats", async () => {
    const seqs: number[] = [];
    let before: number | undefined;
    for (let i = 0; i < 100; i++) {
      const res = await rpc<HistoryPayload>("chat.history", {
        sessionKey: row.key,
        limit: 37,
        ...(before ? { before } : {}),
      });
      seqs.unshift(...res.payload.messages.map((m) => m.seq));
      if (!res.payload.hasMore) break;
      before = res.payload.nextBefore;
    }
    expect(seqs).toEqual(Array.from({ length: 250 }, (_, i) => i + 1));
  });

  it("accepts limit 1 and 1000", async () => {
    const one = await rpc<HistoryPayload>("chat.history", { sessionKey: row.key, limit: 1 });
    expect(one.payload.messages.map((m) => m.id)).toEqual(["hist-250"]);
    expect(one.payload).toMatchObject({ hasMore: true, nextBefore: 250 });
    const all = await rpc<HistoryPayload>("chat.history", { sessionKey: row.key, limit: 1000 });
    expect(all.payload.messages).toHaveLength(250);
    expect(all.payload.hasMore).toBe(false);
  });

  it("refuses a limit outside 1..1000 with 400 naming limit", async () => {
    for (const limit of [0, 1001, -1, 2.5]) {
      expectError(
        await rpc("chat.history", { sessionKey: row.key, limit }),
        400,
        "INVALID_REQUEST",
        /`limit`/,
      );
    }
  });

  it("includes tool results by default and leaves them out with includeTools: false", async () => {
    const withTools = await rpc<HistoryPayload>("chat.history", { sessionKey: row.key, limit: 1000 });
    expect(withTools.payload.messages.filter((m) => m.role === "toolResult")).toHaveLength(50);
    const without = await rpc<HistoryPayload>("chat.history", {
      sessionKey: row.key,
      limit: 1000,
      includeTools: false,
    });
    expect(without.payload.messages).toHaveLength(200);
    expect(without.payload.messages.some((m) => m.role === "toolResult")).toBe(false);
  });

  it("returns messages in transcript format", async () => {
    const res = await rpc<HistoryPayload>("chat.history", { sessionKey: row.key, limit: 2, before: 6 });
    expect(res.payload.messages).toEqual([
      {
        id: "hist-4",
        seq: 4,
        role: "assistant",
        content: [{ type: "toolCall", id: "call-hist-5", name: "current_time", arguments: {} }],
        timestamp: 1_700_000_004_000,
      },
      {
        id: "hist-5",
        seq: 5,
        role: "toolResult",
        content: [{ type: "text", text: '{"n":5}' }],
        toolCallId: "call-hist-5",
        toolName: "current_time",
        isError: false,
        timestamp: 1_700_000_005_000,
      },
    ]);
  });

  it("answers an unknown session with 404", async () => {
    expectError(
      await rpc("chat.history", { sessionKey: "agent:hist:dm:ghost" }),
      404,
      "NOT_FOUND",
      "session not found: agent:hist:dm:ghost",
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe("chat.send", () => {
  it("queues a run in an existing session and answers with its ids", async () => {
    const s = await operatorSession("agent:main:send-target");
    const res = await rpc<Queued>("chat.send", { sessionKey: s.sessionKey, message: "second message" });
    expect(res.status).toBe(200);
    expect(res.payload).toEqual({
      runId: expect.stringMatching(UUID),
      sessionKey: "agent:main:send-target",
      sessionId: s.sessionId,
      status: "queued",
    });
    expect(await waitRun(res.payload.runId)).toMatchObject({ status: "ok" });
    expect((await rpc("runs.get", { runId: res.payload.runId })).payload).toMatchObject({
      trigger: "rpc",
      deliver: false,
      reply: "echo: second message",
    });
  });

  it("answers an unknown session with 404", async () => {
    expectError(
      await rpc("chat.send", { sessionKey: "agent:main:dm:ghost", message: "hi" }),
      404,
      "NOT_FOUND",
      "session not found: agent:main:dm:ghost",
    );
  });

  it("refuses an empty message with 400 naming message", async () => {
    const s = await operatorSession("agent:main:send-empty");
    expectError(
      await rpc("chat.send", { sessionKey: s.sessionKey, message: "   " }),
      400,
      "INVALID_REQUEST",
      /`message`/,
    );
  });

  it("refuses deliver: true for a session without a delivery route with 400", async () => {
    const s = await operatorSession("agent:main:no-route");
    expectError(
      await rpc("chat.send", { sessionKey: s.sessionKey, message: "out", deliver: true }),
      400,
      "INVALID_REQUEST",
      /no delivery route/,
    );
  });

  it("delivers the reply to the session's route with deliver: true", async () => {
    const connector = fakeConnector();
    const s = await groupSession("send-deliver");
    await eventually(async () => connector.delivered.length === 1);
    const res = await rpc<Queued>("chat.send", {
      sessionKey: s.sessionKey,
      message: "operator says hi",
      deliver: true,
    });
    expect(res.status).toBe(200);
    await waitRun(res.payload.runId);
    await eventually(async () => connector.delivered.length === 2);
    expect(connector.delivered[1]!.body).toMatchObject({
      kind: "reply",
      sessionKey: s.sessionKey,
      channel: "telegram",
      to: "send-deliver",
      text: "echo: operator says hi",
    });
    connector.restore();
  });

  it("does not deliver without deliver: true", async () => {
    const connector = fakeConnector();
    const s = await groupSession("send-quietly");
    await eventually(async () => connector.delivered.length === 1);
    const res = await rpc<Queued>("chat.send", { sessionKey: s.sessionKey, message: "just for the log" });
    await waitRun(res.payload.runId);
    await drain(s.sessionKey);
    expect(connector.delivered).toHaveLength(1);
    connector.restore();
  });

  it("refuses delivery blocked by the session's sendPolicy with 403", async () => {
    const connector = fakeConnector();
    const s = await groupSession("quiet-room");
    await rpc("sessions.patch", { key: s.sessionKey, sendPolicy: "deny" });
    const res = await rpc("chat.send", { sessionKey: s.sessionKey, message: "shh", deliver: true });
    expectError(res, 403, "FORBIDDEN", "send blocked by session policy");
    // Without delivery the policy does not apply.
    expect((await rpc("chat.send", { sessionKey: s.sessionKey, message: "shh" })).status).toBe(200);
    connector.restore();
  });

  it("refuses delivery blocked by a send policy rule with 403, unless the session overrides it", async () => {
    const connector = fakeConnector();
    const s = await groupSession("ruled-room");
    const cfg = {
      session: {
        sendPolicy: { rules: [{ action: "deny", match: { channel: "telegram", chatType: "group" } }] },
      },
    };
    expectError(
      await rpcWithConfig(cfg, "chat.send", { sessionKey: s.sessionKey, message: "x", deliver: true }),
      403,
      "FORBIDDEN",
      "send blocked by session policy",
    );
    await rpc("sessions.patch", { key: s.sessionKey, sendPolicy: "allow" });
    const allowed = await rpcWithConfig<Queued>(cfg, "chat.send", {
      sessionKey: s.sessionKey,
      message: "x",
      deliver: true,
    });
    expect(allowed.status).toBe(200);
    await waitRun(allowed.payload.runId);
    connector.restore();
  });

  it("returns the same runId for a repeated idempotencyKey and runs once", async () => {
    const s = await operatorSession("agent:main:idem-send");
    const params = { sessionKey: s.sessionKey, message: "only once", idempotencyKey: "send-once-1" };
    const [a, b] = await Promise.all([rpc<Queued>("chat.send", params), rpc<Queued>("chat.send", params)]);
    expect(a.payload.runId).toBe(b.payload.runId);
    await waitRun(a.payload.runId);
    const c = await rpc<Queued>("chat.send", params);
    expect(c.payload).toEqual(a.payload);
    await drain(s.sessionKey);
    const history = await rpc<HistoryPayload>("chat.history", { sessionKey: s.sessionKey });
    expect(history.payload.messages.filter((m) => m.role === "user").map((m) => m.content[0]?.text)).toEqual([
      "create",
      "only once",
    ]);
    // Stored scoped to the operator surface, like hook keys (`hook:<key>`), so no other
    // caller's key can ever name this run.
    expect((await rpc("runs.get", { runId: a.payload.runId })).payload).toMatchObject({
      idempotencyKey: "rpc:send-once-1",
      status: "ok",
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe("agent", () => {
  it("runs in the main session of the given agent", async () => {
    const res = await rpc<Queued>("agent", { message: "hello ops", agentId: "Ops" });
    expect(res.status).toBe(200);
    expect(res.payload).toMatchObject({ sessionKey: "agent:ops:main", status: "queued" });
    expect(await waitRun(res.payload.runId)).toMatchObject({ status: "ok" });
    expect((await rpc("sessions.resolve", { key: "agent:ops:main" })).payload).toEqual({
      key: "agent:ops:main",
      sessionId: res.payload.sessionId,
    });
  });

  it("runs in the default agent's main session when neither sessionKey nor agentId is given", async () => {
    const res = await rpc<Queued>("agent", { message: "hello default" });
    expect(res.payload.sessionKey).toBe("agent:main:main");
    expect(await waitRun(res.payload.runId)).toMatchObject({ status: "ok" });
  });

  it("creates the session named by sessionKey, canonicalized", async () => {
    const res = await rpc<Queued>("agent", { message: "hi", sessionKey: "Agent:Main:Ops-Desk" });
    expect(res.payload.sessionKey).toBe("agent:main:ops-desk");
    await waitRun(res.payload.runId);
    expect((await getSession(env, "agent:main:ops-desk"))?.sessionId).toBe(res.payload.sessionId);
  });

  it("refuses sessionKey and agentId together with 400", async () => {
    expectError(
      await rpc("agent", { message: "hi", sessionKey: "agent:main:main", agentId: "main" }),
      400,
      "INVALID_REQUEST",
      /`sessionKey` or `agentId`, not both/,
    );
  });

  it("refuses an agentId that is not configured when agents are configured", async () => {
    const cfg = { agents: { list: [{ id: "main" }, { id: "research" }] } };
    expectError(
      await rpcWithConfig(cfg, "agent", { message: "hi", agentId: "nope" }),
      400,
      "INVALID_REQUEST",
      /known: main, research/,
    );
  });

  it("refuses the reserved key unknown", async () => {
    expectError(
      await rpc("agent", { message: "hi", sessionKey: "unknown" }),
      400,
      "INVALID_REQUEST",
      /reserved/,
    );
  });

  it("refuses delivery blocked by send policy with 403", async () => {
    const connector = fakeConnector();
    const s = await groupSession("agent-quiet");
    await rpc("sessions.patch", { key: s.sessionKey, sendPolicy: "deny" });
    expectError(
      await rpc("agent", { message: "x", sessionKey: s.sessionKey, deliver: true }),
      403,
      "FORBIDDEN",
      "send blocked by session policy",
    );
    connector.restore();
  });

  it("returns the same runId for a repeated idempotencyKey", async () => {
    const params = { message: "once", sessionKey: "agent:main:idem-agent", idempotencyKey: "agent-once-1" };
    const first = await rpc<Queued>("agent", params);
    const second = await rpc<Queued>("agent", params);
    expect(second.payload).toEqual(first.payload);
    await waitRun(first.payload.runId);
    const history = await rpc<HistoryPayload>("chat.history", { sessionKey: "agent:main:idem-agent" });
    expect(history.payload.messages.filter((m) => m.role === "user")).toHaveLength(1);
  });

  it("refuses a timeoutSeconds that is not a whole number of seconds >= 0", async () => {
    for (const timeoutSeconds of [-1, 1.5, "10"]) {
      expectError(
        await rpc("agent", { message: "x", timeoutSeconds }),
        400,
        "INVALID_REQUEST",
        /`timeoutSeconds`/,
      );
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe("agent.wait and runs.get", () => {
  it("waits for a run and returns its ok result; a later wait returns the same", async () => {
    const res = await rpc<Queued>("agent", { message: "wait for me", sessionKey: "agent:main:waiter" });
    const waited = await rpc("agent.wait", { runId: res.payload.runId, timeoutMs: 10_000 });
    expect(waited.status).toBe(200);
    expect(waited.payload).toEqual({
      runId: res.payload.runId,
      status: "ok",
      runStatus: "ok",
      startedAt: expect.any(Number),
      endedAt: expect.any(Number),
    });
    expect(waited.payload.endedAt as number).toBeGreaterThanOrEqual(waited.payload.startedAt as number);
    const again = await rpc("agent.wait", { runId: res.payload.runId, timeoutMs: 0 });
    expect(again.payload).toEqual(waited.payload);
  });

  it("runs.get returns the run's fields", async () => {
    const res = await rpc<Queued>("agent", { message: "inspect me", sessionKey: "agent:main:inspected" });
    await waitRun(res.payload.runId);
    const run = await rpc("runs.get", { runId: res.payload.runId });
    expect(run.status).toBe(200);
    expect(run.payload).toEqual({
      runId: res.payload.runId,
      sessionKey: "agent:main:inspected",
      sessionId: res.payload.sessionId,
      trigger: "rpc",
      status: "ok",
      createdAt: expect.any(Number),
      startedAt: expect.any(Number),
      endedAt: expect.any(Number),
      reply: "echo: inspect me",
      model: "echo/echo",
      usage: {
        inputTokens: expect.any(Number),
        outputTokens: expect.any(Number),
        totalTokens: expect.any(Number),
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        modelCalls: 1,
        unpricedCalls: 0,
        costUsd: 0,
      },
      // The echo model is priced, at nothing.
      costUsd: 0,
      deliver: false,
      // SPEC §21: its time in the queue and its one model call.
      timeline: [
        { phase: "queued", startedAt: expect.any(Number), ms: expect.any(Number) },
        {
          phase: "model",
          name: "echo/echo",
          startedAt: expect.any(Number),
          ms: expect.any(Number),
          outcome: "ok",
        },
      ],
    });
    const usage = run.payload.usage as { inputTokens: number; outputTokens: number; totalTokens: number };
    expect(usage.inputTokens).toBeGreaterThan(0);
    expect(usage.totalTokens).toBe(usage.inputTokens + usage.outputTokens);
  });

  it("answers an unknown run with 404", async () => {
    expectError(
      await rpc("agent.wait", { runId: "no-such-run" }),
      404,
      "NOT_FOUND",
      "run not found: no-such-run",
    );
    expectError(
      await rpc("runs.get", { runId: "no-such-run" }),
      404,
      "NOT_FOUND",
      "run not found: no-such-run",
    );
  });

  it("refuses a timeoutMs above 600000 with 400", async () => {
    expectError(
      await rpc("agent.wait", { runId: "x", timeoutMs: 600_001 }),
      400,
      "INVALID_REQUEST",
      /`timeoutMs`/,
    );
  });

  describe("with a model that does not answer", () => {
    it("timeoutMs 0 answers timeout with runStatus running / queued; deleting the session aborts both", async () => {
      const model = hangingModel();
      const key = "agent:main:slow-lane";
      await withActorConfig(key, SLOW_MODEL_CONFIG);
      const first = await rpc<Queued>("agent", { sessionKey: key, message: "think hard" });
      expect(first.status).toBe(200);
      await eventually(
        async () => (await rpc("runs.get", { runId: first.payload.runId })).payload.status === "running",
      );
      const second = await rpc<Queued>("agent", { sessionKey: key, message: "and then this" });

      const running = await rpc("agent.wait", { runId: first.payload.runId, timeoutMs: 0 });
      expect(running.payload).toEqual({
        runId: first.payload.runId,
        status: "timeout",
        runStatus: "running",
        startedAt: expect.any(Number),
      });
      const queued = await rpc("agent.wait", { runId: second.payload.runId, timeoutMs: 0 });
      expect(queued.payload).toEqual({ runId: second.payload.runId, status: "timeout", runStatus: "queued" });
      const waited = await rpc("agent.wait", { runId: first.payload.runId, timeoutMs: 200 });
      expect(waited.payload).toMatchObject({ status: "timeout", runStatus: "running" });
      expect(model.calls()).toBe(1);

      const deleted = await rpc("sessions.delete", { key });
      expect(deleted.payload).toEqual({ key, deleted: true, abortedRuns: 2 });
      expect(await waitRun(first.payload.runId)).toMatchObject({ status: "aborted", runStatus: "aborted" });
      expect(await waitRun(second.payload.runId)).toMatchObject({ status: "aborted", runStatus: "aborted" });
      expect((await rpc("runs.get", { runId: second.payload.runId })).payload.status).toBe("aborted");
      // The deleted entry stays deleted once the aborted run has wound down.
      await drain(key);
      expect(await getSession(env, key)).toBeUndefined();
      expectError(await rpc("sessions.resolve", { key }), 404, "NOT_FOUND");
      model.restore();
    });

    it("agent with timeoutSeconds ends the run with status timeout", async () => {
      const model = hangingModel();
      const key = "agent:main:slow-timeout";
      await withActorConfig(key, SLOW_MODEL_CONFIG);
      const res = await rpc<Queued>("agent", {
        sessionKey: key,
        message: "take your time",
        timeoutSeconds: 1,
      });
      expect(res.status).toBe(200);
      const waited = await rpc("agent.wait", { runId: res.payload.runId, timeoutMs: 10_000 });
      expect(waited.payload).toEqual({
        runId: res.payload.runId,
        status: "timeout",
        runStatus: "timeout",
        startedAt: expect.any(Number),
        endedAt: expect.any(Number),
        error: "run timed out after 1s",
      });
      const elapsed = (waited.payload.endedAt as number) - (waited.payload.startedAt as number);
      expect(elapsed).toBeGreaterThanOrEqual(1000);
      expect(elapsed).toBeLessThan(5000);
      expect((await rpc("runs.get", { runId: res.payload.runId })).payload).toMatchObject({
        status: "timeout",
        error: "run timed out after 1s",
      });
      model.restore();
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe("deliveries.list", () => {
  const base = 1_600_000_000_000;
  const keyA = "agent:main:telegram:group:dl-a";
  const keyB = "agent:main:telegram:group:dl-b";
  const delivery = (id: string, sessionKey: string, status: string, createdAt: number) => ({
    deliveryId: id,
    kind: "reply",
    sessionKey,
    runId: `run-${id}`,
    channel: "telegram",
    accountId: "default",
    to: sessionKey.split(":").at(-1)!,
    text: `text ${id}`,
    status,
    attempts: status === "pending" ? 0 : 1,
    createdAt,
    updatedAt: createdAt,
  });
  const rows = [
    delivery("dl-a-1", keyA, "delivered", base + 1),
    delivery("dl-a-2", keyA, "dead", base + 2),
    delivery("dl-a-3", keyA, "retrying", base + 3),
    delivery("dl-a-4", keyA, "delivered", base + 3),
    delivery("dl-a-5", keyA, "pending", base + 5),
    delivery("dl-b-1", keyB, "delivered", base + 4),
    delivery("dl-b-2", keyB, "dead", base + 6),
  ];

  it("filters by sessionKey, newest first, without null fields", async () => {
    await seedDeliveries(rows);
    const res = await rpc<{ deliveries: Array<Record<string, unknown>> }>("deliveries.list", {
      sessionKey: keyB,
    });
    expect(res.status).toBe(200);
    expect(res.payload).toEqual({
      deliveries: [rows[6], rows[5]],
    });
  });

  it("filters by status", async () => {
    const res = await rpc<{ deliveries: Array<{ deliveryId: string; status: string }> }>("deliveries.list", {
      status: "dead",
    });
    expect(res.payload.deliveries.every((d) => d.status === "dead")).toBe(true);
    expect(res.payload.deliveries.map((d) => d.deliveryId)).toEqual(
      expect.arrayContaining(["dl-b-2", "dl-a-2"]),
    );
    const both = await rpc<{ deliveries: Array<{ deliveryId: string }> }>("deliveries.list", {
      status: "delivered",
      sessionKey: keyA,
    });
    expect(both.payload.deliveries.map((d) => d.deliveryId).sort()).toEqual(["dl-a-1", "dl-a-4"]);
  });

  it("refuses an unknown status with 400", async () => {
    expectError(await rpc("deliveries.list", { status: "lost" }), 400, "INVALID_REQUEST", /`status`/);
  });

  it("pages with cursor without duplicates or gaps, and no nextCursor on the last page", async () => {
    const full = await rpc<{ deliveries: Array<{ deliveryId: string }> }>("deliveries.list", {
      sessionKey: keyA,
    });
    expect(full.payload.deliveries).toHaveLength(5);
    const ids: string[] = [];
    let cursor: string | undefined;
    const sizes: number[] = [];
    for (let i = 0; i < 10; i++) {
      const page = await rpc<{ deliveries: Array<{ deliveryId: string }>; nextCursor?: string }>(
        "deliveries.list",
        {
          sessionKey: keyA,
          limit: 2,
          ...(cursor ? { cursor } : {}),
        },
      );
      sizes.push(page.payload.deliveries.length);
      ids.push(...page.payload.deliveries.map((d) => d.deliveryId));
      cursor = page.payload.nextCursor;
      if (!cursor) break;
    }
    expect(sizes).toEqual([2, 2, 1]);
    expect(ids).toEqual(full.payload.deliveries.map((d) => d.deliveryId));
    expect(ids[0]).toBe("dl-a-5");
    expect(ids.at(-1)).toBe("dl-a-1");
  });

  it("refuses a bad cursor with 400", async () => {
    expectError(await rpc("deliveries.list", { cursor: "zzz" }), 400, "INVALID_REQUEST", /`cursor`/);
  });

  it("shows a real reply's delivery as delivered", async () => {
    const connector = fakeConnector();
    const s = await groupSession("dl-real", "deliver me");
    const listed = await eventually(async () => {
      const res = await rpc<{ deliveries: Array<Record<string, unknown>> }>("deliveries.list", {
        sessionKey: s.sessionKey,
      });
      const d = res.payload.deliveries[0];
      return d?.status === "delivered" ? res.payload.deliveries : undefined;
    });
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({
      deliveryId: `${s.runId}:reply`,
      kind: "reply",
      sessionKey: s.sessionKey,
      runId: s.runId,
      channel: "telegram",
      to: "dl-real",
      text: "echo: deliver me",
      status: "delivered",
      attempts: 1,
    });
    connector.restore();
  });
});
