/**
 * The soak's fault-injecting fakes on 127.0.0.1 (see scripts/lib/soak.ts):
 * - a chat connector (the gateway's `deliverUrl`) that checks every delivery's signature,
 *   answers 500 to a share of them, holds a few open for longer than the gateway's delivery
 *   timeout, and records every delivery it accepted (2xx) by `deliveryId`, duplicates included,
 *   and apart from them the previews of streamed replies (`kind: "preview"`, SPEC §22);
 * - an OpenAI-compatible model that answers 429 (with `retry-after`), 500 or slowly to a share
 *   of requests, and otherwise answers from the request itself: a soak message asking for
 *   `sessions_send` or `sessions_spawn` gets that tool call, one asking to yield spawns two
 *   sub-agents and then calls `sessions_yield`, every other turn a short text; a streaming
 *   request (`stream: true`, a reply to a chat that streams) gets its text in pieces, a few
 *   dozen milliseconds apart, padded so that it is long enough to be previewed.
 * Faults are drawn from a seeded generator and can be switched off for the final drain.
 */

import { createHmac, timingSafeEqual } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { listenOnLoopback } from "./local-server.ts";
import type { Prng } from "./prng.ts";

const SIGNATURE_HEADER = "x-switchboard-signature";

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  server.close();
  await once(server, "close");
}

// ---------------------------------------------------------------------------------------------
// Connector

export interface AcceptedDelivery {
  at: number;
  deliveryId: string;
  kind: string;
  sessionKey: string;
  text: string;
  replyToMessageId?: string;
}

export interface ConnectorFaults {
  /** Share of deliveries answered 500. */
  failShare: number;
  /** Share of deliveries held open for `hangMs` and never accepted. */
  hangShare: number;
  /** Longer than the gateway's delivery timeout (15 s), so the gateway gives up first. */
  hangMs: number;
}

export interface FaultyConnector {
  url: string;
  /** Every accepted (2xx) delivery per deliveryId; more than one entry is a duplicate. */
  accepted: Map<string, AcceptedDelivery[]>;
  /** Previews accepted per deliveryId, and when (a preview is never a delivery). */
  previews: Map<string, number[]>;
  counts: { attempts: number; failed: number; hung: number; badSignature: number };
  faults: boolean;
  close(): Promise<void>;
}

function signatureOk(secret: string, header: string | undefined, raw: string): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? "");
  if (!m) return false;
  const expected = createHmac("sha256", secret).update(`${m[1]}.${raw}`).digest();
  return timingSafeEqual(expected, Buffer.from(m[2] ?? "", "hex"));
}

export async function startFaultyConnector(
  secret: string,
  prng: Prng,
  faults: ConnectorFaults,
): Promise<FaultyConnector> {
  const hangs = new Set<() => void>();
  const c: FaultyConnector = {
    url: "",
    accepted: new Map(),
    previews: new Map(),
    counts: { attempts: 0, failed: 0, hung: 0, badSignature: 0 },
    faults: true,
    close: async () => {
      for (const release of hangs) release();
      await close(server);
    },
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    c.counts.attempts++;
    if (!signatureOk(secret, req.headers[SIGNATURE_HEADER] as string | undefined, raw)) {
      c.counts.badSignature++;
      res.writeHead(401).end("bad signature");
      return;
    }
    const body = JSON.parse(raw) as Omit<AcceptedDelivery, "at">;
    if (c.faults && prng.chance(faults.hangShare)) {
      c.counts.hung++;
      // Held until the gateway gives up (its timeout closes the request), then dropped: a
      // request nobody is waiting for is never accepted.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, faults.hangMs);
        function done() {
          clearTimeout(timer);
          hangs.delete(done);
          resolve();
        }
        hangs.add(done);
        res.once("close", done);
      });
      if (!res.destroyed && !res.writableEnded) res.writeHead(504).end("connector hung");
      return;
    }
    if (c.faults && prng.chance(faults.failShare)) {
      c.counts.failed++;
      res.writeHead(500).end("connector failed");
      return;
    }
    if (body.kind === "preview") {
      c.previews.set(body.deliveryId, [...(c.previews.get(body.deliveryId) ?? []), Date.now()]);
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
      return;
    }
    const list = c.accepted.get(body.deliveryId) ?? [];
    const record: AcceptedDelivery = {
      at: Date.now(),
      deliveryId: body.deliveryId,
      kind: body.kind,
      sessionKey: body.sessionKey,
      text: body.text,
    };
    if (body.replyToMessageId) record.replyToMessageId = body.replyToMessageId;
    list.push(record);
    c.accepted.set(body.deliveryId, list);
    res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(400).end(String(error));
    });
  });
  server.keepAliveTimeout = 30_000;
  c.url = `http://127.0.0.1:${await listenOnLoopback(server)}/deliver`;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Model

