/**
 * Which tools a session gets (SPEC §5, §7): every tool, filtered by `tools.allow`/`tools.deny`
 * and the agent's own `tools` entry. Sub-agent sessions get the set minus the session tools
 * unless `tools.subagents.tools` says otherwise; they keep the memory tools, which act on the
 * sub-agent's own agent.
 */
import type { AgentConfig } from "../config/agents";
import type { Config } from "../config/schema";
import { isSubagentKey } from "../keys/session-key";

export { isSubagentKey };

import { agentsListTool } from "./agents-list";
import { currentTimeTool } from "./current-time";
import { memoryReadTool } from "./memory-read";
import { memoryWriteTool } from "./memory-write";
import { sessionStatusTool } from "./session-status";
import { sessionsHistoryTool } from "./sessions-history";
import { sessionsListTool } from "./sessions-list";
import { sessionsSearchTool } from "./sessions-search";
import { sessionsSendTool } from "./sessions-send";
import { sessionsSpawnTool } from "./sessions-spawn";
import { sessionsYieldTool } from "./sessions-yield";
import { subagentsTool } from "./subagents";
import type { AgentTool } from "./types";

/** The tools that act on other sessions. */
export const SESSION_TOOL_NAMES: ReadonlySet<string> = new Set([
  "sessions_list",
  "sessions_history",
  "sessions_send",
  "sessions_spawn",
  "sessions_search",
  "subagents",
  "sessions_yield",
]);

const registry: AgentTool[] = [
  currentTimeTool,
  sessionsListTool,
  sessionsHistoryTool,
  sessionsSearchTool,
  sessionsSendTool,
  sessionsSpawnTool,
  subagentsTool,
  sessionsYieldTool,
  agentsListTool,
  sessionStatusTool,
  memoryReadTool,
  memoryWriteTool,
];

export function allTools(): readonly AgentTool[] {
  return registry;
}

export function findTool(name: string): AgentTool | undefined {
  return registry.find((t) => t.name === name);
}

function allowedBy(name: string, allow: string[] | undefined, deny: string[] | undefined): boolean {
  if (deny?.includes(name)) return false;
  return !allow || allow.includes(name) || allow.includes("*");
}

/** The tools available to a session of `agent` (key decides the sub-agent rule). */
export function toolsForSession(
  sessionKey: string,
  agent: AgentConfig | undefined,
  config: Config,
): AgentTool[] {
  const sub = isSubagentKey(sessionKey);
  const subCfg = config.tools.subagents.tools;
  return registry.filter((t) => {
    if (!allowedBy(t.name, config.tools.allow, config.tools.deny)) return false;
    if (!allowedBy(t.name, agent?.tools.allow, agent?.tools.deny)) return false;
    if (sub) {
      if (subCfg.deny.includes(t.name)) return false;
      if (subCfg.allow) return subCfg.allow.includes(t.name) || subCfg.allow.includes("*");
      return !SESSION_TOOL_NAMES.has(t.name);
    }
    return true;
  });
}
