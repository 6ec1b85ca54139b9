/**
 * `agents_list` (SPEC §6): the agent ids this session may pass to `sessions_spawn` — its own
 * agent first, then `agents.list[<requester>].subagents.allowAgents` (`["*"]` = every configured
 * agent). The rule itself lives with sessions_spawn, so the two can never disagree.
 */
import { z } from "zod";
import { isSubagentKey } from "../keys/session-key";
import { spawnableAgents } from "./sessions-spawn";
import { defineTool } from "./types";

export const agentsListTool = defineTool({
  name: "agents_list",
  description: "List the agent ids you may pass as `agentId` to sessions_spawn (your own agent first).",
  schema: z.strictObject({}),
  async execute(_args, ctx) {
    const { caller, config } = ctx;
    const requester = caller.agentId;
    if (isSubagentKey(caller.sessionKey)) {
      return {
        requester,
        allowAny: false,
        agents: [],
        note: "sub-agent sessions cannot call sessions_spawn; do the work yourself or report back",
      };
    }
    const { allowAny, ids } = spawnableAgents(requester, config);
    return {
      requester,
      allowAny,
      agents: ids.map((id) => {
        const agent = config.agents.list.find((a) => a.id === id);
        return { id, ...(agent?.name ? { name: agent.name } : {}), configured: !!agent };
      }),
    };
  },
});
