/**
 * The profiling workloads shared by `npm run profile` and `npm run ab`: a fake connector that
 * counts deliveries, the gateway config they run under, signed inbound messages, the read
 * requests (sessions_list, sessions_history, /healthz) and the warm-up that creates the 200
 * sessions they read. 127.0.0.1 only.
 */
import { createServer } from "node:http";
import { SIGNATURE_HEADER, signBody } from "../src/auth/signature.ts";

export const TOKEN = "profile-token";
export const SECRET = "profile-connector-secret";

export const MODES = ["new", "existing", "list", "history", "healthz"] as const;
export type Mode = (typeof MODES)[number];

/** The workload a command line names; throws naming the known ones. */
export function modeOf(arg: string): Mode {
  const mode = arg as Mode;
  if (!MODES.includes(mode)) throw new Error(`unknown workload ${arg} (one of ${MODES.join(", ")})`);
  return mode;
}

/** A connector that accepts every delivery and counts them. */
export async function startConnector() {
  let delivered = 0;
  let waiter: (() => void) | undefined;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      delivered++;
      waiter?.();
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    port,
    delivered: () => delivered,
    /** Waits (bounded by `capMs`) until `target` deliveries have arrived. */
    async until(target: number, capMs: number) {
      const deadline = performance.now() + capMs;
      while (delivered < target && performance.now() < deadline)
        await new Promise<void>((r) => {
          waiter = r;
          setTimeout(r, 200);
        });
    },
    close: () => server.close(),
  };
}

/** A chat-completions request, as far as `startModel` reads it. */
interface ChatRequest {
  messages?: Array<{ role?: string; content?: unknown; name?: string }>;
  tools?: Array<{ function?: { name?: string } }>;
}

/** `call:<tool> {json args}`: the text that asks `startModel` for a tool call (as the echo model reads it). */
const CALL_PATTERN = /^call:([a-zA-Z0-9_-]+)\s*(\{[\s\S]*\})?\s*$/;

/** A message's text: its string content, or its text parts joined. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((p: { type?: string; text?: unknown }) =>
      p?.type === "text" && typeof p.text === "string" ? p.text : "",
    )
    .join("");
}

/**
 * What `startModel` answers a request with: a tool call when the last user message says
 * `call:<tool> {args}` (the tool offered) and no tool result has come since; after a tool result,
 * `tool: <name> -> <result>`; else "ok".
 */
function answerOf(body: string, calls: number) {
  let request: ChatRequest = {};
  try {
    request = JSON.parse(body) as ChatRequest;
  } catch {
    // not JSON: answered "ok"
  }
  const messages = request.messages ?? [];
  const last = messages[messages.length - 1];
  if (last?.role === "tool") {
    const called = [...messages]
      .reverse()
      .find((m) => m.role === "assistant" && Array.isArray((m as { tool_calls?: unknown[] }).tool_calls)) as
      | { tool_calls: Array<{ function?: { name?: string } }> }
      | undefined;
    const name = called?.tool_calls[0]?.function?.name ?? "tool";
    return {
      message: { role: "assistant", content: `tool: ${name} -> ${textOf(last.content)}` },
      finish: "stop",
    };
  }
  const lastUser = [...messages].reverse().find((m) => m.role === "user");
  const call = CALL_PATTERN.exec(textOf(lastUser?.content).trim());
  const offered = new Set((request.tools ?? []).map((t) => t.function?.name));
  if (call?.[1] && offered.has(call[1])) {
    return {
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: `call-${calls}`, type: "function", function: { name: call[1], arguments: call[2] ?? "{}" } },
        ],
      },
      finish: "tool_calls",
    };
  }
  return { message: { role: "assistant", content: "ok" }, finish: "stop" };
}

/**
 * An OpenAI-compatible chat-completions endpoint that answers every request with a short reply
 * and its usage: a real model call over HTTP in the loop (the gateway's provider client,
 * request and response handling), at once, or after `delayMs` as a real model would. A last
 * user message `call:<tool> {args}` gets a tool call of that tool (when the request offers it),
 * and the request that carries its result the answer `tool: <tool> -> <result>` (each after
 * `delayMs`); every other request "ok".
 */
export async function startModel(delayMs = 0) {
  let calls = 0;
  let first: string | undefined;
  let last: string | undefined;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", async () => {
      calls++;
      const body = Buffer.concat(chunks).toString("utf8");
      first ??= body;
      last = body;
      const { message, finish } = answerOf(body, calls);
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          id: `cmpl-${calls}`,
          object: "chat.completion",
          created: 1,
          model: "m",
          choices: [{ index: 0, message, finish_reason: finish }],
          usage: { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13 },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    calls: () => calls,
    /** The body of the first request received (what the caller sends a model), if any. */
    firstRequest: () => first,
    /** The body of the latest request received, if any. */
    lastRequest: () => last,
    close: () => server.close(),
  };
}

/**
 * The gateway config of a workload (`list` reads under visibility "all": 50 rows per page);
 * with `modelUrl`, every turn calls the model there (`startModel`) instead of the echo model.
 */
export function workloadConfig(connectorPort: number, mode: Mode, modelUrl?: string) {
  return {
    session: { dmScope: "per-channel-peer", queue: { cap: 1000 } },
    ...(modelUrl
      ? {
          models: { providers: { http: { api: "openai-compatible", baseUrl: modelUrl } } },
          agents: { defaults: { model: "http/m" } },
        }
      : {}),
    ...(mode === "list" ? { tools: { sessions: { visibility: "all" } } } : {}),
    connectors: {
      telegram: { deliverUrl: `http://127.0.0.1:${connectorPort}/deliver`, secretEnv: "CONNECTOR_SECRET" },
    },
  };
}

