/**
 * `security.audit` (SPEC §13): a report an operator can act on, built from the config and which
 * secrets are set. Pure. It reads secret values only to decide facts (set, equal to another
 * secret, shorter than `MIN_SECRET_LENGTH`, a known development value) and never puts a value,
 * or any part of one, in the report.
 *
 * Report: `ok` (no high-severity warning), `summary` (warnings per severity), `secrets` (name,
 * purpose, set, required), `endpoints` (method, path, auth, enabled, reason), `hooks`,
 * `sendPolicy`, `visibility`, `agentToAgent`, `connectors`, `providers` (used by which settings,
 * key set or not), `httpTools` (tools allowed over /tools/invoke), `commands`, and `warnings`
 * (id, severity, setting, message saying what to change), most severe first.
 */
import { resolveModelRef } from "../agent/models";
import { accessOf, accountIdsOf, accountOf } from "../config/connectors";
import type { Config } from "../config/schema";
import { platformOf } from "../connectors/registry";
import type { Account } from "../connectors/types";
import { endpointsOf } from "../http/surface";
import { agentMainKey } from "../keys/session-key";

export type Severity = "high" | "medium" | "low" | "info";

export interface Warning {
  id: string;
  severity: Severity;
  setting: string;
  message: string;
}

/** Development values shipped in .dev.vars.example and the test setup: never in production. */
const DEV_VALUES = new Set(["dev-token", "dev-hooks-token", "dev-connector-secret"]);
export const MIN_SECRET_LENGTH = 24;
const SEVERITY_ORDER: Severity[] = ["high", "medium", "low", "info"];

function secretValue(env: Record<string, unknown>, name: string): string | undefined {
  const v = env[name];
  return typeof v === "string" && v !== "" ? v : undefined;
}

interface ProviderUse {
  name: string;
  api: string;
  apiKeyEnv?: string;
  usedBy: string[];
}

/** The providers the config's model references reach, and which settings reference them. */
function providersInUse(config: Config, warn: (w: Warning) => void): Map<string, ProviderUse> {
  const refs: Array<[setting: string, ref: string]> = [
    ["agents.defaults.model", config.agents.defaults.model],
  ];
  config.agents.list.forEach((a, i) => {
    if (a.model) refs.push([`agents.list[${i}].model (${a.id})`, a.model]);
  });
  for (const [alias, ref] of Object.entries(config.models.aliases))
    refs.push([`models.aliases.${alias}`, ref]);
  const used = new Map<string, ProviderUse>();
  for (const [setting, ref] of refs) {
    try {
      const resolved = resolveModelRef(ref, config);
      const entry = used.get(resolved.provider) ?? {
        name: resolved.provider,
        api: resolved.spec.api,
        ...(resolved.spec.apiKeyEnv ? { apiKeyEnv: resolved.spec.apiKeyEnv } : {}),
        usedBy: [],
      };
      entry.usedBy.push(setting);
      used.set(resolved.provider, entry);
    } catch (error) {
      warn({
        id: "model-unknown",
        severity: "high",
        setting,
        message: `${error instanceof Error ? error.message : String(error)}; runs using it fail`,
      });
    }
  }
  return used;
}

