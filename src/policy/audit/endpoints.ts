/**
 * The endpoints in `security.audit`: each endpoint the gateway serves, who may call it, and
 * whether it is open (with the reason when it is not), from what the audit found about the
 * secrets each needs.
 */
import type { AuditedConnector } from "./connectors";
import type { HooksVerdict } from "./hooks";

/** Who may call an endpoint: anyone, the operator (token, or the dashboard's login), hook callers, a connector. */
export type EndpointAuth = "none" | "operator" | "dashboard" | "hooks" | "connector";

/** An endpoint the gateway serves; a connector's webhook names its channel. */
export interface AuditedEndpoint {
  method: string;
  path: string;
  auth: EndpointAuth;
  channel?: string;
}

export interface EndpointFacts {
  gatewayTokenSet: boolean;
  hooks: HooksVerdict;
  connectors: ReadonlyArray<AuditedConnector>;
}

function closedFor(reason: string | undefined) {
  return reason === undefined ? { enabled: true } : { enabled: false, reason };
}

export function endpointVerdicts(endpoints: ReadonlyArray<AuditedEndpoint>, facts: EndpointFacts) {
  const operator = closedFor(facts.gatewayTokenSet ? undefined : "GATEWAY_TOKEN is not set");
  return endpoints.map(({ method, path, auth, channel }) => {
    if (auth === "none") return { method, path, auth: "none", enabled: true };
    if (auth === "operator") return { method, path, auth: "GATEWAY_TOKEN", ...operator };
    // The dashboard: a login with the operator token, then a signed cookie and CSRF tokens.
    if (auth === "dashboard")
      return { method, path, auth: "GATEWAY_TOKEN (login form, signed cookie)", ...operator };
    if (auth === "hooks") return { method, path, auth: "HOOKS_TOKEN", ...closedFor(facts.hooks.reason) };
    const c = facts.connectors.find((x) => x.channel === channel);
    if (!c) return { method, path, auth: "connector", enabled: false, reason: `no connector "${channel}"` };
    const missing = c.secrets.filter((x) => x.required && !x.set).map((x) => x.name);
    return {
      method,
      path,
      auth: c.type === "webhook" ? `signature (${c.secretEnv})` : `${c.type} verification`,
      ...closedFor(
        c.secretSet ? undefined : `${missing.join(", ")} ${missing.length === 1 ? "is" : "are"} not set`,
      ),
    };
  });
}
