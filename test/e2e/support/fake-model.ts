/**
 * A scripted OpenAI-compatible model server on 127.0.0.1 (`POST /v1/chat/completions`).
 *
 * Each request takes the next step of the script (or the fallback when the script is empty):
 * a text reply, tool calls, an HTTP error, or a hang that lasts until the test releases it.
 * The gateway calls `generateText` (a non-streaming request), or `streamText` for a reply to a
 * chat that streams (SPEC §22): `stream: true` is answered as server-sent events, the text in
 * one piece or, for a step with `stream`, in pieces spaced in time.
 * Every request is recorded (system prompt, messages, tools, headers, the raw body) for
 * assertions. It also serves the `openai` api (`@ai-sdk/openai`'s Chat Completions), which sends
 * the system prompt of reasoning models as a `developer` message.
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import { completionEvents } from "../../support/completion-stream.ts";
import { chatCompletion, readBody, serveJson, textOf } from "./http-fake.ts";

export interface Usage {
  prompt: number;
  completion: number;
  /** Of the prompt, read from the provider's cache (`prompt_tokens_details.cached_tokens`). */
  cached?: number;
}

export type ModelStep =
  /** `stream`: a streaming request gets the text in `pieces`, `delayMs` apart (SPEC §22). */
  | { text: string; usage?: Usage; stream?: { pieces: number; delayMs: number } }
  | { toolCalls: Array<{ name: string; arguments?: unknown; id?: string }>; text?: string; usage?: Usage }
  | { status: number; message?: string };

export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

export interface ModelRequest {
  /** Node clock when the request arrived. */
  at: number;
  model: string;
  stream: boolean;
  /** The `system` and `developer` messages. */
  system: string;
  messages: ChatMessage[];
  tools: string[];
  /** The tools' function definitions as sent (name, description, JSON schema). */
  toolDefs: Array<{ name: string; description?: string; parameters: unknown }>;
  /** The Authorization header, if any. */
  authorization?: string;
  /** The whole request body (`reasoning_effort`, `max_tokens`…). */
  body: Record<string, unknown>;
  /** How the request ended: answered with a status, or the client went away first. */
  outcome: "pending" | "answered" | "client-closed";
}

export interface Hang {
  /** Resolves when the hanging request has arrived. */
  started: Promise<ModelRequest>;
  /** Answers the hanging request (if its client is still there) with `step`. */
  release(step?: ModelStep): void;
}

export interface FakeModel {
  /** Base URL for `models.providers.<id>.baseUrl`, e.g. http://127.0.0.1:1234/v1. */
  baseUrl: string;
  requests: ModelRequest[];
  /** Appends steps to the script. */
  push(...steps: ModelStep[]): void;
  /** Appends `n` copies of an HTTP error. */
  fail(status: number, n: number, message?: string): void;
  /** Appends a step that hangs until released. */
  hang(): Hang;
  /** What to answer when the script is empty (default: a short text). */
  setFallback(step: ModelStep): void;
  /** Forgets the script, the requests and the fallback; releases open hangs. */
  reset(): void;
  close(): Promise<void>;
}

const DEFAULT_USAGE: Usage = { prompt: 10, completion: 5 };

type Scripted = { step: ModelStep } | { hang: Deferred };

interface Deferred {
  started: (r: ModelRequest) => void;
  released: Promise<ModelStep | undefined>;
  release: (step?: ModelStep) => void;
}

function completion(step: Exclude<ModelStep, { status: number }>, model: string, n: number) {
  return chatCompletion({
    id: `chatcmpl-fake-${n}`,
    model,
    text: "toolCalls" in step ? (step.text ?? null) : step.text,
    toolCalls:
      "toolCalls" in step
        ? step.toolCalls.map((c, i) => ({
            id: c.id ?? `call_${n}_${i}`,
            name: c.name,
            arguments: c.arguments,
          }))
        : undefined,
    usage: step.usage ?? DEFAULT_USAGE,
  });
}

