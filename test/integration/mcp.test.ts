/**
 * POST /mcp (SPEC §13 later surfaces): the session tools over MCP, driven by the MCP SDK's own
 * client through the Worker's fetch, compared answer for answer with POST /tools/invoke.
 */
import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ConfigInput } from "../../src/config/schema";
import { app } from "../../src/http/app";
import { findTool } from "../../src/tools/registry";
import { seedSessions, sessionRow } from "./rpc-support";
import { configText, TOKEN, waitRun } from "./support";

const MCP_URL = "http://gw.test/mcp";

function bindings(config?: ConfigInput): Env {
  return { ...env, ...(config ? { SWITCHBOARD_CONFIG: configText(config) } : {}) };
}

/** An MCP client connected to /mcp through the Worker's fetch. */
async function connect(
  opts: { config?: ConfigInput; headers?: Record<string, string>; query?: string; token?: string } = {},
) {
  const e = bindings(opts.config);
  const transport = new StreamableHTTPClientTransport(new URL(`${MCP_URL}${opts.query ?? ""}`), {
    requestInit: { headers: { authorization: `Bearer ${opts.token ?? TOKEN}`, ...opts.headers } },
    fetch: async (url, init) => app.fetch(new Request(url, init), e, createExecutionContext()),
  });
  // The client's default validator (ajv) generates code, which workerd forbids.
  const client = new Client(
    { name: "mcp-test", version: "1.0.0" },
    { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
  );
  await client.connect(transport);
  return client;
}

async function invoke(config: ConfigInput | undefined, body: Record<string, unknown>) {
  const res = await app.fetch(
    new Request("http://gw.test/tools/invoke", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    }),
    bindings(config),
    createExecutionContext(),
  );
  return {
    status: res.status,
    body: (await res.json()) as {
      ok: boolean;
      result?: Record<string, unknown>;
      error?: { type: string; message: string };
    },
  };
}

