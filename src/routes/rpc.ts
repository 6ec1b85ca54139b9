/**
 * `POST /rpc/:method` (operator token): body = params → `{ ok: true, payload }`. With an invalid
 * config, `status` still answers (with the problems) and every other method answers 500 with
 * them: past the token, the caller is the operator who can fix it.
 */
import { Hono } from "hono";
import { requireToken } from "../auth/bearer";
import { ConfigError, loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import { ApiError, parseInput, parseJsonBody } from "../http/errors";
import { SURFACE } from "../http/surface";
import { invalidConfigStatus, StatusParams } from "../rpc/gateway";
import { callMethod } from "../rpc/methods";

export const rpc = new Hono<{ Bindings: Env }>().post(
  SURFACE.rpc.path,
  requireToken("GATEWAY_TOKEN"),
  async (c) => {
    const name = c.req.param("method");
    const params = parseJsonBody(await c.req.text());
    let config: Config;
    try {
      config = loadConfig(c.env);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      if (name !== "status") throw new ApiError("INTERNAL", error.message);
      parseInput(StatusParams, params);
      return c.json({ ok: true, payload: invalidConfigStatus(error) });
    }
    const payload = await callMethod(name, params, { env: c.env, config });
    return c.json({ ok: true, payload });
  },
);
