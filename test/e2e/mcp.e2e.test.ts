/**
 * POST /mcp against `wrangler dev`, driven by the MCP SDK's own client over Streamable HTTP
 * (SPEC §13 later surfaces): the tools and their schemas, a sessions_send that waits for the
 * echo model's reply, a call hidden by visibility answering as /tools/invoke does, and a bad
 * token.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GATEWAY_TOKEN, type Gateway, startGateway } from "./support/gateway.ts";

const TARGET = "agent:main:target";

let gw: Gateway;
const clients: Client[] = [];

beforeAll(async () => {
  gw = await startGateway({
    config: {
      agents: { list: [{ id: "main", default: true }, { id: "other" }] },
      tools: { sessions: { visibility: "agent" } },
      gateway: { tools: { allow: ["sessions_send"] } },
    },
  });
  // The target session, with one finished run of the echo model.
  const { runId } = await gw.call<{ runId: string }>("agent", { sessionKey: TARGET, message: "hello" });
  const wait = await gw.call<{ status: string }>("agent.wait", { runId, timeoutMs: 30_000 });
  expect(wait.status).toBe("ok");
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await gw?.dispose();
});

async function connect(headers: Record<string, string> = {}, token = GATEWAY_TOKEN) {
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}`, ...headers } },
  });
  const client = new Client({ name: "switchboard-e2e", version: "1.0.0" });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function invoke(body: Record<string, unknown>) {
  const res = await gw.fetch("/tools/invoke", {
    method: "POST",
    headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    body: (await res.json()) as { ok: boolean; result?: unknown; error?: { type: string; message: string } },
  };
}

const textOf = (result: CallToolResult) => {
  const [part] = result.content;
  return part?.type === "text" ? part.text : undefined;
};

describe("POST /mcp with the MCP SDK client", () => {
  it("lists the session tools with their input schemas", async () => {
    const client = await connect();
    expect(client.getServerVersion()?.name).toBe("switchboard");
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      "current_time",
      "sessions_list",
      "sessions_history",
      "sessions_search",
      "sessions_send",
      "agents_list",
      "session_status",
      "memory_read",
      "memory_write",
    ]);
    const send = tools.find((t) => t.name === "sessions_send");
    expect(send?.inputSchema).toMatchObject({
      type: "object",
      properties: {
        sessionKey: { type: "string" },
        message: { type: "string", maxLength: 32_000 },
        timeoutSeconds: expect.any(Object),
      },
    });
  });

  it("calls sessions_list", async () => {
    const client = await connect();
    const result = (await client.callTool({ name: "sessions_list" })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    const listed = result.structuredContent as { sessions: Array<{ key: string }> };
    expect(listed.sessions.map((s) => s.key)).toContain(TARGET);
    expect(JSON.parse(textOf(result) ?? "")).toEqual(listed);
  });

  it("sends to a session with sessions_send and waits for its reply", async () => {
    const client = await connect();
    const result = (await client.callTool({
      name: "sessions_send",
      arguments: { sessionKey: TARGET, message: "ping over mcp", timeoutSeconds: 30 },
    })) as CallToolResult;
    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({
      status: "ok",
      reply: "echo: ping over mcp",
      sessionKey: TARGET,
    });
  });

  it("answers a session hidden by visibility as /tools/invoke does", async () => {
    // Agent `other` may not see agent main's sessions (visibility agent, no agentToAgent).
    const client = await connect({ "x-switchboard-agent-id": "other" });
    const result = (await client.callTool({
      name: "sessions_history",
      arguments: { sessionKey: TARGET },
    })) as CallToolResult;
    const viaInvoke = await invoke({
      tool: "sessions_history",
      agentId: "other",
      args: { sessionKey: TARGET },
    });
    expect(viaInvoke.status).toBe(400);
    expect(viaInvoke.body.error).toEqual({ type: "tool_error", message: `session not found: ${TARGET}` });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(viaInvoke.body.error?.message);
    expect(result.structuredContent).toEqual({ error: viaInvoke.body.error });
  });

  it("fails to connect with a bad token (401)", async () => {
    await expect(connect({}, "not-the-token")).rejects.toMatchObject({ code: 401 });
  });
});
