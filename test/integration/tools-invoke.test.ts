/** POST /tools/invoke (SPEC §13, §17): the OpenClaw-compatible tool endpoint and every answer it gives. */
import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { asSchema, tool } from "ai";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ConfigInput } from "../../src/config/schema";
import { app } from "../../src/http/app";
import { findTool } from "../../src/tools/registry";
import { seedSessions, sessionRow } from "./rpc-support";
import { configText, rpc, TOKEN, waitRun } from "./support";

interface Answer {
  status: number;
  body: { ok: boolean; result?: Record<string, unknown>; error?: { type: string; message: string } };
}

async function post(
  config: ConfigInput | undefined,
  body: unknown,
  headers: Record<string, string> = {},
  e?: Env,
) {
  const res = await app.fetch(
    new Request("http://gw.test/tools/invoke", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    }),
    e ?? { ...env, ...(config ? { SWITCHBOARD_CONFIG: configText(config) } : {}) },
    createExecutionContext(),
  );
  return { status: res.status, body: (await res.json()) as Answer["body"] };
}

function expectError(res: Answer, status: number, type: string, message?: string | RegExp) {
  expect({ status: res.status, ok: res.body.ok, type: res.body.error?.type }).toEqual({
    status,
    ok: false,
    type,
  });
  if (typeof message === "string") expect(res.body.error?.message).toBe(message);
  else if (message) expect(res.body.error?.message).toMatch(message);
}

function registered(name: string) {
  const tool = findTool(name);
  if (!tool) throw new Error(`${name} is not registered`);
  return tool;
}

let n = 0;
const agentId = () => `inv${++n}-${Date.now().toString(36)}`;

