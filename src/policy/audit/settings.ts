/**
 * The settings `security.audit` warns about beyond secrets and endpoints: session tools over
 * HTTP, who sees and messages which sessions, send policy and command owners.
 */
import type { Config } from "../../config/schema";
import type { Findings } from "./findings";

/** Warns about the settings; returns the sandboxed agents (the report lists them). */
export function auditSettings(config: Config, found: Findings): string[] {
  for (const tool of config.gateway.tools.allow.filter(
    (t) => t === "sessions_send" || t === "sessions_spawn" || t === "subagents",
  )) {
    const can =
      tool === "sessions_send"
        ? "message any visible session"
        : tool === "sessions_spawn"
          ? "start sub-agents"
          : "cancel sub-agent runs";
    found.warn({
      id: "http-session-tool",
      severity: "medium",
      setting: "gateway.tools.allow",
      message: `${tool} is allowed over /tools/invoke and /mcp: operator-token holders can ${can} over HTTP; remove it unless needed`,
    });
  }
  const a2a = config.tools.agentToAgent;
  if (config.tools.sessions.visibility === "all" && a2a.enabled && a2a.allow.length === 0) {
    found.warn({
      id: "visibility-everything",
      severity: "medium",
      setting: "tools.agentToAgent.allow",
      message:
        'visibility "all" with agentToAgent enabled and an empty allow list: every agent sees and can message every session; list the agents that may talk',
    });
  }
  const sandboxedAgents = config.agents.list.filter((a) => a.sandbox.mode !== "off").map((a) => a.id);
  if (sandboxedAgents.length && config.agents.defaults.sandbox.sessionToolsVisibility === "all") {
    found.warn({
      id: "sandbox-sees-all",
      severity: "low",
      setting: "agents.defaults.sandbox.sessionToolsVisibility",
      message: `sandboxed agents (${sandboxedAgents.join(", ")}) are not clamped to the sessions they spawned; use "spawned"`,
    });
  }
  const sendPolicy = config.session.sendPolicy;
  if (sendPolicy.default === "allow" && !sendPolicy.rules.some((r) => r.action === "deny")) {
    found.warn({
      id: "send-policy-open",
      severity: "info",
      setting: "session.sendPolicy",
      message: "every session may post to its chat (default allow, no deny rules)",
    });
  }
  if (config.commands.owners.length === 0) {
    found.warn({
      id: "no-command-owners",
      severity: "info",
      setting: "commands.owners",
      message: "no owners: /send on|off|inherit can only be used through the operator API",
    });
  }
  return sandboxedAgents;
}
