/**
 * What the fakes on 127.0.0.1 share (models, connectors, platforms): a request's body, a chat
 * message's text, and a JSON server whose handler's failure answers 500 naming the fake, which
 * closes at once (open connections too).
 */
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listenOnLoopback } from "../../../scripts/lib/local-server.ts";

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** A chat message's text: a string, or its parts' texts joined. */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: { text?: string }) => p.text ?? "").join("");
  return "";
}

/** `handle` served on 127.0.0.1; a failure it throws is a 500 `{ error: { message } }` naming `name`. */
export async function serveJson(
  name: string,
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) return;
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `${name} failed: ${String(error)}` } }));
    });
  });
  const port = await listenOnLoopback(server);
  return {
    port,
    async close() {
      server.close();
      server.closeAllConnections();
      await once(server, "close");
    },
  };
}

/** An OpenAI chat completion answering `text` or calling tools (`finish_reason` follows). */
export function chatCompletion(c: {
  id: string;
  model: string;
  text: string | null;
  toolCalls?: Array<{ id: string; name: string; arguments: unknown }> | undefined;
  /** `cached`: of the prompt, read from the cache (sent as `prompt_tokens_details.cached_tokens`). */
  usage: { prompt: number; completion: number; cached?: number | undefined };
}) {
  const toolCalls = c.toolCalls?.map((t) => ({
    id: t.id,
    type: "function",
    function: { name: t.name, arguments: JSON.stringify(t.arguments ?? {}) },
  }));
  return {
    id: c.id,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: c.model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: c.text, ...(toolCalls ? { tool_calls: toolCalls } : {}) },
        finish_reason: toolCalls ? "tool_calls" : "stop",
      },
    ],
    usage: {
      prompt_tokens: c.usage.prompt,
      completion_tokens: c.usage.completion,
      total_tokens: c.usage.prompt + c.usage.completion,
      ...(c.usage.cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: c.usage.cached } }),
    },
  };
}
