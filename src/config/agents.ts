/**
 * `agents`, `bindings` and `tools` in SWITCHBOARD_CONFIG (SPEC §15): the agents and
 * their defaults (model, steps, context, sub-agents, sandbox, pruning, compaction), which
 * messages bind to which agent, and which tools agents have and which sessions they see.
 */
import { z } from "zod";
import { formatValue, ID_RULE, Id, intBetween, NonEmpty, NonNegativeInt, PositiveInt } from "./fields";

/**
 * What an agent may spend (SPEC §21), US dollars of priced model calls, days and months in
 * `session.timezone`: over all its sessions per day and per month, and per session per day.
 */
const BudgetSchema = z.strictObject({
  dailyUsd: z.number().positive().optional(),
  monthlyUsd: z.number().positive().optional(),
  sessionDailyUsd: z.number().positive().optional(),
});
export type Budget = z.output<typeof BudgetSchema>;

export const AgentDefaultsSchema = z.strictObject({
  model: NonEmpty.default("echo/echo"),
  /** The budget of every agent without one of its own. */
  budget: BudgetSchema.optional(),
  maxSteps: intBetween(1, 100).default(16),
  systemPrompt: z.string().optional(),
  /** Most transcript messages loaded into one turn's context. */
  contextMessages: PositiveInt.default(200),
  subagents: z
    .strictObject({
      archiveAfterMinutes: NonNegativeInt.default(60),
      maxConcurrent: PositiveInt.default(8),
    })
    .prefault({}),
  sandbox: z
    .strictObject({ sessionToolsVisibility: z.enum(["spawned", "all"]).default("spawned") })
    .prefault({}),
  contextPruning: z.strictObject({ keepToolResults: NonNegativeInt.default(3) }).prefault({}),
  compaction: z
    .strictObject({
      threshold: z
        .number()
        .gt(0, { error: (iss) => `must be greater than 0 and at most 1 (got ${formatValue(iss.input)})` })
        .lte(1, { error: (iss) => `must be greater than 0 and at most 1 (got ${formatValue(iss.input)})` })
        .default(0.8),
      memoryFlush: z.boolean().default(true),
    })
    .prefault({}),
});
export type AgentDefaults = z.output<typeof AgentDefaultsSchema>;

const ToolFilterSchema = z.strictObject({
  /** Absent: every tool not denied. */
  allow: z.array(NonEmpty).optional(),
  deny: z.array(NonEmpty).default(() => []),
});
export type ToolFilter = z.output<typeof ToolFilterSchema>;

const AgentSchema = z.strictObject({
  id: Id,
  default: z.boolean().default(false),
  name: z.string().optional(),
  systemPrompt: z.string().optional(),
  model: NonEmpty.optional(),
  /** Overrides the context window of whatever model this agent runs (see `models.catalog`). */
  contextTokens: PositiveInt.optional(),
  /** This agent's budget, replacing `agents.defaults.budget` whole. */
  budget: BudgetSchema.optional(),
  workspace: z.strictObject({ writable: z.boolean().default(true) }).prefault({}),
  tools: ToolFilterSchema.prefault({}),
  subagents: z
    .strictObject({
      allowAgents: z
        .array(
          z.string().regex(/^(\*|[a-z0-9][a-z0-9_-]{0,63})$/, {
            error: (iss) => `must be "*" or ${ID_RULE} (got ${formatValue(iss.input)})`,
          }),
        )
        .default(() => []),
    })
    .prefault({}),
  sandbox: z.strictObject({ mode: z.enum(["off", "non-main", "all"]).default("off") }).prefault({}),
});
export type AgentConfig = z.output<typeof AgentSchema>;

export const AgentListSchema = z
  .array(AgentSchema)
  .default(() => [])
  .superRefine((agents, ctx) => {
    const firstIndex = new Map<string, number>();
    let defaultIndex: number | undefined;
    agents.forEach((agent, i) => {
      const seen = firstIndex.get(agent.id);
      if (seen === undefined) firstIndex.set(agent.id, i);
      else {
        ctx.addIssue({
          code: "custom",
          path: [i, "id"],
          message: `duplicate agent id "${agent.id}" (already used by agents.list[${seen}])`,
        });
      }
      if (!agent.default) return;
      if (defaultIndex === undefined) defaultIndex = i;
      else {
        ctx.addIssue({
          code: "custom",
          path: [i, "default"],
          message: `only one agent may be the default (agents.list[${defaultIndex}] already is)`,
        });
      }
    });
  });

export const BindingSchema = z.strictObject({
  agentId: Id,
  match: z
    .strictObject({
      channel: Id.optional(),
      accountId: Id.optional(),
      peer: z.strictObject({ kind: z.enum(["direct", "group", "channel"]), id: NonEmpty }).optional(),
    })
    .prefault({}),
});
export type BindingConfig = z.output<typeof BindingSchema>;

export const ToolsSchema = z.strictObject({
  allow: z.array(NonEmpty).optional(),
  deny: z.array(NonEmpty).default(() => []),
  sessions: z
    .strictObject({ visibility: z.enum(["self", "tree", "agent", "all"]).default("tree") })
    .prefault({}),
  agentToAgent: z
    .strictObject({
      enabled: z.boolean().default(false),
      /** Glob patterns; empty = any agent. */
      allow: z.array(NonEmpty).default(() => []),
    })
    .prefault({}),
  subagents: z.strictObject({ tools: ToolFilterSchema.prefault({}) }).prefault({}),
});
export type ToolsConfig = z.output<typeof ToolsSchema>;
export type SessionVisibility = ToolsConfig["sessions"]["visibility"];
