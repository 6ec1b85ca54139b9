/**
 * The Worker's HTTP surface: one Hono app, routes mounted per resource, one error handler and
 * one not-found handler producing the JSON error shape. The Worker authenticates, validates
 * and routes; it never runs an agent turn itself.
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ConfigError } from "../config/load";
import { inbound } from "../routes/inbound";
import { rpc } from "../routes/rpc";
import { transcripts } from "../routes/transcripts";
import { VERSION } from "../version";
import { ApiError, errorBody } from "./errors";

export const MAX_BODY_BYTES = 1024 * 1024;

const limitBody = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: () => {
    throw new ApiError("PAYLOAD_TOO_LARGE", `request body is larger than ${MAX_BODY_BYTES} bytes (1 MB)`);
  },
});

export const app = new Hono<{ Bindings: Env }>()
  .get("/healthz", (c) => c.json({ ok: true, version: VERSION }))
  .use("/hooks/*", limitBody)
  .use("/rpc/*", limitBody)
  .route("/hooks/inbound", inbound)
  .route("/rpc", rpc)
  .route("/v1/transcripts", transcripts);

app.notFound((c) =>
  c.json(errorBody("NOT_FOUND", `no route for ${c.req.method} ${new URL(c.req.url).pathname}`), 404),
);

app.onError((error, c) => {
  if (error instanceof ApiError) return c.json(errorBody(error.code, error.message), error.status);
  if (error instanceof ConfigError) return c.json(errorBody("INTERNAL", error.message), 500);
  console.error("unhandled error", error);
  return c.json(errorBody("INTERNAL", "internal error; see the gateway logs"), 500);
});

export type App = typeof app;
