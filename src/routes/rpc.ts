/** `POST /rpc/:method` (operator token): body = params → `{ ok: true, payload }`. */
import { Hono } from "hono";
import { requireToken } from "../auth/bearer";
import { loadConfig } from "../config/load";
import { parseJsonBody } from "../http/errors";
import { callMethod } from "../rpc/methods";

export const rpc = new Hono<{ Bindings: Env }>().post(
  "/:method",
  requireToken("GATEWAY_TOKEN"),
  async (c) => {
    const config = loadConfig(c.env);
    const params = parseJsonBody(await c.req.text());
    const payload = await callMethod(c.req.param("method"), params, { env: c.env, config });
    return c.json({ ok: true, payload });
  },
);
