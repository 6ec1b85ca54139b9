/**
 * `POST /tools/invoke` (operator token, SPEC §13, §17): runs one tool as a session, compatible
 * with OpenClaw's endpoint. Body `{ tool | name, args?, sessionKey? (default "main"), agentId?,
 * idempotencyKey? }`; the acting session need not exist yet, and visibility applies as that
 * session (resolution, availability and the call itself are ./tool-access.ts, shared with
 * /mcp). Errors on this surface are `{ ok: false, error: { type, message } }` (OpenClaw's
 * shape), unlike the `code` of the other surfaces.
 */
import { Hono } from "hono";
import { z } from "zod";
import { requireToken } from "../auth/bearer";
import { ConfigError, loadConfig } from "../config/load";
import { ApiError, parseJsonBody } from "../http/errors";
import { SURFACE } from "../http/surface";
import {
  errorTypeOf,
  invokeTool,
  parseOrInvalid,
  resolveActingSession,
  ToolAccessError,
} from "./tool-access";

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

export const toolsInvoke = new Hono<{ Bindings: Env }>()
  .post(SURFACE.toolsInvoke.path, requireToken("GATEWAY_TOKEN"), async (c) => {
    const config = loadConfig(c.env);
    const body = parseOrInvalid(Body, parseJsonBody(await c.req.text()));
    const name = (body.tool ?? body.name) as string;
    const acting = await resolveActingSession(c.env, config, body);
    const result = await invokeTool(c.env, acting, name, body.args, { idempotencyKey: body.idempotencyKey });
    return c.json({ ok: true, result });
  })
  .onError((error, c) => {
    if (error instanceof ToolAccessError) {
      return c.json({ ok: false, error: { type: error.type, message: error.message } }, error.status);
    }
    if (error instanceof ApiError) {
      return c.json({ ok: false, error: { type: errorTypeOf(error), message: error.message } }, error.status);
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
