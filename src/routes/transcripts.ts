/**
 * `GET /v1/transcripts/:sessionId.jsonl` (operator token): the transcript export (SPEC §3),
 * streamed page by page from D1 so that no transcript is ever built in memory.
 */
import { Hono } from "hono";
import { requireToken } from "../auth/bearer";
import { messagesAfter } from "../db/messages";
import { transcriptOwner } from "../db/queries";
import { ApiError } from "../http/errors";
import { SURFACE } from "../http/surface";

const PAGE = 500;

export const transcripts = new Hono<{ Bindings: Env }>().get(
  SURFACE.transcript.path,
  requireToken("GATEWAY_TOKEN"),
  async (c) => {
    const file = c.req.param("file");
    if (!file.endsWith(".jsonl"))
      throw new ApiError("NOT_FOUND", `unknown transcript file "${file}": use <sessionId>.jsonl`);
    const sessionId = file.slice(0, -".jsonl".length);
    const owner = await transcriptOwner(c.env, sessionId);
    if (!owner) throw new ApiError("NOT_FOUND", `transcript not found: ${sessionId}`);
    const env = c.env;
    const encoder = new TextEncoder();
    let after = 0;
    let parentId: string | null = null;
    let headerSent = false;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (!headerSent) {
          headerSent = true;
          const header = {
            type: "session",
            version: 1,
            id: sessionId,
            sessionKey: owner.sessionKey,
            timestamp: owner.createdAt,
          };
          controller.enqueue(encoder.encode(`${JSON.stringify(header)}\n`));
          return;
        }
        const page = await messagesAfter(env, owner.sessionKey, sessionId, after, PAGE);
        if (page.length === 0) {
          controller.close();
          return;
        }
        let chunk = "";
        for (const m of page) {
          const { id, seq: _seq, ...message } = m;
          chunk += `${JSON.stringify({ type: "message", id, parentId, timestamp: m.timestamp, message })}\n`;
          parentId = id;
          after = m.seq ?? after;
        }
        controller.enqueue(encoder.encode(chunk));
      },
    });
    return new Response(body, { headers: { "content-type": "application/x-ndjson; charset=utf-8" } });
  },
);