export interface ModelFaults {
  rate429: number;
  rate500: number;
  slowShare: number;
  slowMs: [number, number];
}

export interface FaultyModel {
  baseUrl: string;
  counts: { requests: number; r429: number; r500: number; slow: number; toolCalls: number };
  faults: boolean;
  close(): Promise<void>;
}

/** What a soak message asks the model to do (its text carries `#soak <what> [target]`). */
export const DIRECTIVE = /#soak (send-wait|send-fire|spawn|yield)(?: (\S+))?/;
/** How many sub-agents a yielding turn spawns before it calls `sessions_yield`. */
export const YIELD_SPAWNS = 2;
/** The message's tag, `[m<index>]`, carried into tool arguments so every step names its origin. */
const TAG = /\[m\d+\]/;

interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ function: { name: string } }>;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: { text?: string }) => p.text ?? "").join("");
  return "";
}

type Answer = { text: string } | { tool: { id: string; name: string; arguments: unknown } };

/**
 * The answer to a request: a function of its last message and tools, except for tool call ids,
 * which are fresh for every response (`n`), as a real provider's are.
 */
export function answerFor(messages: ChatMessage[], tools: string[], n: number): Answer {
  const last = messages.at(-1);
  const text = textOf(last?.content);
  const tag = TAG.exec(text)?.[0] ?? "";
  if (last?.role === "tool") return afterTool(messages, tools, n);
  if (!last) return { text: "soak: done" };
  if (text.includes("[reply from ")) {
    // Ends about half of the reply-back exchanges at once; maxPingPongTurns bounds the rest.
    return { text: text.length % 2 === 0 ? "REPLY_SKIP" : "soak: noted" };
  }
  if (text.includes("[agent-to-agent announce]")) return { text: "soak: exchange announced" };
  if (text.includes("[sub-agent announce]")) return { text: "soak: sub-agent result" };
  const d = DIRECTIVE.exec(text);
  if (d && last.role === "user") {
    const id = `call_${tag.slice(1, -1) || "x"}_${d[1]}_${n}`;
    if ((d[1] === "send-wait" || d[1] === "send-fire") && d[2] && tools.includes("sessions_send")) {
      return {
        tool: {
          id,
          name: "sessions_send",
          arguments: {
            sessionKey: d[2],
            message: `soak ping ${tag}`,
            timeoutSeconds: d[1] === "send-wait" ? 5 : 0,
          },
        },
      };
    }
    if ((d[1] === "spawn" || d[1] === "yield") && tools.includes("sessions_spawn")) {
      return { tool: { id, name: "sessions_spawn", arguments: { task: `soak task ${tag}` } } };
    }
  }
  return { text: `soak: reply ${tag}`.trim() };
}

/**
 * After a tool result: a yielding turn (its user message asks `#soak yield`) spawns until it has
 * YIELD_SPAWNS sub-agents, then calls `sessions_yield` once; any other turn ends with a text.
 */
function afterTool(messages: ChatMessage[], tools: string[], n: number): Answer {
  const userAt = messages.findLastIndex((m) => m.role === "user");
  const asked = textOf(messages[userAt]?.content);
  const tag = TAG.exec(asked)?.[0] ?? "";
  const calls = messages.slice(userAt + 1).flatMap((m) => (m.tool_calls ?? []).map((c) => c.function.name));
  if (DIRECTIVE.exec(asked)?.[1] === "yield") {
    const id = `call_${tag.slice(1, -1) || "x"}_yield_${n}`;
    const spawned = calls.filter((name) => name === "sessions_spawn").length;
    if (spawned < YIELD_SPAWNS && tools.includes("sessions_spawn")) {
      return {
        tool: { id, name: "sessions_spawn", arguments: { task: `soak task ${tag} #${spawned + 1}` } },
      };
    }
    if (!calls.includes("sessions_yield") && tools.includes("sessions_yield")) {
      return { tool: { id, name: "sessions_yield", arguments: { message: `soak: waiting ${tag}`.trim() } } };
    }
  }
  return { text: `soak: done ${tag}`.trim() };
}

