/**
 * The tool registry: tools are declared once with a zod schema, which gives the model its JSON
 * schema and validates the model's arguments. Which tools an agent gets is decided by
 * `tools.allow` / `tools.deny` and the agent's own `tools` entry.
 */
import { z } from "zod";
import type { AgentConfig, Config } from "../config/schema";

export interface ToolContext {
  sessionKey: string;
  agentId: string;
  runId: string;
  toolCallId: string;
  config: Config;
  env: Env;
}

export interface AgentTool<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  schema: S;
  execute(input: z.output<S>, ctx: ToolContext): Promise<unknown>;
}

export function defineTool<S extends z.ZodType>(tool: AgentTool<S>): AgentTool {
  return tool as unknown as AgentTool;
}

/** A harmless built-in: the current time in the session's timezone. */
export const currentTimeTool = defineTool({
  name: "current_time",
  description: "Returns the current date and time (ISO 8601, epoch ms) in the gateway's configured timezone.",
  schema: z.object({}).strict(),
  async execute(_input, ctx) {
    const now = new Date();
    const timeZone = ctx.config.session.timezone;
    return {
      iso: now.toISOString(),
      epochMs: now.getTime(),
      timezone: timeZone,
      local: now.toLocaleString("en-GB", { timeZone, hour12: false }),
    };
  },
});

export const BUILT_IN_TOOLS: AgentTool[] = [currentTimeTool];

function allowedBy(name: string, allow: string[] | undefined, deny: string[] | undefined): boolean {
  if (deny?.includes(name)) return false;
  return !allow || allow.includes(name) || allow.includes("*");
}

export function toolsForAgent(
  agent: AgentConfig | undefined,
  config: Config,
  all = BUILT_IN_TOOLS,
): AgentTool[] {
  return all.filter(
    (t) =>
      allowedBy(t.name, config.tools.allow, config.tools.deny) &&
      allowedBy(t.name, agent?.tools.allow, agent?.tools.deny),
  );
}
