/**
 * A scripted Anthropic Messages API on 127.0.0.1 (`POST /v1/messages`), speaking its wire
 * format: `system` beside `messages`, content blocks (`text`, `tool_use`, `tool_result`,
 * `thinking` with a signature), `stop_reason`, `usage.input_tokens/output_tokens`, errors as
 * `{ type: "error", error: { type, message } }` with a `retry-after` header on 429.
 *
 * It checks what the real API checks that matters here: the `x-api-key` and
 * `anthropic-version` headers, and, when thinking is on, that an assistant turn holding
 * `tool_use` starts with the signed thinking block this server sent (the real API answers 400
 * otherwise). Every request is recorded for assertions.
 */

import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listenOnLoopback } from "../../../scripts/lib/local-server.ts";
import { readBody } from "./http-fake.ts";

/**
 * A step's usage as the API reports it: `input` is the uncached input only; `cacheRead` and
 * `cacheWrite` (`cache_read_input_tokens`, `cache_creation_input_tokens`) come beside it.
 */
export interface AnthropicUsage {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

export type AnthropicStep =
  | { text: string; thinking?: string; usage?: AnthropicUsage }
  | {
      toolUse: { name: string; input?: unknown; id?: string };
      thinking?: string;
      usage?: AnthropicUsage;
    }
  | { status: number; message?: string; retryAfter?: string };

export interface AnthropicBlock {
  type: string;
  text?: string;
  thinking?: string;
  signature?: string;
  id?: string;
  name?: string;
  input?: unknown;
  tool_use_id?: string;
  content?: unknown;
  is_error?: boolean;
}

export interface AnthropicRequest {
  apiKey: string | undefined;
  version: string | undefined;
  body: {
    model: string;
    max_tokens: number;
    stream?: boolean;
    system?: Array<{ type: string; text: string }> | string;
    messages: Array<{ role: string; content: string | AnthropicBlock[] }>;
    tools?: Array<{ name: string; description?: string; input_schema: unknown }>;
    thinking?: { type: string; budget_tokens?: number };
  };
  /** The status this server answered with. */
  status: number;
}

export interface FakeAnthropic {
  /** Base URL for `models.providers.<id>.baseUrl` (the SDK appends `/messages`). */
  baseUrl: string;
  requests: AnthropicRequest[];
  push(...steps: AnthropicStep[]): void;
  reset(): void;
  close(): Promise<void>;
}

const API_KEY = "sk-ant-e2e-key";
export const FAKE_ANTHROPIC_KEY = API_KEY;

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function error(type: string, message: string) {
  return { type: "error", error: { type, message } };
}

export async function startFakeAnthropic(): Promise<FakeAnthropic> {
  const requests: AnthropicRequest[] = [];
  let script: AnthropicStep[] = [];
  /** Signatures this server issued, so a replayed thinking block can be checked like the API does. */
  const signatures = new Map<string, string>();
  let n = 0;

  /**
   * The real API's rule: with thinking on, the assistant turns of the tool-use cycle in progress
   * (after the last user message that is not only tool results) start with their thinking block.
   * Earlier turns may have lost theirs.
   */
  function thinkingViolation(body: AnthropicRequest["body"]): string | undefined {
    if (body.thinking?.type !== "enabled") return undefined;
    const onlyToolResults = (m: AnthropicRequest["body"]["messages"][number]) =>
      typeof m.content !== "string" && m.content.every((b) => b.type === "tool_result");
    const cycleStart = body.messages.findLastIndex((m) => m.role === "user" && !onlyToolResults(m));
    for (const [i, m] of body.messages.entries()) {
      if (i < cycleStart || m.role !== "assistant" || typeof m.content === "string") continue;
      if (!m.content.some((b) => b.type === "tool_use")) continue;
      const first = m.content[0];
      if (first?.type !== "thinking") {
        return `messages.${i}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first?.type}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block.`;
      }
      if (!first.signature || signatures.get(first.signature) !== first.thinking) {
        return `messages.${i}.content.0: Invalid \`signature\` in \`thinking\` block`;
      }
    }
    return undefined;
  }

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    if (req.method !== "POST" || req.url !== "/v1/messages") {
      return send(res, 404, error("not_found_error", `no route ${req.method} ${req.url}`));
    }
    const record: AnthropicRequest = {
      apiKey: req.headers["x-api-key"] as string | undefined,
      version: req.headers["anthropic-version"] as string | undefined,
      body: JSON.parse(raw) as AnthropicRequest["body"],
      status: 0,
    };
    requests.push(record);
    const answer = (status: number, body: unknown, headers?: Record<string, string>) => {
      record.status = status;
      send(res, status, body, headers);
    };
    if (record.apiKey !== API_KEY) return answer(401, error("authentication_error", "invalid x-api-key"));
    if (!record.version)
      return answer(400, error("invalid_request_error", "anthropic-version: header is required"));
    if (record.body.stream) return answer(400, error("invalid_request_error", "this fake does not stream"));
    const violation = thinkingViolation(record.body);
    if (violation) return answer(400, error("invalid_request_error", violation));

    const step = script.shift() ?? { text: "fallback answer" };
    if ("status" in step) {
      const type =
        step.status === 429 ? "rate_limit_error" : step.status >= 500 ? "api_error" : "invalid_request_error";
      return answer(
        step.status,
        error(type, step.message ?? `fake anthropic error ${step.status}`),
        step.retryAfter ? { "retry-after": step.retryAfter } : {},
      );
    }
    n++;
    const content: AnthropicBlock[] = [];
    if (step.thinking && record.body.thinking?.type === "enabled") {
      const signature = `sig-${n}-${Math.random().toString(36).slice(2)}`;
      signatures.set(signature, step.thinking);
      content.push({ type: "thinking", thinking: step.thinking, signature });
    }
    if ("toolUse" in step) {
      content.push({
        type: "tool_use",
        id: step.toolUse.id ?? `toolu_fake_${n}`,
        name: step.toolUse.name,
        input: step.toolUse.input ?? {},
      });
    } else {
      content.push({ type: "text", text: step.text });
    }
    const usage: AnthropicUsage = step.usage ?? { input: 10, output: 5 };
    return answer(200, {
      id: `msg_fake_${n}`,
      type: "message",
      role: "assistant",
      model: record.body.model,
      content,
      stop_reason: "toolUse" in step ? "tool_use" : "end_turn",
      stop_sequence: null,
      usage: {
        input_tokens: usage.input,
        output_tokens: usage.output,
        ...(usage.cacheRead === undefined ? {} : { cache_read_input_tokens: usage.cacheRead }),
        ...(usage.cacheWrite === undefined ? {} : { cache_creation_input_tokens: usage.cacheWrite }),
      },
    });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, error("api_error", `fake anthropic failed: ${String(err)}`));
    });
  });
  const port = await listenOnLoopback(server);
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    push(...steps) {
      script.push(...steps);
    },
    reset() {
      script = [];
      requests.length = 0;
    },
    async close() {
      server.close();
      server.closeAllConnections();
      await once(server, "close");
    },
  };
}
