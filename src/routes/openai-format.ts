/**
 * The OpenAI-compatible API's wire shapes (SPEC §13 later surfaces): which agent a `model`
 * names, which session a request runs in, which message is the run's input, and the
 * `chat.completion`, `chat.completion.chunk`, model list and error objects sent back. Pure: no I/O.
 *
 * - `model` is `switchboard/<agentId>` or `<agentId>`; the served models are the configured
 *   agents (the default agent `main` when `agents.list` is empty).
 * - The session is the `x-switchboard-session-key` header (canonicalized for the named agent),
 *   else `user` (keyed like a direct chat from channel `openai`, so `session.dmScope` and
 *   `identityLinks` apply), else a fresh `agent:<agentId>:openai:dm:<uuid>` per request.
 * - The last `user` message is the input; earlier messages are ignored, because the session
 *   already holds its history.
 */
import { z } from "zod";
import type { Config } from "../config/schema";
import { defaultAgentId } from "../keys/agent-binding";
import { canonicalizeSessionKey } from "../keys/canonical-key";
import { agentIdOfKey, isReservedKey, resolveSessionKey, type SessionKeyConfig } from "../keys/session-key";
import type { WaitResult } from "../runs/types";

export const MODEL_PREFIX = "switchboard/";
export const OPENAI_CHANNEL = "openai";
/** Names the session to run in; the answer carries the one used, so a client can continue it. */
export const SESSION_HEADER = "x-switchboard-session-key";
export const RUN_HEADER = "x-switchboard-run-id";
/** How long to wait for the reply, in seconds (at most, and by default, `MAX_WAIT_SECONDS`). */
export const TIMEOUT_HEADER = "x-switchboard-timeout-seconds";
export const MAX_WAIT_SECONDS = 600;
/** The same cap as the RPC's `agent` and `chat.send` messages. */
const MAX_INPUT_CHARS = 200_000;

// ─── errors ──────────────────────────────────────────────────────────────────────────────────

export type OpenAIErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "rate_limit_error"
  | "server_error"
  | "timeout_error";

export type OpenAIStatus = 400 | 401 | 403 | 404 | 409 | 413 | 429 | 500 | 503 | 504;

/**
 * An error answered as OpenAI's `{ error: { message, type, code } }`. `retry: false` tells the
 * official clients (header `x-should-retry`) not to send the request again: once a run has been
 * queued, a retry would run the message a second time.
 */
export class OpenAIError extends Error {
  constructor(
    readonly status: OpenAIStatus,
    readonly type: OpenAIErrorType,
    readonly code: string,
    message: string,
    readonly retry = true,
  ) {
    super(message);
  }

  body() {
    return { error: { message: this.message, type: this.type, code: this.code } };
  }
}

const OF_API_CODE: Record<string, [OpenAIStatus, OpenAIErrorType, string]> = {
  INVALID_REQUEST: [400, "invalid_request_error", "invalid_request"],
  UNAUTHORIZED: [401, "authentication_error", "invalid_api_key"],
  FORBIDDEN: [403, "permission_error", "forbidden"],
  NOT_FOUND: [404, "invalid_request_error", "not_found"],
  CONFLICT: [409, "invalid_request_error", "conflict"],
  PAYLOAD_TOO_LARGE: [413, "invalid_request_error", "request_too_large"],
  RATE_LIMITED: [429, "rate_limit_error", "rate_limit_exceeded"],
  UNAVAILABLE: [503, "server_error", "unavailable"],
};

/** The gateway's own error codes (`ApiError`) in OpenAI's terms; anything else is a 500. */
export function openAIErrorOf(code: string, message: string): OpenAIError {
  const [status, type, openAICode] = OF_API_CODE[code] ?? [500, "server_error", "internal_error"];
  // An unset GATEWAY_TOKEN stays unset for a while: retrying at once only delays the answer.
  return new OpenAIError(status, type, openAICode, message, status !== 503);
}

function invalid(message: string): OpenAIError {
  return new OpenAIError(400, "invalid_request_error", "invalid_request", message);
}

// ─── request ─────────────────────────────────────────────────────────────────────────────────

const Message = z.looseObject({ role: z.string().min(1), content: z.unknown().optional() });

