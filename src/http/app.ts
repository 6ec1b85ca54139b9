/**
 * The Worker's HTTP surface: one Hono app, routes mounted per resource, one error handler and
 * one not-found handler producing the JSON error shape. The Worker authenticates, validates
 * and routes; it never runs an agent turn itself.
 */
import { Hono } from "hono";
import { TrieRouter } from "hono/router/trie-router";
import { ConfigError, loadConfig } from "../config/load";
import { StorageBindingError } from "../db/placement";
import { checkPlacement, StorageListChangedError } from "../db/placement-check";
import { connectors } from "../routes/connectors";
import { hooks } from "../routes/hooks";
import { inbound } from "../routes/inbound";
import { mcp } from "../routes/mcp";
import { media } from "../routes/media";
import { openai } from "../routes/openai";
import { rpc } from "../routes/rpc";
import { toolsInvoke } from "../routes/tools-invoke";
import { transcripts } from "../routes/transcripts";
import { ui } from "../ui/app";
import { VERSION } from "../version";
import { limitBody } from "./body-limit";
import { ApiError, errorBody, INVALID_CONFIG_MESSAGE } from "./errors";
import { ENDPOINTS, type Endpoint, pathOf, prefixOf, SURFACE } from "./surface";

function configLoads(env: Env): boolean {
  try {
    loadConfig(env);
    return true;
  } catch (error) {
    if (error instanceof ConfigError) return false;
    throw error;
  }
}

/** The RPC methods that serve while the databases are placed with another list: they fix it. */
const REBALANCE_PATHS = new Set(
  ["storage.rebalance", "storage.verify"].map((method) => pathOf(SURFACE.rpc, { method })),
);

const guarded = new Hono<{ Bindings: Env }>()
  // Nothing is served from databases placed with another `storage.d1` (SPEC §19).
  .use("*", async (c, next) => {
    // An invalid config is the routes' to answer (the operator sees its messages there).
    if (!REBALANCE_PATHS.has(c.req.path) && configLoads(c.env)) {
      try {
        await checkPlacement(c.env);
      } catch (error) {
        if (!(error instanceof StorageListChangedError)) throw error;
        console.error(error.message);
        throw new ApiError("UNAVAILABLE", error.message);
      }
    }
    await next();
  });
for (const endpoint of ENDPOINTS) if (endpoint.bodyLimit) guarded.use(endpoint.path, limitBody);

export const app = guarded
  .get(SURFACE.healthz.path, (c) => {
    // A gateway with an invalid config is not healthy: this answers the generic 500.
    loadConfig(c.env);
    return c.json({ ok: true, version: VERSION });
  })
  .route("/", inbound)
  .route("/", connectors)
  .route("/", hooks)
  .route("/", rpc)
  .route("/", toolsInvoke)
  .route("/", mcp)
  .route("/", transcripts)
  .route("/", media)
  .route("/", openai)
  .route(prefixOf(SURFACE.dashboard), ui);

/** The endpoints whose path a request's path is, to answer a wrong method with a 405. */
const byPath = new TrieRouter<Endpoint>();
for (const endpoint of ENDPOINTS) byPath.add("ALL", endpoint.path, endpoint);

// A known path with the wrong method: 405 naming the methods to use, instead of a bare 404.
app.notFound((c) => {
  const path = new URL(c.req.url).pathname;
  const [matched] = byPath.match(c.req.method, path);
  const methods: string[] = [...new Set(matched.flatMap(([endpoint]) => endpoint.methods))];
  if (methods.length && !methods.includes(c.req.method)) {
    const allowed = methods.join(", ");
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
  // storage.d1 names a binding this Worker lacks: the deployment's own mistake, said as it is.
  if (error instanceof StorageBindingError) {
    console.error(error.message);
    return c.json(errorBody("INTERNAL", error.message), 500);
  }
  console.error("unhandled error", error);
  return c.json(errorBody("INTERNAL", "internal error; see the gateway logs"), 500);
});

export type App = typeof app;
