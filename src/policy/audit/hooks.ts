/**
 * The hooks surface in `security.audit` (`/hooks/agent`, `/hooks/wake`): whether it is open and
 * why not, and the warnings about its token and the session keys hook callers may choose.
 */
import type { Config } from "../../config/schema";
import { agentMainKey } from "../../keys/session-key";
import type { Findings } from "./findings";

export interface HooksVerdict {
  open: boolean;
  /** Why the surface is closed. */
  reason?: string;
}

/** `gatewayToken`, `hooksToken`: the secrets' values, compared and never kept. */
export function auditHooks(
  config: Config,
  found: Findings,
  gatewayToken: string | undefined,
  hooksToken: string | undefined,
): HooksVerdict {
  const hooks = config.hooks;
  const tokensEqual = gatewayToken !== undefined && gatewayToken === hooksToken;
  const reason = !hooks.enabled
    ? "hooks.enabled is false"
    : !hooksToken
      ? "HOOKS_TOKEN is not set"
      : tokensEqual
        ? "HOOKS_TOKEN equals GATEWAY_TOKEN"
        : undefined;
  if (tokensEqual) {
    found.warn({
      id: "hooks-token-is-operator-token",
      severity: "high",
      setting: "HOOKS_TOKEN",
      message:
        "HOOKS_TOKEN equals GATEWAY_TOKEN: hook callers would hold operator access, so the hooks surface stays closed; give it its own secret",
    });
  }
  if (hooks.enabled && !hooksToken) {
    found.warn({
      id: "hooks-token-missing",
      severity: "medium",
      setting: "hooks.enabled",
      message: "hooks.enabled is true but HOOKS_TOKEN is not set: /hooks/agent and /hooks/wake answer 503",
    });
  }
  if (!hooks.enabled && hooksToken) {
    found.warn({
      id: "hooks-token-unused",
      severity: "info",
      setting: "hooks.enabled",
      message: "HOOKS_TOKEN is set but hooks.enabled is false: the hooks surface is closed",
    });
  }
  if (hooks.allowRequestSessionKey) auditHookSessionKeys(config, found);
  return reason === undefined ? { open: true } : { open: false, reason };
}

/** Which sessions hook callers may name with `allowRequestSessionKey`. */
function auditHookSessionKeys(config: Config, found: Findings): void {
  const prefixes = config.hooks.allowedSessionKeyPrefixes.map((p) => p.trim().toLowerCase());
  if (prefixes.length === 0) {
    found.warn({
      id: "hooks-any-session-key",
      severity: "high",
      setting: "hooks.allowedSessionKeyPrefixes",
      message:
        'hooks.allowRequestSessionKey is true with no allowed prefixes: a hook caller may run in any session, an agent\'s main session included; list prefixes such as "hook:"',
    });
    return;
  }
  const agents = config.agents.list.length ? config.agents.list.map((a) => a.id) : ["main"];
  const mains = agents.map((id) => agentMainKey(id, config.session));
  const reaching = prefixes.filter(
    (p) => "agent:".startsWith(p) || p.startsWith("agent:") || mains.some((m) => m.startsWith(p)),
  );
  if (reaching.length) {
    found.warn({
      id: "hooks-chat-session-keys",
      severity: "medium",
      setting: "hooks.allowedSessionKeyPrefixes",
      message: `prefix ${reaching.map((p) => JSON.stringify(p)).join(", ")} lets hook callers write into chat sessions; prefer a prefix of their own such as "hook:"`,
    });
  }
}
