/**
 * Running agent tools over HTTP as a session, shared by `POST /tools/invoke` and `POST /mcp`
 * (SPEC §13): which session acts (a session key, default `main`, and an agent), which tools
 * it may call over HTTP (its own tool set, minus `sessions_send`/`sessions_spawn` unless
 * `gateway.tools.allow` lists them), and one call by name with its arguments, whose failures
 * are `ToolAccessError`s typed like OpenClaw's `{ type, message }` errors.
 */
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import type { AgentConfig } from "../config/agents";
import type { Config } from "../config/schema";
import { findSession, getSession, type SessionRow } from "../db/queries";
import { type ApiError, parseInput } from "../http/errors";
import { defaultAgentId } from "../keys/agent-binding";
import { fromToolKey, storedKeyForms } from "../keys/canonical-key";
import { normalizeAgentId } from "../keys/ids";
import { agentIdOfKey, UNKNOWN_KEY } from "../keys/session-key";
import { actorSessions } from "../session/client";
import { findTool, toolsForSession } from "../tools/registry";
import { type AgentTool, isToolFailure, type ToolContext } from "../tools/types";

/** Tools that act on other sessions' runs: only over HTTP when `gateway.tools.allow` lists them. */
const HTTP_GATED = new Set(["sessions_send", "sessions_spawn", "subagents", "sessions_yield"]);

export type ToolErrorType =
  | "invalid_request"
  | "tool_error"
  | "forbidden"
  | "not_found"
  | "unauthorized"
  | "internal";

export class ToolAccessError extends Error {
  constructor(
    readonly type: ToolErrorType,
    readonly status: ContentfulStatusCode,
    message: string,
  ) {
    super(message);
  }
}

function invalid(error: unknown): never {
  throw new ToolAccessError("invalid_request", 400, error instanceof Error ? error.message : String(error));
}

/** Parses with a zod schema; a failure is a 400 `invalid_request` naming the field(s). */
export function parseOrInvalid<S extends z.ZodType>(schema: S, data: unknown, prefix = ""): z.output<S> {
  try {
    return parseInput(schema, data);
  } catch (error) {
    invalid(prefix && error instanceof Error ? `${prefix}${error.message}` : error);
  }
}

/** The session a tool runs as, with what it may call. */
export interface ActingSession {
  sessionKey: string;
  agentId: string;
  /** Read only for keys that do not name their agent; absent too while the session has never been used. */
  entry: SessionRow | undefined;
  agent: AgentConfig | undefined;
  /** The session's own tools (config and agent allow/deny, the sub-agent rule). */
  available: AgentTool[];
  config: Config;
}

/**
 * The acting session: `sessionKey` (default `main`) canonicalized for `agentId` (default: the
 * default agent). Its agent is the key's own (`agent:<id>:…`), else the stored entry's (cron,
 * hook and node keys), else `agentId`; an explicit `agentId` that disagrees is a 400.
 */
export async function resolveActingSession(
  env: Env,
  config: Config,
  given: { sessionKey?: string | undefined; agentId?: string | undefined },
): Promise<ActingSession> {
  const key = given.sessionKey ?? "main";
  const requested = given.agentId ? normalizeAgentId(given.agentId) : defaultAgentId(config.agents.list);
  const configured = config.agents.list.map((a) => a.id);
  if (given.agentId && configured.length && !configured.includes(requested)) {
    invalid(`\`agentId\` "${requested}" is not a configured agent (known: ${configured.join(", ")})`);
  }
  let sessionKey: string;
  try {
    sessionKey = fromToolKey(key, requested, config.session);
  } catch (error) {
    invalid(`\`sessionKey\`: ${error instanceof Error ? error.message : error}`);
  }
  if (sessionKey === UNKNOWN_KEY) invalid(`\`sessionKey\` ${key} is reserved`);
  // A key typed in another case than its session is stored in acts as that session (SPEC §2).
  const forms = storedKeyForms(sessionKey);
  if (forms.length > 1) sessionKey = (await findSession(env, forms))?.key ?? sessionKey;
  // A key naming its agent needs no read; the others (cron, hook, node keys) are owned by the
  // agent their stored entry names. Tools read the entry themselves when they need it.
  const keyAgent = agentIdOfKey(sessionKey);
  const entry = keyAgent ? undefined : await getSession(env, sessionKey);
  const owner = keyAgent ?? entry?.agentId;
  if (given.agentId && owner && owner !== requested) {
    invalid(`\`sessionKey\` ${key} belongs to agent ${owner}, not \`agentId\` ${requested}`);
  }
  const agentId = owner ?? requested;
  const agent = config.agents.list.find((a) => a.id === agentId);
  return {
    sessionKey,
    agentId,
    entry,
    agent,
    available: toolsForSession(sessionKey, agent, config),
    config,
  };
}

