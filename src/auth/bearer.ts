/**
 * Bearer-token guards for the operator (`GATEWAY_TOKEN`) and hooks (`HOOKS_TOKEN`) surfaces.
 * An unset secret closes the surface with 503 naming the secret; tokens compare in constant
 * time. The hooks surface is also closed while `hooks.enabled` is false, and while its token
 * equals the operator token (a hook caller must never hold operator access, nor the reverse).
 */
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { loadConfig } from "../config/load";
import { ApiError } from "../http/errors";
import { equalsSecret, safeEqual } from "./signature";

type SecretName = "GATEWAY_TOKEN" | "HOOKS_TOKEN";

function secret(env: Env, name: SecretName): string | undefined {
  const value = (env as unknown as Record<string, unknown>)[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

function unset(name: SecretName): ApiError {
  return new ApiError(
    "UNAVAILABLE",
    `this endpoint is disabled until the secret ${name} is set (wrangler secret put ${name}, or .dev.vars locally)`,
  );
}

async function checkBearer(c: Context<{ Bindings: Env }>, expected: string): Promise<void> {
  const header = c.req.header("authorization") ?? "";
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match?.[1])
    throw new ApiError("UNAUTHORIZED", "missing bearer token: send `Authorization: Bearer <token>`");
  if (!equalsSecret(match[1], expected)) throw new ApiError("UNAUTHORIZED", "invalid bearer token");
}

export function requireToken(name: SecretName) {
  return createMiddleware<{ Bindings: Env }>(async (c, next) => {
    const expected = secret(c.env, name);
    if (!expected) throw unset(name);
    await checkBearer(c, expected);
    await next();
  });
}

/** `/hooks/agent` and `/hooks/wake` (SPEC §13): `hooks.enabled`, then `HOOKS_TOKEN`. */
export function requireHooksToken() {
  return createMiddleware<{ Bindings: Env }>(async (c, next) => {
    const expected = secret(c.env, "HOOKS_TOKEN");
    if (!loadConfig(c.env).hooks.enabled) {
      throw new ApiError(
        "UNAVAILABLE",
        `hooks are disabled: set hooks.enabled: true in SWITCHBOARD_CONFIG${expected ? "" : " and the secret HOOKS_TOKEN"}`,
      );
    }
    if (!expected) throw unset("HOOKS_TOKEN");
    const operator = secret(c.env, "GATEWAY_TOKEN");
    if (operator && (await safeEqual(expected, operator))) {
      throw new ApiError(
        "UNAVAILABLE",
        "hooks are disabled while HOOKS_TOKEN equals GATEWAY_TOKEN: give the hooks surface its own secret",
      );
    }
    await checkBearer(c, expected);
    await next();
  });
}