/** POST /mcp with a raw JSON-RPC body, as curl would. */
function rawPost(body: unknown, headers: Record<string, string> = {}, path = "/mcp", config?: ConfigInput) {
  return app.fetch(
    new Request(`http://gw.test${path}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${TOKEN}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...headers,
      },
      body: JSON.stringify(body),
    }),
    bindings(config),
    createExecutionContext(),
  );
}

const INITIALIZE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "curl", version: "0" } },
};

function errorText(result: CallToolResult) {
  expect(result.isError).toBe(true);
  const [part] = result.content;
  return part?.type === "text" ? part.text : undefined;
}

let n = 0;
const agentId = () => `mcp${++n}-${Date.now().toString(36)}`;

afterEach(() => {
  vi.restoreAllMocks();
});

describe("POST /mcp", () => {
  it("initializes and lists the session tools with the agent loop's JSON schemas", async () => {
    const client = await connect();
    expect(client.getServerVersion()).toMatchObject({ name: "switchboard" });
    expect(client.getInstructions()).toContain("acting as session agent:main:main");
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toEqual([
      "current_time",
      "sessions_list",
      "sessions_history",
      "sessions_search",
      "agents_list",
      "session_status",
      "memory_read",
      "memory_write",
    ]);
    const list = tools.find((t) => t.name === "sessions_list");
    expect(list?.description).toBe(findTool("sessions_list")?.description);
    expect(list?.inputSchema).toMatchObject({
      type: "object",
      properties: { limit: expect.any(Object) },
      additionalProperties: false,
    });
    await client.close();
  });

  it("lists sessions_send and sessions_spawn only when gateway.tools.allow lists them", async () => {
    const client = await connect({ config: { gateway: { tools: { allow: ["sessions_send"] } } } });
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toContain("sessions_send");
    expect(names).not.toContain("sessions_spawn");
    const send = (await client.listTools()).tools.find((t) => t.name === "sessions_send");
    expect(send?.inputSchema).toMatchObject({ properties: { message: { maxLength: 32_000 } } });
  });

  it("calls a tool: the result as JSON text and as structured content", async () => {
    const a = agentId();
    const config = { agents: { list: [{ id: a }] } };
    const client = await connect({ config, headers: { "x-switchboard-agent-id": a } });
    const result = (await client.callTool({ name: "session_status" })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ ok: true, key: "main", agentId: a, created: false });
    const [part] = result.content;
    expect(part?.type === "text" ? JSON.parse(part.text) : undefined).toEqual(result.structuredContent);
    // The same answer /tools/invoke gives.
    const viaInvoke = await invoke(config, { tool: "session_status", agentId: a });
    expect(viaInvoke.body.result).toEqual(result.structuredContent);
  });

  it("acts as the session named by the header or the query parameter", async () => {
    const a = agentId();
    const key = `agent:${a}:telegram:group:ops`;
    await seedSessions([sessionRow({ key, agentId: a, kind: "group" })]);
    const config = { agents: { list: [{ id: a }] } };
    for (const opts of [{ headers: { "x-switchboard-session-key": key } }, { query: `?sessionKey=${key}` }]) {
      const client = await connect({ config, ...opts });
      expect(client.getInstructions()).toContain(`acting as session ${key} (agent ${a})`);
      const result = (await client.callTool({ name: "session_status" })) as CallToolResult;
      expect(result.structuredContent).toMatchObject({ ok: true, key, agentId: a });
    }
  });

  it("runs sessions_send as /tools/invoke does, waiting for the reply", async () => {
    const a = agentId();
    const target = `agent:${a}:target`;
    await seedSessions([sessionRow({ key: target, agentId: a })]);
    const config = {
      agents: { list: [{ id: a }] },
      tools: { sessions: { visibility: "agent" as const } },
      gateway: { tools: { allow: ["sessions_send"] } },
    };
    const client = await connect({ config, headers: { "x-switchboard-agent-id": a } });
    const result = (await client.callTool({
      name: "sessions_send",
      arguments: { sessionKey: target, message: "ping", timeoutSeconds: 0 },
    })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const sent = result.structuredContent as { runId: string; status: string };
    expect(sent.status).toBe("accepted");
    expect(await waitRun(sent.runId)).toMatchObject({ status: "ok" });
  });

  describe("answers a failed call with isError and /tools/invoke's message", () => {
    it("a tool not available to the session, or not allowed over HTTP", async () => {
      const client = await connect({ config: { tools: { deny: ["current_time"] } } });
      const cases: Array<[string, Record<string, unknown>]> = [
        ["current_time", {}],
        ["sessions_send", { sessionKey: "main", message: "hi" }],
        ["rm_rf", {}],
      ];
      for (const [name, args] of cases) {
        const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
        const viaInvoke = await invoke({ tools: { deny: ["current_time"] } }, { tool: name, args });
        expect(viaInvoke.status).toBe(404);
        expect(errorText(result)).toBe(viaInvoke.body.error?.message);
        expect(result.structuredContent).toEqual({ error: viaInvoke.body.error });
      }
    });

    it("arguments failing the tool's schema, naming the field", async () => {
      const client = await connect();
      const result = (await client.callTool({
        name: "sessions_list",
        arguments: { limit: "ten" },
      })) as CallToolResult;
      const viaInvoke = await invoke(undefined, { tool: "sessions_list", args: { limit: "ten" } });
      expect(errorText(result)).toMatch(/^args: `limit` /);
      expect(errorText(result)).toBe(viaInvoke.body.error?.message);
    });

    it("a session hidden by visibility (tool_error) and a call refused by policy (forbidden)", async () => {
      const a = agentId();
      const other = `agent:${a}:dm:bob`;
      await seedSessions([sessionRow({ key: other, agentId: a })]);
      const config = {
        agents: { list: [{ id: a }, { id: "research" }] },
        tools: { sessions: { visibility: "self" as const } },
        gateway: { tools: { allow: ["sessions_spawn"] } },
      };
      const client = await connect({ config, headers: { "x-switchboard-agent-id": a } });
      const hidden = (await client.callTool({
        name: "sessions_history",
        arguments: { sessionKey: other },
      })) as CallToolResult;
      expect(errorText(hidden)).toBe(`session not found: ${other}`);
      expect(hidden.structuredContent).toEqual({
        error: { type: "tool_error", message: `session not found: ${other}` },
      });
      const viaInvoke = await invoke(config, {
        tool: "sessions_history",
        agentId: a,
        args: { sessionKey: other },
      });
      expect(viaInvoke.body.error).toEqual({ type: "tool_error", message: errorText(hidden) });

      const refused = (await client.callTool({
        name: "sessions_spawn",
        arguments: { task: "dig", agentId: "research" },
      })) as CallToolResult;
      expect(errorText(refused)).toMatch(/subagents\.allowAgents/);
      expect(refused.structuredContent).toMatchObject({ error: { type: "forbidden" } });
    });

    it("a tool that throws, without the stack", async () => {
      const tool = findTool("current_time");
      if (!tool) throw new Error("current_time is not registered");
      vi.spyOn(tool, "execute").mockRejectedValue(new Error("boom at secret/path.ts:1"));
      vi.spyOn(console, "error").mockImplementation(() => {});
      const client = await connect();
      const result = (await client.callTool({ name: "current_time" })) as CallToolResult;
      expect(errorText(result)).toBe("tool failed; see the gateway logs");
    });
  });

  describe("HTTP answers", () => {
    it("answers initialize to a plain POST with JSON", async () => {
      const res = await rawPost(INITIALIZE);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("application/json");
      const body = (await res.json()) as { result: { serverInfo: { name: string } } };
      expect(body.result.serverInfo.name).toBe("switchboard");
    });

    it("answers tools/list and tools/call without an initialize first, as the README's curl does", async () => {
      const version = { "mcp-protocol-version": "2025-06-18" };
      const list = await rawPost({ jsonrpc: "2.0", id: 2, method: "tools/list" }, version);
      expect(list.status).toBe(200);
      const listed = (await list.json()) as { result: { tools: Array<{ name: string }> } };
      expect(listed.result.tools.map((t) => t.name)).toContain("sessions_list");
      const call = await rawPost(
        {
          jsonrpc: "2.0",
          id: 3,
          method: "tools/call",
          params: { name: "sessions_list", arguments: { limit: 10 } },
        },
        version,
      );
      const called = (await call.json()) as { result: CallToolResult };
      expect(called.result.isError).toBeFalsy();
      expect(called.result.structuredContent).toMatchObject({ sessions: expect.any(Array) });
    });

    it("refuses a missing or wrong bearer token with 401, and the client fails to connect", async () => {
      const missing = await rawPost(INITIALIZE, { authorization: "" });
      expect(missing.status).toBe(401);
      const wrong = await rawPost(INITIALIZE, { authorization: "Bearer nope" });
      expect(wrong.status).toBe(401);
      expect(await wrong.json()).toEqual({
        ok: false,
        error: { code: "UNAUTHORIZED", message: "invalid bearer token" },
      });
      await expect(connect({ token: "nope" })).rejects.toMatchObject({ code: 401 });
    });

    it("is closed with 503 naming the secret while GATEWAY_TOKEN is unset", async () => {
      const { GATEWAY_TOKEN: _unset, ...rest } = env;
      const res = await app.fetch(
        new Request(MCP_URL, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
          body: JSON.stringify(INITIALIZE),
        }),
        rest as unknown as Env,
        createExecutionContext(),
      );
      expect(res.status).toBe(503);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain("GATEWAY_TOKEN");
    });

    it("shows an invalid config's messages to the operator, as /tools/invoke does", async () => {
      vi.spyOn(console, "error").mockImplementation(() => {});
      const res = await app.fetch(
        new Request(MCP_URL, {
          method: "POST",
          headers: {
            authorization: `Bearer ${TOKEN}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
          },
          body: JSON.stringify(INITIALIZE),
        }),
        { ...env, SWITCHBOARD_CONFIG: '{"session":{"dmScope":"sideways"}}' },
        createExecutionContext(),
      );
      expect(res.status).toBe(500);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("INTERNAL");
      expect(body.error.message).toContain("config.session.dmScope");
    });

    it("refuses a bad acting session with 400 naming it, as /tools/invoke does", async () => {
      const bad = await rawPost(INITIALIZE, { "x-switchboard-session-key": "a::b" });
      expect(bad.status).toBe(400);
      const viaInvoke = await invoke(undefined, { tool: "agents_list", sessionKey: "a::b" });
      expect(await bad.json()).toEqual({
        ok: false,
        error: { code: "INVALID_REQUEST", message: viaInvoke.body.error?.message },
      });
      const ghost = await rawPost(INITIALIZE, { "x-switchboard-agent-id": "ghost" }, "/mcp", {
        agents: { list: [{ id: "main" }] },
      });
      expect(((await ghost.json()) as { error: { message: string } }).error.message).toMatch(
        /^`agentId` "ghost" is not a configured agent/,
      );
      const both = await rawPost(
        INITIALIZE,
        { "x-switchboard-session-key": "main" },
        "/mcp?sessionKey=other",
      );
      expect(both.status).toBe(400);
      expect(((await both.json()) as { error: { message: string } }).error.message).toContain("disagree");
    });

    it("answers GET and DELETE with 405 naming POST (stateless: no server-sent stream, no session)", async () => {
      for (const method of ["GET", "DELETE"]) {
        const res = await exports.default.fetch(MCP_URL, {
          method,
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expect(res.status).toBe(405);
        expect(res.headers.get("allow")).toBe("POST");
      }
    });

    it("refuses a body over 1 MB with 413", async () => {
      const res = await rawPost({
        ...INITIALIZE,
        params: { ...INITIALIZE.params, pad: "x".repeat(1024 * 1024) },
      });
      expect(res.status).toBe(413);
    });
  });
});
