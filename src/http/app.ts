/**
 * The Worker's HTTP surface: one Hono app, routes mounted per resource, one error handler and
 * one not-found handler producing the JSON error shape. The Worker authenticates, validates
 * and routes; it never runs an agent turn itself.
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ConfigError, loadConfig } from "../config/load";
import { hooks } from "../routes/hooks";
import { inbound } from "../routes/inbound";
import { rpc } from "../routes/rpc";
import { toolsInvoke } from "../routes/tools-invoke";
import { transcripts } from "../routes/transcripts";
import { ui } from "../ui/app";
import { VERSION } from "../version";
import { ApiError, errorBody, INVALID_CONFIG_MESSAGE } from "./errors";

export const MAX_BODY_BYTES = 1024 * 1024;

const limitBody = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: () => {
    throw new ApiError("PAYLOAD_TOO_LARGE", `request body is larger than ${MAX_BODY_BYTES} bytes (1 MB)`);
  },
});

export const app = new Hono<{ Bindings: Env }>()
  .get("/healthz", (c) => {
    // A gateway with an invalid config is not healthy: this answers the generic 500.
    loadConfig(c.env);
    return c.json({ ok: true, version: VERSION });
  })
  .use("/hooks/*", limitBody)
  .use("/rpc/*", limitBody)
  .use("/tools/*", limitBody)
  .use("/ui/*", limitBody)
  .route("/hooks/inbound", inbound)
  .route("/hooks", hooks)
  .route("/rpc", rpc)
  .route("/tools", toolsInvoke)
  .route("/v1/transcripts", transcripts)
  .route("/ui", ui);

// Known paths with the wrong method: 405 naming the method to use, instead of a bare 404.
const ALLOWED: Array<[RegExp, string]> = [
  [/^\/healthz$/, "GET"],
  [/^\/rpc\/[^/]+$/, "POST"],
  [/^\/tools\/invoke$/, "POST"],
  [/^\/hooks\/inbound\/[^/]+$/, "POST"],
  [/^\/hooks\/(agent|wake)$/, "POST"],
  [/^\/v1\/transcripts\/[^/]+$/, "GET"],
];

app.notFound((c) => {
  const path = new URL(c.req.url).pathname;
  const allowed = ALLOWED.find(([re]) => re.test(path))?.[1];
  if (allowed && allowed !== c.req.method) {
    c.header("allow", allowed);
    return c.json(
      errorBody("METHOD_NOT_ALLOWED", `${c.req.method} is not allowed on ${path}; use ${allowed}`),
      405,
    );
  }
  return c.json(errorBody("NOT_FOUND", `no route for ${c.req.method} ${path}`), 404);
});

app.onError((error, c) => {
  if (error instanceof ApiError) return c.json(errorBody(error.code, error.message), error.status);
  // The problems name config paths, connectors and secrets: only the operator sees them (the
  // status RPC, the logs); a request that reached no operator surface gets the generic answer.
  if (error instanceof ConfigError) return c.json(errorBody("INTERNAL", INVALID_CONFIG_MESSAGE), 500);
  console.error("unhandled error", error);
  return c.json(errorBody("INTERNAL", "internal error; see the gateway logs"), 500);
});

export type App = typeof app;
