/**
 * Bearer-token guards for the operator (`GATEWAY_TOKEN`) and hooks (`HOOKS_TOKEN`) surfaces.
 * An unset secret closes the surface with 503 naming the secret; tokens compare in constant time.
 */
import { createMiddleware } from "hono/factory";
import { ApiError } from "../http/errors";
import { safeEqual } from "./signature";

export function requireToken(secretName: "GATEWAY_TOKEN" | "HOOKS_TOKEN") {
  return createMiddleware<{ Bindings: Env }>(async (c, next) => {
    const expected = (c.env as unknown as Record<string, unknown>)[secretName];
    if (typeof expected !== "string" || expected === "") {
      throw new ApiError(
        "UNAVAILABLE",
        `this endpoint is disabled until the secret ${secretName} is set (wrangler secret put ${secretName}, or .dev.vars locally)`,
      );
    }
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    if (!match?.[1])
      throw new ApiError("UNAUTHORIZED", "missing bearer token: send `Authorization: Bearer <token>`");
    if (!(await safeEqual(match[1], expected))) throw new ApiError("UNAUTHORIZED", "invalid bearer token");
    await next();
  });
}