/**
 * `POST /v1/chat/completions`. Loose: the fields clients send that have no meaning here
 * (`temperature`, `max_tokens`, `tools`, `response_format`, …) are accepted and ignored; the
 * agent's own model, prompt and tools apply.
 */
export const ChatCompletionBody = z.looseObject({
  model: z.string().trim().min(1).max(200),
  messages: z.array(Message).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  user: z.string().max(256).nullish(),
  n: z.literal(1).nullish(),
});
export type ChatCompletionRequest = z.output<typeof ChatCompletionBody>;

/** The agents served as models: the configured ones, else the default agent. */
export function servedAgents(config: Config): string[] {
  const ids = config.agents.list.map((a) => a.id);
  return ids.length ? ids : [defaultAgentId([])];
}

export function modelId(agentId: string): string {
  return `${MODEL_PREFIX}${agentId}`;
}

/** The agent a `model` names; an unknown model is a 404 naming the served ones. */
export function agentOfModel(model: string, served: readonly string[]): string {
  const lowered = model.trim().toLowerCase();
  const id = lowered.startsWith(MODEL_PREFIX) ? lowered.slice(MODEL_PREFIX.length) : lowered;
  if (served.includes(id)) return id;
  throw new OpenAIError(
    404,
    "invalid_request_error",
    "model_not_found",
    `The model \`${model}\` does not exist: models are agents (${served.map(modelId).join(", ")})`,
  );
}

/** The run's input: the last `user` message's text (a string, or its text parts joined by newlines). */
export function lastUserText(messages: ChatCompletionRequest["messages"]): string {
  const index = messages.findLastIndex((m) => m.role === "user");
  const message = messages[index];
  if (!message) throw invalid("`messages` has no message with role `user`: the last one is the run's input");
  const field = `messages[${index}].content`;
  let text: string;
  if (typeof message.content === "string") text = message.content;
  else if (Array.isArray(message.content)) {
    const texts = message.content.map((part: unknown, i) => {
      const p = part as { type?: unknown; text?: unknown } | null;
      if (p?.type === "text" && typeof p.text === "string") return p.text;
      const type = typeof p?.type === "string" ? p.type : typeof part;
      throw invalid(`\`${field}[${i}]\` is a ${type} part; only text parts are supported`);
    });
    text = texts.join("\n");
  } else throw invalid(`\`${field}\` must be a string or an array of text parts`);
  text = text.trim();
  if (!text) throw invalid(`\`${field}\` is empty: the last user message is the run's input`);
  if (text.length > MAX_INPUT_CHARS)
    throw invalid(`\`${field}\` is longer than ${MAX_INPUT_CHARS} characters (got ${text.length})`);
  return text;
}

/** The wait bound in milliseconds from the timeout header (whole seconds, 1..MAX_WAIT_SECONDS). */
export function waitBoundMs(header: string | undefined): number {
  if (header === undefined) return MAX_WAIT_SECONDS * 1000;
  const seconds = Number(header.trim());
  if (!/^\d+$/.test(header.trim()) || seconds < 1 || seconds > MAX_WAIT_SECONDS) {
    throw invalid(
      `\`${TIMEOUT_HEADER}\` must be whole seconds from 1 to ${MAX_WAIT_SECONDS} (got "${header}")`,
    );
  }
  return seconds * 1000;
}

export type SessionChoice = { key: string; by: "header" | "user" | "fresh" };

/**
 * The session a request runs in: the header's key, else the `user`'s direct-chat key, else a
 * fresh per-request key built from `freshId`. A header key of another agent is a 400; an
 * agent-less header key (`hook:…`, `cron:…`) is checked against its stored entry by the caller.
 */
export function chooseSessionKey(
  input: { header?: string | undefined; user?: string | null | undefined; agentId: string; freshId: string },
  cfg: SessionKeyConfig,
): SessionChoice {
  const { agentId } = input;
  if (input.header !== undefined) {
    let key: string;
    try {
      key = canonicalizeSessionKey(input.header, cfg, agentId);
    } catch (error) {
      throw invalid(`\`${SESSION_HEADER}\`: ${error instanceof Error ? error.message : error}`);
    }
    if (isReservedKey(key) && key !== "global") throw invalid(`\`${SESSION_HEADER}\` ${key} is reserved`);
    const owner = agentIdOfKey(key);
    if (owner && owner !== agentId) throw notTheAgents(key, owner, agentId);
    return { key, by: "header" };
  }
  const user = input.user?.trim();
  if (user) {
    const key = resolveSessionKey({ agentId, channel: OPENAI_CHANNEL, chatType: "direct", from: user }, cfg);
    return { key, by: "user" };
  }
  // Whatever the dmScope, a client that names no session gets one of its own.
  const fresh = { ...cfg, scope: "per-sender" as const, dmScope: "per-channel-peer" as const };
  const key = resolveSessionKey(
    { agentId, channel: OPENAI_CHANNEL, chatType: "direct", from: input.freshId },
    fresh,
  );
  return { key, by: "fresh" };
}