/** The same answer as chat.completion.chunk server-sent events (for `stream: true`). */
function streamChunks(body: ReturnType<typeof completion>): string {
  const choice = body.choices[0];
  const base = { id: body.id, object: "chat.completion.chunk", created: body.created, model: body.model };
  const events: unknown[] = [{ ...base, choices: [{ index: 0, delta: { role: "assistant" } }] }];
  if (choice?.message.content) {
    events.push({ ...base, choices: [{ index: 0, delta: { content: choice.message.content } }] });
  }
  for (const [index, call] of (choice?.message.tool_calls ?? []).entries()) {
    events.push({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index, ...call }] } }] });
  }
  events.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: choice?.finish_reason }] });
  events.push({ ...base, choices: [], usage: body.usage });
  return `${events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("")}data: [DONE]\n\n`;
}

export async function startFakeModel(): Promise<FakeModel> {
  const requests: ModelRequest[] = [];
  let script: Scripted[] = [];
  let fallback: ModelStep = { text: "fallback answer" };
  const openHangs = new Set<Deferred>();

  const answer = (res: ServerResponse, record: ModelRequest, step: ModelStep) => {
    if (res.destroyed || res.writableEnded) return;
    record.outcome = "answered";
    if ("status" in step) {
      res.writeHead(step.status, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          error: {
            message: step.message ?? `fake model error ${step.status}`,
            type: step.status === 429 ? "rate_limit_exceeded" : "server_error",
            code: step.status,
          },
        }),
      );
      return;
    }
    const body = completion(step, record.model, requests.indexOf(record));
    if (record.stream && "stream" in step && step.stream) {
      // Written piece by piece; a client that went away (a killed gateway) ends it.
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const usage = step.usage ?? DEFAULT_USAGE;
      const events = completionEvents({
        text: step.text,
        pieces: step.stream.pieces,
        usage: { prompt: usage.prompt, completion: usage.completion },
      });
      const delay = step.stream.delayMs;
      const next = (i: number) => {
        if (res.destroyed || res.writableEnded) return;
        if (i >= events.length) {
          res.end();
          return;
        }
        res.write(events[i]);
        setTimeout(() => next(i + 1), i === 0 ? 0 : delay);
      };
      next(0);
      return;
    }
    if (record.stream) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.end(streamChunks(body));
    } else {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const raw = await readBody(req);
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
      return;
    }
    const parsed = JSON.parse(raw) as {
      model: string;
      stream?: boolean;
      messages: ChatMessage[];
      tools?: Array<{ function: { name: string; description?: string; parameters: unknown } }>;
    };
    const record: ModelRequest = {
      at: Date.now(),
      model: parsed.model,
      stream: parsed.stream === true,
      system: parsed.messages
        .filter((m) => m.role === "system" || m.role === "developer")
        .map((m) => textOf(m.content))
        .join("\n"),
      messages: parsed.messages,
      tools: (parsed.tools ?? []).map((t) => t.function.name),
      toolDefs: (parsed.tools ?? []).map((t) => t.function),
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      body: parsed as unknown as Record<string, unknown>,
      outcome: "pending",
    };
    requests.push(record);
    res.on("close", () => {
      if (record.outcome === "pending") record.outcome = "client-closed";
    });
    const next = script.shift();
    if (next && "hang" in next) {
      next.hang.started(record);
      const step = await next.hang.released;
      openHangs.delete(next.hang);
      answer(res, record, step ?? fallback);
      return;
    }
    answer(res, record, next?.step ?? fallback);
  };

  const server = await serveJson("fake model", handle);

  return {
    baseUrl: `http://127.0.0.1:${server.port}/v1`,
    requests,
    push(...steps) {
      script.push(...steps.map((step) => ({ step })));
    },
    fail(status, n, message) {
      for (let i = 0; i < n; i++) script.push({ step: { status, ...(message ? { message } : {}) } });
    },
    hang() {
      let started!: (r: ModelRequest) => void;
      let release!: (step?: ModelStep) => void;
      const startedP = new Promise<ModelRequest>((r) => {
        started = r;
      });
      const released = new Promise<ModelStep | undefined>((r) => {
        release = r;
      });
      const d: Deferred = { started, released, release };
      openHangs.add(d);
      script.push({ hang: d });
      return { started: startedP, release: (step) => release(step) };
    },
    setFallback(step) {
      fallback = step;
    },
    reset() {
      for (const d of openHangs) d.release();
      openHangs.clear();
      script = [];
      requests.length = 0;
      fallback = { text: "fallback answer" };
    },
    async close() {
      for (const d of openHangs) d.release();
      await server.close();
    },
  };
}