/** A fresh agent with a target session, sessions_send/sessions_spawn allowed over HTTP. */
async function sendWorld() {
  const a = agentId();
  const target = `agent:${a}:target`;
  await seedSessions([sessionRow({ key: target, agentId: a })]);
  const config = {
    agents: { list: [{ id: a }] },
    tools: { sessions: { visibility: "agent" as const } },
    gateway: { tools: { allow: ["sessions_send", "sessions_spawn"] } },
  };
  return { a, target, config };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("POST /tools/invoke", () => {
  it("runs a tool and answers 200 { ok: true, result }", async () => {
    const res = await exports.default.fetch("http://gw.test/tools/invoke", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ tool: "current_time" }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Answer["body"];
    expect(body).toEqual({
      ok: true,
      result: {
        iso: expect.any(String),
        epochMs: expect.any(Number),
        timezone: "UTC",
        local: expect.any(String),
      },
    });
  });

  it("accepts `name` for `tool`", async () => {
    const res = await post(undefined, { name: "current_time", args: {} });
    expect(res.status).toBe(200);
  });

  it("acts as the agent's main session by default; the session need not exist yet", async () => {
    const a = agentId();
    const res = await post({ agents: { list: [{ id: a }] } }, { tool: "session_status", agentId: a });
    expect(res.status).toBe(200);
    expect(res.body.result).toMatchObject({ ok: true, key: "main", agentId: a, created: false });
    // Without agentId: the default agent.
    const b = agentId();
    const def = await post(
      { agents: { list: [{ id: a }, { id: b, default: true }] } },
      { tool: "agents_list" },
    );
    expect(def.body.result).toMatchObject({ requester: b });
  });

  it("acts as the given sessionKey, with the agent taken from the key", async () => {
    const a = agentId();
    const key = `agent:${a}:telegram:group:ops`;
    await seedSessions([sessionRow({ key, agentId: a, kind: "group" })]);
    const res = await post(
      { agents: { list: [{ id: a }] } },
      { tool: "session_status", sessionKey: key.toUpperCase() },
    );
    expect(res.body.result).toMatchObject({ ok: true, key, agentId: a });
  });

  it("takes an agent-less session's agent from its entry", async () => {
    const a = agentId();
    await seedSessions([sessionRow({ key: `cron:${a}`, agentId: a, kind: "cron" })]);
    const res = await post(
      { agents: { list: [{ id: "main" }, { id: a }] } },
      { tool: "agents_list", sessionKey: `cron:${a}` },
    );
    expect(res.body.result).toMatchObject({ requester: a });
  });

  describe("400 invalid_request", () => {
    it("for unknown body fields", async () => {
      expectError(
        await post(undefined, { tool: "current_time", argz: {} }),
        400,
        "invalid_request",
        "unknown field `argz`",
      );
    });

    it("without a tool name", async () => {
      expectError(
        await post(undefined, { args: {} }),
        400,
        "invalid_request",
        "`tool`: pass the tool's name (`name` is accepted too)",
      );
    });

    it("when tool and name disagree", async () => {
      expectError(
        await post(undefined, { tool: "current_time", name: "agents_list" }),
        400,
        "invalid_request",
        "`name`: names another tool than `tool`; pass one of them",
      );
    });

    it("for arguments that fail the tool's schema, naming the field", async () => {
      expectError(
        await post(undefined, { tool: "sessions_list", args: { limit: "ten" } }),
        400,
        "invalid_request",
        /^args: `limit` /,
      );
      expectError(
        await post(undefined, { tool: "current_time", args: { extra: 1 } }),
        400,
        "invalid_request",
        "args: unknown field `extra`",
      );
      expectError(
        await post(undefined, { tool: "current_time", args: [1] }),
        400,
        "invalid_request",
        /`args`/,
      );
    });

    it("for malformed JSON", async () => {
      expectError(await post(undefined, "{nope"), 400, "invalid_request", /^body is not valid JSON/);
    });

    it("for an agentId that is not configured, or that does not own the sessionKey", async () => {
      const a = agentId();
      const config = { agents: { list: [{ id: a }, { id: "other" }] } };
      expectError(
        await post(config, { tool: "agents_list", agentId: "ghost" }),
        400,
        "invalid_request",
        `\`agentId\` "ghost" is not a configured agent (known: ${a}, other)`,
      );
      expectError(
        await post(config, { tool: "agents_list", agentId: "other", sessionKey: `agent:${a}:main` }),
        400,
        "invalid_request",
        `\`sessionKey\` agent:${a}:main belongs to agent ${a}, not \`agentId\` other`,
      );
    });

    it("for a malformed or reserved sessionKey", async () => {
      expectError(
        await post(undefined, { tool: "agents_list", sessionKey: "a::b" }),
        400,
        "invalid_request",
        /^`sessionKey`: /,
      );
      expectError(
        await post(undefined, { tool: "agents_list", sessionKey: "unknown" }),
        400,
        "invalid_request",
        /reserved/,
      );
    });
  });

  it("answers a tool's status: error result with 400 tool_error", async () => {
    expectError(
      await post(undefined, { tool: "sessions_history", args: { sessionKey: "agent:main:dm:nobody" } }),
      400,
      "tool_error",
      "session not found: agent:main:dm:nobody",
    );
  });

  it("answers a tool's status: forbidden result with 403 forbidden", async () => {
    const a = agentId();
    const config = {
      agents: { list: [{ id: a }, { id: "research" }] },
      gateway: { tools: { allow: ["sessions_spawn"] } },
    };
    expectError(
      await post(config, { tool: "sessions_spawn", agentId: a, args: { task: "dig", agentId: "research" } }),
      403,
      "forbidden",
      /subagents\.allowAgents/,
    );
  });

  describe("404 not_found", () => {
    it("for an unknown tool", async () => {
      expectError(
        await post(undefined, { tool: "rm_rf" }),
        404,
        "not_found",
        /^unknown tool "rm_rf" \(tools of this session: .*current_time/,
      );
    });

    it("for a tool denied to the acting session", async () => {
      const a = agentId();
      expectError(
        await post({ tools: { deny: ["current_time"] } }, { tool: "current_time" }),
        404,
        "not_found",
        /^tool "current_time" is not available to session agent:main:main/,
      );
      expectError(
        await post(
          { agents: { list: [{ id: a, tools: { allow: ["agents_list"] } }] } },
          { tool: "sessions_list", agentId: a },
        ),
        404,
        "not_found",
      );
      // Sub-agents do not get the session tools.
      expectError(
        await post(
          { agents: { list: [{ id: a }] } },
          { tool: "sessions_list", sessionKey: `agent:${a}:subagent:x` },
        ),
        404,
        "not_found",
      );
    });

    it("for sessions_send and sessions_spawn unless gateway.tools.allow lists them", async () => {
      for (const tool of ["sessions_send", "sessions_spawn"]) {
        expectError(
          await post(undefined, { tool, args: { sessionKey: "main", message: "hi", task: "x" } }),
          404,
          "not_found",
          `tool "${tool}" is not allowed over HTTP; add it to gateway.tools.allow to enable it`,
        );
      }
    });
  });

  it("passes http:<idempotencyKey> as the tool call id, so a retry does not act twice", async () => {
    const a = agentId();
    const config = { agents: { list: [{ id: a }] }, gateway: { tools: { allow: ["sessions_spawn"] } } };
    const spy = vi.spyOn(registered("sessions_spawn"), "execute");
    const call = (idempotencyKey?: string) =>
      post(config, {
        tool: "sessions_spawn",
        agentId: a,
        args: { task: "noop" },
        ...(idempotencyKey ? { idempotencyKey } : {}),
      });
    const first = await call("retry-me");
    const again = await call("retry-me");
    expect(first.status).toBe(200);
    expect(again.body.result?.childSessionKey).toBe(first.body.result?.childSessionKey);
    const ids = spy.mock.calls.map(([, ctx]) => ctx.toolCallId);
    expect(ids).toEqual(["http:retry-me", "http:retry-me"]);
    await call();
    await call();
    const fresh = spy.mock.calls.slice(2).map(([, ctx]) => ctx.toolCallId);
    expect(fresh[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(fresh[0]).not.toBe(fresh[1]);
  });

  describe("idempotency keys are scoped to the acting session (SPEC §5)", () => {
    async function world() {
      const { a, target, config } = await sendWorld();
      const as = (sessionKey: string, tool: string, args: Record<string, unknown>, idempotencyKey: string) =>
        post(config, { tool, agentId: a, sessionKey, args, idempotencyKey });
      return { a, target, as };
    }

    it("sessions_send: the same key from two sessions is two runs; from one session, one run", async () => {
      const { a, target, as } = await world();
      const send = (from: string) =>
        as(from, "sessions_send", { sessionKey: target, message: "ping", timeoutSeconds: 0 }, "same-key");
      const first = await send(`agent:${a}:main`);
      const other = await send(`agent:${a}:dm:bob`);
      const again = await send(`agent:${a}:main`);
      expect([first.status, other.status, again.status]).toEqual([200, 200, 200]);
      expect(other.body.result?.runId).not.toBe(first.body.result?.runId);
      expect(again.body.result?.runId).toBe(first.body.result?.runId);
      for (const res of [first, other]) {
        expect(await waitRun(res.body.result?.runId as string)).toMatchObject({ status: "ok" });
      }
      // The operator RPC with the same key is a third caller: a run of its own.
      const viaRpc = await rpc<{ runId: string }>("chat.send", {
        sessionKey: target,
        message: "ping",
        idempotencyKey: "same-key",
      });
      expect([first.body.result?.runId, other.body.result?.runId]).not.toContain(viaRpc.payload.runId);
      await waitRun(viaRpc.payload.runId);
    });

    it("sessions_spawn: the same key from two sessions is two children; from one session, one child", async () => {
      const { a, as } = await world();
      const spawn = (from: string) => as(from, "sessions_spawn", { task: "noop" }, "spawn-key");
      const first = await spawn(`agent:${a}:main`);
      const other = await spawn(`agent:${a}:dm:bob`);
      const again = await spawn(`agent:${a}:main`);
      expect([first.status, other.status, again.status]).toEqual([200, 200, 200]);
      expect(other.body.result?.childSessionKey).not.toBe(first.body.result?.childSessionKey);
      expect(other.body.result?.runId).not.toBe(first.body.result?.runId);
      expect(again.body.result).toEqual(first.body.result);
      for (const res of [first, other]) {
        expect(await waitRun(res.body.result?.runId as string)).toMatchObject({ status: "ok" });
      }
    });
  });

  describe("sessions_send messages and sessions_spawn tasks have a maximum length", () => {
    const MAX = 32_000;
    async function world() {
      const { a, target, config } = await sendWorld();
      return {
        a,
        target,
        call: (tool: string, args: Record<string, unknown>) => post(config, { tool, agentId: a, args }),
      };
    }

    it(`refuses a message or task over ${MAX} characters, naming the field and the limit`, async () => {
      const { target, call } = await world();
      expectError(
        await call("sessions_send", { sessionKey: target, message: "m".repeat(MAX + 1), timeoutSeconds: 0 }),
        400,
        "invalid_request",
        `args: \`message\`: must be at most ${MAX} characters (got ${MAX + 1}); send a shorter message, or several`,
      );
      expectError(
        await call("sessions_spawn", { task: "t".repeat(MAX + 1) }),
        400,
        "invalid_request",
        `args: \`task\`: must be at most ${MAX} characters (got ${MAX + 1}); describe the task more briefly`,
      );
    });

    it(`accepts exactly ${MAX} characters`, async () => {
      const { target, call } = await world();
      const sent = await call("sessions_send", {
        sessionKey: target,
        message: "m".repeat(MAX),
        timeoutSeconds: 0,
      });
      expect(sent.status).toBe(200);
      const spawned = await call("sessions_spawn", { task: "t".repeat(MAX) });
      expect(spawned.status).toBe(200);
      for (const res of [sent, spawned]) {
        expect(await waitRun(res.body.result?.runId as string)).toMatchObject({ status: "ok" });
      }
    });

    it("tells the model the limit in the JSON schema", async () => {
      // The schema the model is given, as the agent loop converts it.
      const jsonSchema = (name: string) =>
        asSchema(tool({ description: "", inputSchema: registered(name).schema as never }).inputSchema)
          .jsonSchema;
      expect(await jsonSchema("sessions_send")).toMatchObject({
        properties: { message: { maxLength: MAX } },
      });
      expect(await jsonSchema("sessions_spawn")).toMatchObject({ properties: { task: { maxLength: MAX } } });
    });
  });

  it("answers a tool that throws with 500 internal, without the stack", async () => {
    vi.spyOn(registered("current_time"), "execute").mockRejectedValue(new Error("boom at secret/path.ts:1"));
    vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await post(undefined, { tool: "current_time" });
    expectError(res, 500, "internal", "tool failed; see the gateway logs");
  });

  it("refuses a missing or wrong bearer token with 401 unauthorized", async () => {
    expectError(
      await post(undefined, { tool: "current_time" }, { authorization: "" }),
      401,
      "unauthorized",
      /missing bearer token/,
    );
    expectError(
      await post(undefined, { tool: "current_time" }, { authorization: "Bearer nope" }),
      401,
      "unauthorized",
      "invalid bearer token",
    );
  });

  it("is closed with 503 while GATEWAY_TOKEN is unset", async () => {
    const { GATEWAY_TOKEN: _unset, ...rest } = env;
    const res = await post(undefined, { tool: "current_time" }, {}, rest as unknown as Env);
    expect(res.status).toBe(503);
    expect(res.body.error?.message).toContain("GATEWAY_TOKEN");
  });

  it("refuses a body over 1 MB with 413", async () => {
    const res = await post(undefined, { tool: "current_time", args: { pad: "x".repeat(1024 * 1024) } });
    expect(res.status).toBe(413);
  });

  it("answers another method with 405 naming POST", async () => {
    const res = await exports.default.fetch("http://gw.test/tools/invoke", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });
});