export function notTheAgents(key: string, owner: string, agentId: string): OpenAIError {
  return invalid(
    `\`${SESSION_HEADER}\` ${key} belongs to agent ${owner}, not to the model's agent ${agentId} (use model ${modelId(owner)})`,
  );
}

// ─── answers ─────────────────────────────────────────────────────────────────────────────────

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A run row's recorded usage (`{ inputTokens, outputTokens }`) in OpenAI's terms. */
export function usageOf(recorded: unknown): Usage {
  const u = (recorded ?? {}) as { inputTokens?: unknown; outputTokens?: unknown };
  const count = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.round(v) : 0);
  const prompt = count(u.inputTokens);
  const completion = count(u.outputTokens);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** What every object of one answer shares. */
export interface AnswerBase {
  id: string;
  created: number;
  model: string;
}

export function answerBase(runId: string, agentId: string, now: number): AnswerBase {
  return { id: `chatcmpl-${runId}`, created: Math.floor(now / 1000), model: modelId(agentId) };
}

export function completion(base: AnswerBase, reply: string, usage: Usage) {
  return {
    ...base,
    object: "chat.completion" as const,
    choices: [
      { index: 0, message: { role: "assistant" as const, content: reply }, finish_reason: "stop" as const },
    ],
    usage,
  };
}

type Delta = { role?: "assistant"; content?: string };

/** One `chat.completion.chunk`; with `include_usage`, every chunk carries `usage: null` but the last. */
export function chunk(base: AnswerBase, delta: Delta, finish: "stop" | null, includeUsage: boolean) {
  return {
    ...base,
    object: "chat.completion.chunk" as const,
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

/** The chunks after the first (role) one: the reply as one content delta, the stop, the usage. */
export function closingChunks(
  base: AnswerBase,
  reply: string,
  usage: Usage,
  includeUsage: boolean,
): object[] {
  const out: object[] = [];
  if (reply) out.push(chunk(base, { content: reply }, null, includeUsage));
  out.push(chunk(base, {}, "stop", includeUsage));
  if (includeUsage) out.push({ ...base, object: "chat.completion.chunk", choices: [], usage });
  return out;
}

export function modelObject(agentId: string) {
  // Agents have no creation time; a constant keeps the list stable.
  return { id: modelId(agentId), object: "model" as const, created: 0, owned_by: "switchboard" };
}

export function modelList(config: Config) {
  return { object: "list" as const, data: servedAgents(config).map(modelObject) };
}

/**
 * A run that did not end `ok`, as the error to answer; undefined for `ok`. None of these may be
 * retried by the client: the message is in the session already.
 */
export function outcomeError(
  result: WaitResult,
  sessionKey: string,
  waitedMs: number,
): OpenAIError | undefined {
  const { runId } = result;
  const cause = result.error ? `: ${result.error}` : "";
  switch (result.status) {
    case "ok":
      return undefined;
    case "timeout":
      if (result.runStatus === "timeout")
        return new OpenAIError(504, "timeout_error", "run_timeout", `run ${runId} timed out${cause}`, false);
      return new OpenAIError(
        504,
        "timeout_error",
        "wait_timeout",
        `no reply within ${Math.round(waitedMs / 1000)}s: run ${runId} is still ${result.runStatus} in session ${sessionKey}; it goes on, and its reply will be in the session's history (RPC chat.history, or agent.wait with this runId)`,
        false,
      );
    case "aborted":
      return new OpenAIError(500, "server_error", "run_aborted", `run ${runId} was aborted${cause}`, false);
    case "error":
      return new OpenAIError(500, "server_error", "run_failed", `run ${runId} failed${cause}`, false);
  }
}
