/**
 * `security.audit` (SPEC §13): a report an operator can act on, built from the config, which
 * secrets are set, and what the caller (the RPC) gathers for it: the provider each model
 * reference runs on, the secrets each platform connector needs, and the endpoints the gateway
 * serves. Pure policy: no I/O, and no secret value, or any part of one, in the report.
 *
 * Report: `ok` (no high-severity warning), `summary` (warnings per severity), `secrets` (name,
 * purpose, set, required), `endpoints` (method, path, auth, enabled, reason), `hooks`,
 * `sendPolicy`, `visibility`, `agentToAgent`, `connectors`, `providers` (used by which settings,
 * key set or not), `httpTools` (tools allowed over /tools/invoke), `commands`, and `warnings`
 * (id, severity, setting, message saying what to change), most severe first.
 */
import type { Config } from "../../config/schema";
import { auditConnectors, type SecretNamesOf } from "./connectors";
import { type AuditedEndpoint, endpointVerdicts } from "./endpoints";
import { Findings, secretValue } from "./findings";
import { auditHooks } from "./hooks";
import { auditProviders, type ProviderOf } from "./providers";
import { auditSettings } from "./settings";

export type { AuditedEndpoint, EndpointAuth } from "./endpoints";
export { MIN_SECRET_LENGTH, type Severity, type Warning } from "./findings";

/** What the audit needs beyond the config and the secrets, gathered by its caller. */
export interface AuditFacts {
  providerOf: ProviderOf;
  secretNamesOf: SecretNamesOf;
  endpoints: ReadonlyArray<AuditedEndpoint>;
}

export function securityAudit(config: Config, env: Record<string, unknown>, facts: AuditFacts) {
  const found = new Findings(env);
  const gatewayToken = secretValue(env, "GATEWAY_TOKEN");
  const hooksToken = secretValue(env, "HOOKS_TOKEN");
  const hooks = config.hooks;

  found.secret(
    {
      name: "GATEWAY_TOKEN",
      purpose: "operator surfaces: /rpc, /tools/invoke, /v1/transcripts, the /ui dashboard login",
      set: gatewayToken !== undefined,
      required: true,
    },
    "GATEWAY_TOKEN",
  );
  if (!gatewayToken) {
    found.warn({
      id: "gateway-token-missing",
      severity: "medium",
      setting: "GATEWAY_TOKEN",
      message:
        "GATEWAY_TOKEN is not set: the operator surfaces answer 503 (wrangler secret put GATEWAY_TOKEN)",
    });
  }
  found.secret(
    {
      name: "HOOKS_TOKEN",
      purpose: "hooks: /hooks/agent, /hooks/wake",
      set: hooksToken !== undefined,
      required: hooks.enabled,
    },
    "HOOKS_TOKEN",
  );

  const webhookOf = (channel: string) =>
    facts.endpoints.find((e) => e.channel === channel)?.path ?? "its webhook";
  const connectors = auditConnectors(config, found, facts.secretNamesOf, webhookOf);
  const providers = auditProviders(config, found, facts.providerOf);
  const hooksVerdict = auditHooks(config, found, gatewayToken, hooksToken);
  const endpoints = endpointVerdicts(facts.endpoints, {
    gatewayTokenSet: gatewayToken !== undefined,
    hooks: hooksVerdict,
    connectors,
  });
  const sandboxedAgents = auditSettings(config, found);

  const { warnings, summary } = found.sorted();
  const a2a = config.tools.agentToAgent;
  return {
    ok: !warnings.some((w) => w.severity === "high"),
    summary,
    secrets: found.secrets,
    endpoints,
    hooks: {
      enabled: hooks.enabled,
      tokenSet: hooksToken !== undefined,
      allowRequestSessionKey: hooks.allowRequestSessionKey,
      allowedSessionKeyPrefixes: hooks.allowedSessionKeyPrefixes,
    },
    sendPolicy: { default: config.session.sendPolicy.default, rules: config.session.sendPolicy.rules.length },
    visibility: {
      level: config.tools.sessions.visibility,
      sandbox: {
        sessionToolsVisibility: config.agents.defaults.sandbox.sessionToolsVisibility,
        sandboxedAgents,
      },
    },
    agentToAgent: {
      enabled: a2a.enabled,
      allow: a2a.allow,
      maxPingPongTurns: config.session.agentToAgent.maxPingPongTurns,
      maxHops: config.session.agentToAgent.maxHops,
    },
    connectors,
    providers,
    httpTools: { allowed: config.gateway.tools.allow },
    commands: { owners: config.commands.owners.length },
    warnings,
  };
}