export function securityAudit(config: Config, env: Record<string, unknown>) {
  const served = endpointsOf(config);
  const webhookOf = (channel: string) => served.find((e) => e.channel === channel)?.path ?? "its webhook";
  const warnings: Warning[] = [];
  const warn = (w: Warning) => warnings.push(w);

  const gateway = secretValue(env, "GATEWAY_TOKEN");
  const hooksToken = secretValue(env, "HOOKS_TOKEN");
  const hooks = config.hooks;
  const tokensEqual = gateway !== undefined && gateway === hooksToken;

  // ─── secrets ───────────────────────────────────────────────────────────────────────────────
  const secrets: Array<{ name: string; purpose: string; set: boolean; required: boolean }> = [];
  const checkStrength = (name: string, setting: string) => {
    const v = secretValue(env, name);
    if (v === undefined) return;
    if (DEV_VALUES.has(v)) {
      warn({
        id: "secret-dev-value",
        severity: "high",
        setting,
        message: `${name} holds a development value from .dev.vars.example; set a random secret (wrangler secret put ${name})`,
      });
    } else if (v.length < MIN_SECRET_LENGTH) {
      warn({
        id: "secret-short",
        severity: "medium",
        setting,
        message: `${name} is shorter than ${MIN_SECRET_LENGTH} characters; use a long random value`,
      });
    }
  };
  secrets.push({
    name: "GATEWAY_TOKEN",
    purpose: "operator surfaces: /rpc, /tools/invoke, /v1/transcripts, the /ui dashboard login",
    set: gateway !== undefined,
    required: true,
  });
  checkStrength("GATEWAY_TOKEN", "GATEWAY_TOKEN");
  if (!gateway) {
    warn({
      id: "gateway-token-missing",
      severity: "medium",
      setting: "GATEWAY_TOKEN",
      message:
        "GATEWAY_TOKEN is not set: the operator surfaces answer 503 (wrangler secret put GATEWAY_TOKEN)",
    });
  }
  secrets.push({
    name: "HOOKS_TOKEN",
    purpose: "hooks: /hooks/agent, /hooks/wake",
    set: hooksToken !== undefined,
    required: hooks.enabled,
  });
  checkStrength("HOOKS_TOKEN", "HOOKS_TOKEN");

  const connectors = Object.entries(config.connectors).map(([channel, c]) => {
    const access = accessOf(c);
    if (access.dmPolicy === "open" && c.type !== "webhook") {
      warn({
        id: "connector-open",
        severity: "medium",
        setting: `connectors.${channel}.dmPolicy`,
        message: `connector "${channel}" answers anyone who writes to the bot (dmPolicy "open"): every message is a model call; "pairing" lets an operator approve each sender`,
      });
    }
    if (c.type !== "webhook") {
      // Each account's secrets, by env name, and whether they are set.
      const named = (accountIdsOf(c) ?? []).flatMap((accountId) => {
        const account = accountOf(c, accountId);
        if (!account) return [];
        return platformOf(c)
          .secretNames(account as Account)
          .map((n) => ({ ...n, accountId }));
      });
      const secretsOf: Array<{ name: string; accountId: string; set: boolean; required: boolean }> = [];
      for (const n of named) {
        const set = secretValue(env, n.env) !== undefined;
        secrets.push({
          name: n.env,
          purpose: `connector "${channel}" (${c.type}, account ${n.accountId}): ${n.path}`,
          set,
          required: n.required,
        });
        checkStrength(n.env, `connectors.${channel}.${n.path}`);
        if (!set && n.required) {
          warn({
            id: "connector-secret-missing",
            severity: "medium",
            setting: `connectors.${channel}.${n.path}`,
            message: `${n.env} is not set: ${webhookOf(channel)} answers 503 until it is (wrangler secret put ${n.env})`,
          });
        }
        secretsOf.push({ name: n.env, accountId: n.accountId, set, required: n.required });
      }
      return {
        channel,
        type: c.type,
        webhook: webhookOf(channel),
        secretSet: secretsOf.every((x) => x.set || !x.required),
        secrets: secretsOf,
        accounts: accountIdsOf(c) ?? [],
        access,
      };
    }
    const secretSet = secretValue(env, c.secretEnv) !== undefined;
    secrets.push({
      name: c.secretEnv,
      purpose: `connector "${channel}": inbound signatures and signed deliveries`,
      set: secretSet,
      required: true,
    });
    checkStrength(c.secretEnv, `connectors.${channel}.secretEnv`);
    if (!secretSet) {
      warn({
        id: "connector-secret-missing",
        severity: "medium",
        setting: `connectors.${channel}.secretEnv`,
        message: `${c.secretEnv} is not set: ${webhookOf(channel)} answers 503 and replies to it cannot be signed`,
      });
    }
    if (!c.deliverUrl) {
      warn({
        id: "connector-no-deliver-url",
        severity: "low",
        setting: `connectors.${channel}.deliverUrl`,
        message: `connector "${channel}" has no deliverUrl: replies to it end dead; set the bridge's delivery URL`,
      });
    }
    return {
      channel,
      type: c.type,
      webhook: webhookOf(channel),
      secretEnv: c.secretEnv,
      secretSet,
      secrets: [{ name: c.secretEnv, accountId: "*", set: secretSet, required: true }],
      deliverUrl: !!c.deliverUrl,
      ...(c.accounts ? { accounts: c.accounts } : {}),
      access,
    };
  });

  const providers = [...providersInUse(config, warn).values()].map((p) => {
    const keySet = p.apiKeyEnv ? secretValue(env, p.apiKeyEnv) !== undefined : true;
    // openai-compatible servers (vLLM, Ollama) may need no key; the others do.
    const required = !!p.apiKeyEnv && p.api !== "openai-compatible";
    if (p.apiKeyEnv)
      secrets.push({ name: p.apiKeyEnv, purpose: `model provider "${p.name}"`, set: keySet, required });
    if (p.apiKeyEnv && !keySet && required) {
      warn({
        id: "provider-key-missing",
        severity: "high",
        setting: p.usedBy[0] ?? `models.providers.${p.name}`,
        message: `provider "${p.name}" needs ${p.apiKeyEnv}, which is not set: runs of ${p.usedBy.join(", ")} fail (wrangler secret put ${p.apiKeyEnv})`,
      });
    }
    return {
      name: p.name,
      api: p.api,
      ...(p.apiKeyEnv ? { apiKeyEnv: p.apiKeyEnv } : {}),
      keySet,
      usedBy: p.usedBy,
    };
  });

  // ─── hooks ─────────────────────────────────────────────────────────────────────────────────
  const hooksOpen = hooks.enabled && hooksToken !== undefined && !tokensEqual;
  const hooksReason = !hooks.enabled
    ? "hooks.enabled is false"
    : !hooksToken
      ? "HOOKS_TOKEN is not set"
      : tokensEqual
        ? "HOOKS_TOKEN equals GATEWAY_TOKEN"
        : undefined;
  if (tokensEqual) {
    warn({
      id: "hooks-token-is-operator-token",
      severity: "high",
      setting: "HOOKS_TOKEN",
      message:
        "HOOKS_TOKEN equals GATEWAY_TOKEN: hook callers would hold operator access, so the hooks surface stays closed; give it its own secret",
    });
  }
  if (hooks.enabled && !hooksToken) {
    warn({
      id: "hooks-token-missing",
      severity: "medium",
      setting: "hooks.enabled",
      message: "hooks.enabled is true but HOOKS_TOKEN is not set: /hooks/agent and /hooks/wake answer 503",
    });
  }
  if (!hooks.enabled && hooksToken) {
    warn({
      id: "hooks-token-unused",
      severity: "info",
      setting: "hooks.enabled",
      message: "HOOKS_TOKEN is set but hooks.enabled is false: the hooks surface is closed",
    });
  }
  if (hooks.allowRequestSessionKey) {
    const prefixes = hooks.allowedSessionKeyPrefixes.map((p) => p.trim().toLowerCase());
    if (prefixes.length === 0) {
      warn({
        id: "hooks-any-session-key",
        severity: "high",
        setting: "hooks.allowedSessionKeyPrefixes",
        message:
          'hooks.allowRequestSessionKey is true with no allowed prefixes: a hook caller may run in any session, an agent\'s main session included; list prefixes such as "hook:"',
      });
    } else {
      const agents = config.agents.list.length ? config.agents.list.map((a) => a.id) : ["main"];
      const mains = agents.map((id) => agentMainKey(id, config.session));
      const reaching = prefixes.filter(
        (p) => "agent:".startsWith(p) || p.startsWith("agent:") || mains.some((m) => m.startsWith(p)),
      );
      if (reaching.length) {
        warn({
          id: "hooks-chat-session-keys",
          severity: "medium",
          setting: "hooks.allowedSessionKeyPrefixes",
          message: `prefix ${reaching.map((p) => JSON.stringify(p)).join(", ")} lets hook callers write into chat sessions; prefer a prefix of their own such as "hook:"`,
        });
      }
    }
  }

  // ─── endpoints ─────────────────────────────────────────────────────────────────────────────
  const operator = gateway ? { enabled: true } : { enabled: false, reason: "GATEWAY_TOKEN is not set" };
  const endpoints = served.map(({ method, path, auth, channel }) => {
    if (auth === "none") return { method, path, auth: "none", enabled: true };
    if (auth === "operator") return { method, path, auth: "GATEWAY_TOKEN", ...operator };
    // The dashboard: a login with the operator token, then a signed cookie and CSRF tokens.
    if (auth === "dashboard")
      return { method, path, auth: "GATEWAY_TOKEN (login form, signed cookie)", ...operator };
    if (auth === "hooks")
      return {
        method,
        path,
        auth: "HOOKS_TOKEN",
        enabled: hooksOpen,
        ...(hooksReason ? { reason: hooksReason } : {}),
      };
    const c = connectors.find((x) => x.channel === channel);
    if (!c) return { method, path, auth: "connector", enabled: false, reason: `no connector "${channel}"` };
    const missing = c.secrets.filter((x) => x.required && !x.set).map((x) => x.name);
    return {
      method,
      path,
      auth: c.type === "webhook" ? `signature (${c.secretEnv})` : `${c.type} verification`,
      enabled: c.secretSet,
      ...(c.secretSet
        ? {}
        : { reason: `${missing.join(", ")} ${missing.length === 1 ? "is" : "are"} not set` }),
    };
  });

  // ─── tools, visibility, policy ─────────────────────────────────────────────────────────────
  const httpTools = config.gateway.tools.allow;
  for (const tool of httpTools.filter((t) => t === "sessions_send" || t === "sessions_spawn")) {
    warn({
      id: "http-session-tool",
      severity: "medium",
      setting: "gateway.tools.allow",
      message: `${tool} is allowed over /tools/invoke and /mcp: operator-token holders can ${tool === "sessions_send" ? "message any visible session" : "start sub-agents"} over HTTP; remove it unless needed`,
    });
  }
  const a2a = config.tools.agentToAgent;
  if (config.tools.sessions.visibility === "all" && a2a.enabled && a2a.allow.length === 0) {
    warn({
      id: "visibility-everything",
      severity: "medium",
      setting: "tools.agentToAgent.allow",
      message:
        'visibility "all" with agentToAgent enabled and an empty allow list: every agent sees and can message every session; list the agents that may talk',
    });
  }
  const sandboxedAgents = config.agents.list.filter((a) => a.sandbox.mode !== "off").map((a) => a.id);
  if (sandboxedAgents.length && config.agents.defaults.sandbox.sessionToolsVisibility === "all") {
    warn({
      id: "sandbox-sees-all",
      severity: "low",
      setting: "agents.defaults.sandbox.sessionToolsVisibility",
      message: `sandboxed agents (${sandboxedAgents.join(", ")}) are not clamped to the sessions they spawned; use "spawned"`,
    });
  }
  const sendPolicy = config.session.sendPolicy;
  if (sendPolicy.default === "allow" && !sendPolicy.rules.some((r) => r.action === "deny")) {
    warn({
      id: "send-policy-open",
      severity: "info",
      setting: "session.sendPolicy",
      message: "every session may post to its chat (default allow, no deny rules)",
    });
  }
  if (config.commands.owners.length === 0) {
    warn({
      id: "no-command-owners",
      severity: "info",
      setting: "commands.owners",
      message: "no owners: /send on|off|inherit can only be used through the operator API",
    });
  }

  warnings.sort((x, y) => SEVERITY_ORDER.indexOf(x.severity) - SEVERITY_ORDER.indexOf(y.severity));
  const summary = Object.fromEntries(
    SEVERITY_ORDER.map((s) => [s, warnings.filter((w) => w.severity === s).length]),
  );
  return {
    ok: !warnings.some((w) => w.severity === "high"),
    summary,
    secrets,
    endpoints,
    hooks: {
      enabled: hooks.enabled,
      tokenSet: hooksToken !== undefined,
      allowRequestSessionKey: hooks.allowRequestSessionKey,
      allowedSessionKeyPrefixes: hooks.allowedSessionKeyPrefixes,
    },
    sendPolicy: { default: sendPolicy.default, rules: sendPolicy.rules.length },
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
    httpTools: { allowed: httpTools },
    commands: { owners: config.commands.owners.length },
    warnings,
  };
}
