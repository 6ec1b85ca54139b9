/**
 * The gateway's HTTP surface, its one route table: each endpoint's path, its methods, who may
 * call it and whether the app applies the body limit. The route modules register these paths
 * (src/routes/, mounted at the root; the dashboard under its prefix), app.ts answers a known
 * path with the wrong method from the methods here, and `security.audit` lists the endpoints
 * with whether each is open (`endpointsOf`).
 */
import type { Config } from "../config/schema";
import type { AuditedEndpoint, EndpointAuth } from "../policy/audit/report";

export interface Endpoint {
  readonly methods: readonly ("GET" | "POST")[];
  /** A Hono path: `:name` a parameter (`{…}` its pattern, `?` optional), `*` any rest. */
  readonly path: string;
  readonly auth: EndpointAuth;
  /** app.ts applies the 1 MB body limit; false where the route applies it in its own error shape, or takes no body. */
  readonly bodyLimit: boolean;
}

export const SURFACE = {
  healthz: { methods: ["GET"], path: "/healthz", auth: "none", bodyLimit: false },
  rpc: { methods: ["POST"], path: "/rpc/:method", auth: "operator", bodyLimit: true },
  toolsInvoke: { methods: ["POST"], path: "/tools/invoke", auth: "operator", bodyLimit: true },
  mcp: { methods: ["POST"], path: "/mcp", auth: "operator", bodyLimit: true },
  // The OpenAI-compatible API applies the body limit itself, so a too-large body is answered in
  // OpenAI's error shape.
  chatCompletions: { methods: ["POST"], path: "/v1/chat/completions", auth: "operator", bodyLimit: false },
  models: { methods: ["GET"], path: "/v1/models", auth: "operator", bodyLimit: false },
  model: { methods: ["GET"], path: "/v1/models/:model{.+}", auth: "operator", bodyLimit: false },
  transcript: { methods: ["GET"], path: "/v1/transcripts/:file", auth: "operator", bodyLimit: false },
  /** A file a person sent (SPEC §22), as kept in R2. */
  media: { methods: ["GET"], path: "/v1/media/:mediaId", auth: "operator", bodyLimit: false },
  dashboard: { methods: ["GET", "POST"], path: "/ui/*", auth: "dashboard", bodyLimit: true },
  hooksAgent: { methods: ["POST"], path: "/hooks/agent", auth: "hooks", bodyLimit: true },
  hooksWake: { methods: ["POST"], path: "/hooks/wake", auth: "hooks", bodyLimit: true },
  /** The signed bridge of a `webhook` connector. */
  bridge: { methods: ["POST"], path: "/hooks/inbound/:channel", auth: "connector", bodyLimit: true },
  /** A chat platform's webhook (GET: the platform's handshake, where it has one). */
  platform: {
    methods: ["GET", "POST"],
    path: "/connectors/:channel/:accountId?",
    auth: "connector",
    bodyLimit: true,
  },
} as const satisfies Record<string, Endpoint>;

export const ENDPOINTS: readonly Endpoint[] = Object.values(SURFACE);

/** The prefix an endpoint ending in `/*` is mounted at. */
export function prefixOf(endpoint: Endpoint): string {
  return endpoint.path.replace(/\/\*$/, "");
}

/** An endpoint's path with its parameters filled in; an optional one not given is left out. */
export function pathOf(endpoint: Endpoint, params: Record<string, string | undefined>): string {
  return endpoint.path.replace(/\/:(\w+)(?:\{[^}]*\})?(\?)?/g, (_segment, name: string, optional) => {
    const value = params[name];
    if (value !== undefined) return `/${value}`;
    if (optional) return "";
    throw new Error(`${endpoint.path} needs its ${name}`);
  });
}

/**
 * The endpoints a gateway with `config` serves, as `security.audit` lists them: a connector's
 * webhook once per configured connector, in the config's order.
 */
export function endpointsOf(config: Config): AuditedEndpoint[] {
  const listed = (e: Endpoint, path = e.path) => ({ method: e.methods.join(", "), path, auth: e.auth });
  return [
    ...ENDPOINTS.filter((e) => e.auth !== "connector").map((e) => listed(e)),
    ...Object.entries(config.connectors).map(([channel, c]) => {
      const webhook = c.type === "webhook" ? SURFACE.bridge : SURFACE.platform;
      return { ...listed(webhook, pathOf(webhook, { channel })), channel };
    }),
  ];
}