function completion(answer: Answer, model: string, n: number) {
  const message =
    "tool" in answer
      ? {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: answer.tool.id,
              type: "function",
              function: { name: answer.tool.name, arguments: JSON.stringify(answer.tool.arguments) },
            },
          ],
        }
      : { role: "assistant", content: answer.text };
  return {
    id: `chatcmpl-soak-${n}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, finish_reason: "tool" in answer ? "tool_calls" : "stop" }],
    usage: { prompt_tokens: 20, completion_tokens: 5, total_tokens: 25 },
  };
}

/** Pieces a streamed text comes in, and the time between two. */
const STREAM_PIECES = 8;
const STREAM_PIECE_MS = 40;
/** What pads a streamed reply past the 40 characters a first preview waits for. */
const STREAM_PADDING = " (streamed in pieces, long enough to be previewed)";

/**
 * A completion as `chat.completion.chunk` server-sent events: a text in STREAM_PIECES pieces,
 * STREAM_PIECE_MS apart (padded, so the chat's preview shows), a tool call in one chunk. A
 * gateway that goes away (killed) ends it.
 */
async function streamAnswer(res: ServerResponse, body: ReturnType<typeof completion>): Promise<void> {
  const choice = body.choices[0];
  const base = { id: body.id, object: "chat.completion.chunk", created: body.created, model: body.model };
  const chunk = (delta: unknown, extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, ...extra }] })}\n\n`;
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.write(chunk({ role: "assistant" }));
  const text = choice?.message.content ? `${choice.message.content}${STREAM_PADDING}` : "";
  const size = Math.ceil(text.length / STREAM_PIECES);
  for (let i = 0; i < text.length; i += size) {
    await new Promise((r) => setTimeout(r, STREAM_PIECE_MS));
    if (res.destroyed) return;
    res.write(chunk({ content: text.slice(i, i + size) }));
  }
  for (const [index, call] of (choice?.message.tool_calls ?? []).entries())
    res.write(chunk({ tool_calls: [{ index, ...call }] }));
  res.write(chunk({}, { finish_reason: choice?.finish_reason ?? "stop" }));
  res.write(`data: ${JSON.stringify({ ...base, choices: [], usage: body.usage })}\n\n`);
  res.end("data: [DONE]\n\n");
}

export async function startFaultyModel(prng: Prng, faults: ModelFaults): Promise<FaultyModel> {
  const m: FaultyModel = {
    baseUrl: "",
    counts: { requests: 0, r429: 0, r500: 0, slow: 0, toolCalls: 0 },
    faults: true,
    close: () => close(server),
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" }).end('{"error":{"message":"no route"}}');
      return;
    }
    m.counts.requests++;
    const n = m.counts.requests;
    const error = (status: number, headers: Record<string, string> = {}) =>
      res.writeHead(status, { "content-type": "application/json", ...headers }).end(
        JSON.stringify({
          error: {
            message: `soak fault ${status}`,
            type: status === 429 ? "rate_limit_exceeded" : "server_error",
          },
        }),
      );
    if (m.faults) {
      const roll = prng.next();
      if (roll < faults.rate429) {
        m.counts.r429++;
        error(429, { "retry-after": String(prng.int(0, 1)) });
        return;
      }
      if (roll < faults.rate429 + faults.rate500) {
        m.counts.r500++;
        error(500);
        return;
      }
      if (prng.chance(faults.slowShare)) {
        m.counts.slow++;
        await new Promise((r) => setTimeout(r, prng.int(faults.slowMs[0], faults.slowMs[1])));
      }
    }
    const body = JSON.parse(raw) as {
      model: string;
      stream?: boolean;
      messages: ChatMessage[];
      tools?: Array<{ function: { name: string } }>;
    };
    const answer = answerFor(
      body.messages,
      (body.tools ?? []).map((t) => t.function.name),
      n,
    );
    if ("tool" in answer) m.counts.toolCalls++;
    if (res.destroyed) return; // the gateway went away (killed) while the answer was slow
    if (body.stream) {
      await streamAnswer(res, completion(answer, body.model, n));
      return;
    }
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(completion(answer, body.model, n)));
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    });
  });
  server.keepAliveTimeout = 30_000;
  m.baseUrl = `http://127.0.0.1:${await listenOnLoopback(server)}/v1`;
  return m;
}