function allowedOverHttp(name: string, config: Config): boolean {
  return !HTTP_GATED.has(name) || config.gateway.tools.allow.includes(name);
}

/** The tools the acting session may call over HTTP. */
export function httpTools(acting: ActingSession): AgentTool[] {
  return acting.available.filter((t) => allowedOverHttp(t.name, acting.config));
}

/** The tool `name` if the acting session may call it over HTTP; else a 404 saying why not. */
export function httpTool(acting: ActingSession, name: string): AgentTool {
  const tool = findTool(name);
  if (!tool) {
    throw new ToolAccessError(
      "not_found",
      404,
      `unknown tool "${name}" (tools of this session: ${acting.available.map((t) => t.name).join(", ")})`,
    );
  }
  if (!acting.available.includes(tool)) {
    throw new ToolAccessError(
      "not_found",
      404,
      `tool "${name}" is not available to session ${acting.sessionKey} (see tools.allow/tools.deny, agents.list[].tools and tools.subagents.tools)`,
    );
  }
  if (!allowedOverHttp(name, acting.config)) {
    throw new ToolAccessError(
      "not_found",
      404,
      `tool "${name}" is not allowed over HTTP; add it to gateway.tools.allow to enable it`,
    );
  }
  return tool;
}

/**
 * Runs tool `name` as the acting session with the caller's raw arguments and returns its result.
 * Throws `ToolAccessError`: not_found (unknown, unavailable or not allowed over HTTP),
 * invalid_request (arguments failing the tool's schema, prefixed `args: `), forbidden (the tool
 * refused by policy) or tool_error (the tool's own error result). A tool that throws is left to
 * the caller's error handler.
 */
export async function invokeTool(
  env: Env,
  acting: ActingSession,
  name: string,
  rawArgs: unknown,
  opts: { idempotencyKey?: string | undefined } = {},
): Promise<unknown> {
  const tool = httpTool(acting, name);
  const args = parseOrInvalid(tool.schema, rawArgs ?? {}, "args: ");
  const ctx: ToolContext = {
    caller: {
      sessionKey: acting.sessionKey,
      agentId: acting.agentId,
      trigger: "http",
      ...(acting.entry ? { entry: acting.entry } : {}),
    },
    sessions: actorSessions(env),
    // Retries with the same idempotency key give the tool the same call id, so tools that
    // derive run ids from it (sessions_send, sessions_spawn) do not act twice.
    toolCallId: opts.idempotencyKey ? `http:${opts.idempotencyKey}` : crypto.randomUUID(),
    config: acting.config,
    env,
  };
  const result = await tool.execute(args, ctx);
  if (isToolFailure(result)) {
    if (result.status === "forbidden") throw new ToolAccessError("forbidden", 403, result.error);
    throw new ToolAccessError("tool_error", 400, result.error);
  }
  return result;
}

const TYPE_OF_CODE: Partial<Record<ApiError["code"], ToolErrorType>> = {
  INVALID_REQUEST: "invalid_request",
  UNAUTHORIZED: "unauthorized",
  FORBIDDEN: "forbidden",
  NOT_FOUND: "not_found",
};

/** An `ApiError` (thrown below the tools, or by the auth guard) as an OpenClaw error type. */
export function errorTypeOf(error: ApiError): string {
  return TYPE_OF_CODE[error.code] ?? error.code.toLowerCase();
}
