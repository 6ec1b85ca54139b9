/**
 * `POST /mcp` (operator token, SPEC §13 later surfaces): the session tools as an MCP server over
 * the Streamable HTTP transport, stateless (a server and a transport per request, JSON
 * responses, no MCP session id). The acting session is the `x-switchboard-session-key` header
 * or `sessionKey` query parameter (default `main`), with `x-switchboard-agent-id` / `agentId`;
 * resolution, the tool set, `gateway.tools.allow` and every error message are /tools/invoke's
 * (./tool-access.ts). A failed call is an `isError` result carrying that message.
 *
 * Tools are listed and called through the SDK's request handlers rather than
 * `McpServer.registerTool`: the SDK would validate arguments with its own messages and answer
 * "Tool X not found" for a tool this session may not call, where /tools/invoke's messages name
 * the field and the setting to change.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { zodSchema } from "ai";
import { Hono } from "hono";
import { requireToken } from "../auth/bearer";
import { ConfigError, loadConfig } from "../config/load";
import { ApiError, parseJsonBody } from "../http/errors";
import { SURFACE } from "../http/surface";
import type { AgentTool } from "../tools/types";
import { VERSION } from "../version";
import {
  type ActingSession,
  errorTypeOf,
  httpTools,
  invokeTool,
  resolveActingSession,
  ToolAccessError,
} from "./tool-access";

export const SESSION_KEY_HEADER = "x-switchboard-session-key";
export const AGENT_ID_HEADER = "x-switchboard-agent-id";

/** A header or a query parameter, not two different values. */
function oneOf(header: string | undefined, query: string | undefined, names: [string, string]) {
  const [h, q] = [header?.trim() || undefined, query?.trim() || undefined];
  if (h !== undefined && q !== undefined && h !== q) {
    throw new ApiError(
      "INVALID_REQUEST",
      `the \`${names[1]}\` query parameter (${q}) and the ${names[0]} header (${h}) disagree; pass one of them`,
    );
  }
  return h ?? q;
}

async function actingSessionOf(
  env: Env,
  req: { header(n: string): string | undefined; query(n: string): string | undefined },
) {
  const sessionKey = oneOf(req.header(SESSION_KEY_HEADER), req.query("sessionKey"), [
    SESSION_KEY_HEADER,
    "sessionKey",
  ]);
  const agentId = oneOf(req.header(AGENT_ID_HEADER), req.query("agentId"), [AGENT_ID_HEADER, "agentId"]);
  if (sessionKey !== undefined && sessionKey.length > 512) {
    throw new ApiError(
      "INVALID_REQUEST",
      `\`sessionKey\` must be at most 512 characters (got ${sessionKey.length})`,
    );
  }
  try {
    return await resolveActingSession(env, loadConfig(env), { sessionKey, agentId });
  } catch (error) {
    if (error instanceof ToolAccessError) throw new ApiError("INVALID_REQUEST", error.message);
    // Past the operator token: the caller may see what is wrong with the config.
    if (error instanceof ConfigError) throw new ApiError("INTERNAL", error.message);
    throw error;
  }
}

/** The JSON Schema the agent loop gives the model for the same tool (the AI SDK's conversion). */
const inputSchemas = new WeakMap<AgentTool, Tool["inputSchema"]>();

async function inputSchemaOf(tool: AgentTool): Promise<Tool["inputSchema"]> {
  let schema = inputSchemas.get(tool);
  if (!schema) {
    schema = (await zodSchema(tool.schema).jsonSchema) as Tool["inputSchema"];
    inputSchemas.set(tool, schema);
  }
  return schema;
}

function success(result: unknown): CallToolResult {
  const structured = typeof result === "object" && result !== null && !Array.isArray(result);
  return {
    content: [{ type: "text", text: JSON.stringify(result) ?? "null" }],
    ...(structured ? { structuredContent: result as Record<string, unknown> } : {}),
  };
}

function failure(type: string, message: string): CallToolResult {
  return {
    content: [{ type: "text", text: message }],
    structuredContent: { error: { type, message } },
    isError: true,
  };
}

/** One call, answered as /tools/invoke would answer it, but as an MCP tool result. */
async function callTool(
  env: Env,
  acting: ActingSession,
  name: string,
  args: unknown,
): Promise<CallToolResult> {
  try {
    // The same well-formed strings /tools/invoke's body parsing gives (lone surrogates → U+FFFD).
    const wellFormed = parseJsonBody(JSON.stringify(args ?? {}));
    return success(await invokeTool(env, acting, name, wellFormed));
  } catch (error) {
    if (error instanceof ToolAccessError) return failure(error.type, error.message);
    if (error instanceof ApiError) return failure(errorTypeOf(error), error.message);
    if (error instanceof ConfigError) return failure("internal", error.message);
    console.error("mcp tool call failed", error);
    return failure("internal", "tool failed; see the gateway logs");
  }
}

function serverFor(env: Env, acting: ActingSession): McpServer {
  const mcp = new McpServer(
    { name: "switchboard", version: VERSION },
    {
      // The SDK's default validator (ajv) generates code, which Workers forbid.
      jsonSchemaValidator: new CfWorkerJsonSchemaValidator(),
      instructions: `Switchboard session tools, acting as session ${acting.sessionKey} (agent ${acting.agentId}).`,
    },
  );
  mcp.server.registerCapabilities({ tools: { listChanged: false } });
  mcp.server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: await Promise.all(
      httpTools(acting).map(async (t) => ({
        name: t.name,
        description: t.description,
        inputSchema: await inputSchemaOf(t),
      })),
    ),
  }));
  mcp.server.setRequestHandler(CallToolRequestSchema, (request) =>
    callTool(env, acting, request.params.name, request.params.arguments),
  );
  return mcp;
}

export const mcp = new Hono<{ Bindings: Env }>().post(
  SURFACE.mcp.path,
  requireToken("GATEWAY_TOKEN"),
  async (c) => {
    const acting = await actingSessionOf(c.env, c.req);
    const server = serverFor(c.env, acting);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    await server.connect(transport);
    try {
      // JSON responses: the answer is complete when this resolves, so the server can close.
      return await transport.handleRequest(c.req.raw);
    } finally {
      await server.close();
    }
  },
);