export const workloadVars = { GATEWAY_TOKEN: TOKEN, CONNECTOR_SECRET: SECRET };

/** Posts one signed direct message from `from`; throws unless it is acknowledged (202). */
export async function postInbound(url: string, id: string, from: string): Promise<void> {
  const body = JSON.stringify({
    messageId: id,
    chatType: "direct",
    from,
    to: "bot",
    text: `hi ${id}`,
    timestamp: Date.now(),
  });
  const res = await fetch(`${url}/hooks/inbound/telegram`, {
    method: "POST",
    headers: { "content-type": "application/json", [SIGNATURE_HEADER]: await signBody(SECRET, body) },
    body,
  });
  await res.text();
  if (res.status !== 202) throw new Error(`inbound ${res.status}`);
}

/** The sender of message `i` of a message workload (`existing`: one of the warm-up's peers). */
export function senderOf(mode: Mode, i: number): string {
  return mode === "existing" ? `peer-${i % 200}` : `new-${i}`;
}

const invoke = (url: string, body: unknown) =>
  fetch(`${url}/tools/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

/** The read workloads: one request each, checked. */
const READS: Partial<Record<Mode, (url: string, i: number) => Promise<Response>>> = {
  list: (url) => invoke(url, { tool: "sessions_list", args: { limit: 50 } }),
  // The session the warm-up gave a long transcript reads its own newest 50 messages (visible
  // under the default visibility, tree).
  history: (url) =>
    invoke(url, {
      tool: "sessions_history",
      sessionKey: HISTORY_KEY,
      args: { sessionKey: HISTORY_KEY, limit: 50 },
    }),
  healthz: (url) => fetch(`${url}/healthz`),
};

/** Read request `i` of a read workload, or undefined for the message workloads. */
export function readOf(mode: Mode): ((url: string, i: number) => Promise<void>) | undefined {
  const read = READS[mode];
  if (!read) return undefined;
  return async (url, i) => {
    const res = await read(url, i);
    const body = await res.text();
    if (res.status !== 200) throw new Error(`${mode} ${res.status}`);
    if (mode === "list" && (JSON.parse(body) as { result: { count: number } }).result.count !== 50)
      throw new Error("list: a page with fewer than 50 rows");
    if (
      mode === "history" &&
      (JSON.parse(body) as { result: { messages: unknown[] } }).result.messages.length !== 50
    )
      throw new Error("history: a page with fewer than 50 messages");
  };
}

/** Runs `n` calls of `one` with `concurrency` at a time; returns the elapsed ms. */
export async function pool(
  n: number,
  concurrency: number,
  one: (i: number) => Promise<void>,
): Promise<number> {
  let i = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (i < n) await one(i++);
    }),
  );
  return performance.now() - t0;
}

/** The session the `history` workload reads: the warm-up gives it 31 turns (62 messages). */
const HISTORY_PEER = "peer-0";
/** The session key of the `history` workload's session, whose turns end the warm-up. */
export const HISTORY_KEY = `agent:main:telegram:dm:${HISTORY_PEER}`;

/**
 * The warm-up: 200 sessions (peer-0 … peer-199) with one delivered reply each, then 30 more
 * turns of peer-0, one at a time, so `history` reads a full page.
 */
export async function warmUp(url: string, connector: Awaited<ReturnType<typeof startConnector>>) {
  const warm = 200;
  const before = connector.delivered();
  await pool(warm, 32, (i) => postInbound(url, `warm-${i}`, `peer-${i % 200}`));
  await connector.until(before + warm, 60_000);
  for (let i = 0; i < 30; i++) {
    await postInbound(url, `turn-${i}`, HISTORY_PEER);
    await connector.until(before + warm + i + 1, 10_000);
  }
}

/**
 * Each warm-up session's actor brought into memory again (workerd evicts a Durable Object after
 * 10 s without a request and closes it 70 s on): the first warm-up message of each of the 200
 * sessions posted again, a duplicate, so no turn runs and no history grows.
 */
export async function touchSessions(url: string): Promise<void> {
  await pool(200, 8, (i) => postInbound(url, `warm-${i}`, `peer-${i % 200}`));
}

/**
 * A model request as a gateway sent it (a chat-completions body, its system message first),
 * made a template for any session: the system prompt with `sessionKey` written `{sessionKey}`,
 * the tool schemas, and the other fields (model, tool_choice…); with the request's size and
 * message count. Throws unless the system prompt names `sessionKey`.
 */
export function requestTemplate(body: string, sessionKey: string) {
  const {
    messages = [],
    tools = [],
    ...params
  } = JSON.parse(body) as {
    messages?: Array<{ role?: string; content?: unknown }>;
    tools?: unknown[];
  } & Record<string, unknown>;
  const first = messages[0];
  if (first?.role !== "system" || typeof first.content !== "string")
    throw new Error("the model request has no system message first");
  if (!first.content.includes(sessionKey)) throw new Error(`the system prompt does not name ${sessionKey}`);
  return {
    system: first.content.split(sessionKey).join("{sessionKey}"),
    tools,
    params,
    messages: messages.length,
    bytes: Buffer.byteLength(body),
  };
}

/**
 * The message floor's FLOOR_REQUEST (bench/floor/message-worker.ts) of a template: base64 of
 * `{ system, tools, params }` (the env file wrangler reads keeps `\"` as it is, so JSON text
 * would not survive it).
 */
export function floorRequestVar(t: Pick<ReturnType<typeof requestTemplate>, "system" | "tools" | "params">) {
  return Buffer.from(JSON.stringify({ system: t.system, tools: t.tools, params: t.params })).toString(
    "base64",
  );
}
