/**
 * `POST /tools/invoke` (operator token, SPEC §13, §17): runs one tool as a session, compatible
 * with OpenClaw's endpoint. Body `{ tool | name, args?, sessionKey? (default "main"), agentId?,
 * idempotencyKey? }`; the acting session need not exist yet, and visibility applies as that
 * session. Errors on this surface are `{ ok: false, error: { type, message } }` (OpenClaw's
 * shape), unlike the `code` of the other surfaces.
 */
import { Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { z } from "zod";
import { requireToken } from "../auth/bearer";
import { ConfigError, loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import { getSession } from "../db/queries";
import { ApiError, parseInput, parseJsonBody } from "../http/errors";
import { defaultAgentId } from "../keys/agent-binding";
import { agentIdOfKey, fromToolKey, normalizeAgentId, UNKNOWN_KEY } from "../keys/session-key";
import { actorSessions } from "../session/client";
import { findTool, toolsForSession } from "../tools/registry";
import { isToolFailure, type ToolContext } from "../tools/types";

/** Tools that act on other sessions' runs: only over HTTP when `gateway.tools.allow` lists them. */
const HTTP_GATED = new Set(["sessions_send", "sessions_spawn"]);

type ErrorType = "invalid_request" | "tool_error" | "forbidden" | "not_found" | "unauthorized" | "internal";

class InvokeError extends Error {
  constructor(
    readonly type: ErrorType,
    readonly status: ContentfulStatusCode,
    message: string,
  ) {
    super(message);
  }
}

const Body = z
  .strictObject({
    tool: z.string().trim().min(1).optional(),
    name: z.string().trim().min(1).optional(),
    args: z.record(z.string(), z.unknown()).optional(),
    sessionKey: z.string().trim().min(1).max(512).optional(),
    agentId: z.string().trim().min(1).optional(),
    idempotencyKey: z.string().min(1).max(256).optional(),
  })
  .refine((b) => b.tool !== undefined || b.name !== undefined, {
    path: ["tool"],
    message: "pass the tool's name (`name` is accepted too)",
  })
  .refine((b) => b.tool === undefined || b.name === undefined || b.tool === b.name, {
    path: ["name"],
    message: "names another tool than `tool`; pass one of them",
  });

function invalid(error: unknown): never {
  throw new InvokeError("invalid_request", 400, error instanceof Error ? error.message : String(error));
}

/** Parses with a zod schema; a failure is a 400 `invalid_request` naming the field(s). */
function parse<S extends z.ZodType>(schema: S, data: unknown, prefix = ""): z.output<S> {
  try {
    return parseInput(schema, data);
  } catch (error) {
    invalid(prefix && error instanceof Error ? `${prefix}${error.message}` : error);
  }
}

/**
 * The acting session: `sessionKey` (default `main`) canonicalized for `agentId` (default: the
 * default agent). Its agent is the key's own (`agent:<id>:…`), else the stored entry's (cron,
 * hook and node keys), else `agentId`; an explicit `agentId` that disagrees is a 400.
 */
async function actingSession(env: Env, body: z.output<typeof Body>, config: Config) {
  const given = body.sessionKey ?? "main";
  const requested = body.agentId ? normalizeAgentId(body.agentId) : defaultAgentId(config.agents.list);
  const configured = config.agents.list.map((a) => a.id);
  if (body.agentId && configured.length && !configured.includes(requested)) {
    invalid(`\`agentId\` "${requested}" is not a configured agent (known: ${configured.join(", ")})`);
  }
  let sessionKey: string;
  try {
    sessionKey = fromToolKey(given, requested, config.session);
  } catch (error) {
    invalid(`\`sessionKey\`: ${error instanceof Error ? error.message : error}`);
  }
  if (sessionKey === UNKNOWN_KEY) invalid(`\`sessionKey\` ${given} is reserved`);
  const entry = await getSession(env, sessionKey);
  const owner = agentIdOfKey(sessionKey) ?? entry?.agentId;
  if (body.agentId && owner && owner !== requested) {
    invalid(`\`sessionKey\` ${given} belongs to agent ${owner}, not \`agentId\` ${requested}`);
  }
  return { sessionKey, agentId: owner ?? requested, entry };
}

const TYPE_OF_CODE: Partial<Record<ApiError["code"], ErrorType>> = {
  INVALID_REQUEST: "invalid_request",
  UNAUTHORIZED: "unauthorized",
  FORBIDDEN: "forbidden",
  NOT_FOUND: "not_found",
};

export const toolsInvoke = new Hono<{ Bindings: Env }>()
  .post("/invoke", requireToken("GATEWAY_TOKEN"), async (c) => {
    const config = loadConfig(c.env);
    const body = parse(Body, parseJsonBody(await c.req.text()));
    const name = (body.tool ?? body.name) as string;
    const { sessionKey, agentId, entry } = await actingSession(c.env, body, config);

    const agent = config.agents.list.find((a) => a.id === agentId);
    const available = toolsForSession(sessionKey, agent, config);
    const tool = findTool(name);
    if (!tool) {
      throw new InvokeError(
        "not_found",
        404,
        `unknown tool "${name}" (tools of this session: ${available.map((t) => t.name).join(", ")})`,
      );
    }
    if (!available.includes(tool)) {
      throw new InvokeError(
        "not_found",
        404,
        `tool "${name}" is not available to session ${sessionKey} (see tools.allow/tools.deny, agents.list[].tools and tools.subagents.tools)`,
      );
    }
    if (HTTP_GATED.has(name) && !config.gateway.tools.allow.includes(name)) {
      throw new InvokeError(
        "not_found",
        404,
        `tool "${name}" is not allowed over HTTP; add it to gateway.tools.allow to enable it`,
      );
    }
    const args = parse(tool.schema, body.args ?? {}, "args: ");

    const ctx: ToolContext = {
      caller: { sessionKey, agentId, trigger: "http", ...(entry ? { entry } : {}) },
      sessions: actorSessions(c.env),
      // Retries with the same idempotency key give the tool the same call id, so tools that
      // derive run ids from it (sessions_send, sessions_spawn) do not act twice.
      toolCallId: body.idempotencyKey ? `http:${body.idempotencyKey}` : crypto.randomUUID(),
      config,
      env: c.env,
    };
    const result = await tool.execute(args, ctx);
    if (isToolFailure(result)) {
      if (result.status === "forbidden") throw new InvokeError("forbidden", 403, result.error);
      throw new InvokeError("tool_error", 400, result.error);
    }
    return c.json({ ok: true, result });
  })
  .onError((error, c) => {
    if (error instanceof InvokeError) {
      return c.json({ ok: false, error: { type: error.type, message: error.message } }, error.status);
    }
    if (error instanceof ApiError) {
      const type = TYPE_OF_CODE[error.code] ?? error.code.toLowerCase();
      return c.json({ ok: false, error: { type, message: error.message } }, error.status);
    }
    // Past the operator token: the caller may see what is wrong with the config.
    if (error instanceof ConfigError) {
      return c.json({ ok: false, error: { type: "internal", message: error.message } }, 500);
    }
    console.error("tools/invoke failed", error);
    return c.json(
      { ok: false, error: { type: "internal", message: "tool failed; see the gateway logs" } },
      500,
    );
  });
