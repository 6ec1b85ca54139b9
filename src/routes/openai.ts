/**
 * The OpenAI-compatible API (operator token, SPEC §13 later surfaces), mounted at `/v1`:
 * `POST /v1/chat/completions` runs the last user message as an ordinary queued run of an
 * agent's session (the operator RPC's `agent` path, never delivered) and answers its reply as a
 * `chat.completion`, or as Server-Sent Events with `stream: true`; `GET /v1/models` lists the
 * agents as models. Errors are OpenAI's `{ error: { message, type, code } }`. Shapes and rules
 * live in openai-format.ts.
 *
 * The agent runs inside its session's Durable Object, which reports the run when it ends: a
 * stream sends the role chunk at once and the whole reply as one content chunk at the end.
 */
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { requireToken } from "../auth/bearer";
import { stableUuid } from "../auth/signature";
import { ConfigError, loadConfig } from "../config/load";
import { getSession } from "../db/queries";
import { getRun } from "../db/runs";
import { limitBody } from "../http/body-limit";
import { ApiError, parseInput, parseJsonBody } from "../http/errors";
import { SURFACE } from "../http/surface";
import { enqueueOperatorRun, waitForOperatorRun } from "../rpc/operator-runs";
import { initFromKey } from "../runs/entry-init";
import { parseCommand } from "../session/chat/commands";
import {
  agentOfModel,
  answerBase,
  ChatCompletionBody,
  chooseSessionKey,
  chunk,
  closingChunks,
  completion,
  lastUserText,
  modelList,
  modelObject,
  notTheAgents,
  OPENAI_CHANNEL,
  OpenAIError,
  openAIErrorOf,
  outcomeError,
  RUN_HEADER,
  SESSION_HEADER,
  servedAgents,
  TIMEOUT_HEADER,
  usageOf,
  waitBoundMs,
} from "./openai-format";

const IDEMPOTENCY_HEADER = "idempotency-key";
/** How often a stream waiting for its run sends a keep-alive comment. */
const KEEPALIVE_MS = 15_000;
const MAX_IDEMPOTENCY_KEY = 256;

function asOpenAIError(error: unknown): OpenAIError {
  if (error instanceof OpenAIError) return error;
  if (error instanceof ApiError) return openAIErrorOf(error.code, error.message);
  // Past the operator token: the caller may see what is wrong with the config.
  if (error instanceof ConfigError) return openAIErrorOf("INTERNAL", error.message);
  console.error("/v1 request failed", error);
  return openAIErrorOf("INTERNAL", "internal error; see the gateway logs");
}

export const openai = new Hono<{ Bindings: Env }>()
  .get(SURFACE.models.path, requireToken("GATEWAY_TOKEN"), (c) => c.json(modelList(loadConfig(c.env))))
  .get(SURFACE.model.path, requireToken("GATEWAY_TOKEN"), (c) => {
    const agentId = agentOfModel(c.req.param("model"), servedAgents(loadConfig(c.env)));
    return c.json(modelObject(agentId));
  })
  .post(SURFACE.chatCompletions.path, limitBody, requireToken("GATEWAY_TOKEN"), async (c) => {
    const config = loadConfig(c.env);
    const body = parseInput(ChatCompletionBody, parseJsonBody(await c.req.text()));
    const agentId = agentOfModel(body.model, servedAgents(config));
    const text = lastUserText(body.messages);
    if (parseCommand(text)) {
      throw new OpenAIError(
        400,
        "invalid_request_error",
        "invalid_request",
        `"${text.split(/\s/)[0]}" is a chat command, whose answer goes to a chat: send it from a chat, or use the operator RPC`,
      );
    }
    const waitMs = waitBoundMs(c.req.header(TIMEOUT_HEADER));
    const idempotencyKey = c.req.header(IDEMPOTENCY_HEADER);
    if (
      idempotencyKey !== undefined &&
      (idempotencyKey === "" || idempotencyKey.length > MAX_IDEMPOTENCY_KEY)
    ) {
      throw new OpenAIError(
        400,
        "invalid_request_error",
        "invalid_request",
        `\`${IDEMPOTENCY_HEADER}\` must be 1 to ${MAX_IDEMPOTENCY_KEY} characters`,
      );
    }

    // A fresh session's id follows from the idempotency key when there is one: retries of the
    // same request, even concurrent ones, reach the same session and its one dedupe by run id.
    const freshId = idempotencyKey ? await stableUuid(`openai:${idempotencyKey}`) : crypto.randomUUID();
    const choice = chooseSessionKey(
      { header: c.req.header(SESSION_HEADER), user: body.user, agentId, freshId },
      config.session,
    );
    // A random fresh key names no stored session yet.
    const entry = choice.by === "fresh" && !idempotencyKey ? undefined : await getSession(c.env, choice.key);
    // Agent-less keys (`hook:…`, `cron:…`, `global`) belong to the agent of their entry.
    if (choice.by === "header" && entry && entry.agentId !== agentId)
      throw notTheAgents(choice.key, entry.agentId, agentId);
    const init = { ...initFromKey(choice.key, config), agentId };
    if (choice.by !== "header") init.channel ??= OPENAI_CHANNEL;

    const queued = await enqueueOperatorRun({ env: c.env, config }, choice.key, text, {
      deliver: false,
      surface: "openai",
      init,
      ...(entry ? { existing: entry } : {}),
      ...(idempotencyKey ? { idempotencyKey } : {}),
    });
    c.header(SESSION_HEADER, queued.sessionKey);
    c.header(RUN_HEADER, queued.runId);
    const base = answerBase(queued.runId, agentId, Date.now());

    /** The run's reply and usage once it has ended `ok`; throws the error to answer otherwise. */
    const settle = async () => {
      const result = await waitForOperatorRun(c.env, queued.runId, waitMs);
      const failure = outcomeError(result, queued.sessionKey, waitMs);
      if (failure) throw failure;
      const run = await getRun(c.env, queued.runId);
      return { reply: result.reply ?? "", usage: usageOf(run?.usage) };
    };

    if (!body.stream) {
      try {
        const { reply, usage } = await settle();
        return c.json(completion(base, reply, usage));
      } catch (error) {
        // The message is queued: whatever went wrong, sending it again would run it twice.
        const e = asOpenAIError(error);
        throw new OpenAIError(e.status, e.type, e.code, e.message, false);
      }
    }
    const includeUsage = body.stream_options?.include_usage === true;
    return streamSSE(c, async (stream) => {
      const send = (data: object) => stream.writeSSE({ data: JSON.stringify(data) });
      await send(chunk(base, { role: "assistant", content: "" }, null, includeUsage));
      // An SSE comment every KEEPALIVE_MS while the run goes on: proxies and clients that drop
      // an idle stream keep it open (OpenAI's clients skip comments).
      const keepalive = setInterval(() => {
        stream.write(": keep-alive\n\n").catch(() => {});
      }, KEEPALIVE_MS);
      try {
        const { reply, usage } = await settle().finally(() => clearInterval(keepalive));
        for (const next of closingChunks(base, reply, usage, includeUsage)) await send(next);
        await stream.writeSSE({ data: "[DONE]" });
      } catch (error) {
        // Past the 200: OpenAI's clients read an `error` object in the stream and throw it.
        await send(asOpenAIError(error).body());
      }
    });
  })
  .onError((error, c) => {
    const e = asOpenAIError(error);
    if (!e.retry) c.header("x-should-retry", "false");
    return c.json(e.body(), e.status);
  });
