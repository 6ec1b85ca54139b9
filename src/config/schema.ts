/**
 * The SWITCHBOARD_CONFIG document as one zod schema (SPEC §15). Every object is strict, so a
 * misspelt key is an error instead of a silently ignored setting, and every key has a default,
 * so `ConfigSchema.parse({})` is a complete, runnable config. Messages raised here are whole
 * sentences ending in "(got …)"; `load.ts` supplies the messages for zod's built-in checks and
 * prefixes each with its `config.` path.
 */
import { z } from "zod";
import { identityLinkPeerId } from "../keys/ids";
import { ConnectorSchema } from "./connectors";
import {
  CronSchedule,
  EnvName,
  formatValue,
  HttpUrl,
  ID_RULE,
  Id,
  intBetween,
  NonEmpty,
  NonNegativeInt,
  PositiveInt,
  TimeZone,
} from "./fields";
import { StorageSchema } from "./storage";

const ChatType = z.enum(["direct", "group", "channel", "thread"]);
export type ChatType = z.output<typeof ChatType>;

// ─── session ─────────────────────────────────────────────────────────────────────────────────

const ResetFields = z.strictObject({
  mode: z.enum(["daily", "idle"]).default("daily"),
  atHour: intBetween(0, 23).default(4),
  idleMinutes: PositiveInt.optional(),
});

/**
 * A reset policy (SPEC §10). Daily mode also honours `idleMinutes` when set (whichever expires
 * first wins); idle mode uses `idleMinutes` only and so needs it.
 */
export const ResetPolicySchema = ResetFields.superRefine((reset, ctx) => {
  if (reset.mode === "idle" && reset.idleMinutes === undefined) {
    ctx.addIssue({ code: "custom", path: ["idleMinutes"], message: 'is required when mode is "idle"' });
  }
});
export type ResetPolicy = z.output<typeof ResetPolicySchema>;

export const DEFAULT_RESET_POLICY: ResetPolicy = Object.freeze({ mode: "daily", atHour: 4 });

const SendPolicyRuleSchema = z.strictObject({
  action: z.enum(["allow", "deny"]),
  match: z
    .strictObject({
      channel: NonEmpty.optional(),
      /** OpenClaw's older name of `channel`, read as it. */
      provider: NonEmpty.optional(),
      chatType: ChatType.optional(),
      keyPrefix: NonEmpty.optional(),
      rawKeyPrefix: NonEmpty.optional(),
    })
    .superRefine((m, ctx) => {
      if (m.provider !== undefined && m.channel !== undefined && m.provider !== m.channel) {
        ctx.addIssue({
          code: "custom",
          path: ["provider"],
          message: `is the older name of \`channel\`; give one of them (got channel "${m.channel}" and provider "${m.provider}")`,
        });
      }
    })
    .transform(({ provider, ...m }) =>
      provider !== undefined ? { ...m, channel: m.channel ?? provider } : m,
    )
    .prefault({}),
});
export type SendPolicyRule = z.output<typeof SendPolicyRuleSchema>;

export const SendPolicyConfigSchema = z.strictObject({
  rules: z.array(SendPolicyRuleSchema).default(() => []),
  default: z.enum(["allow", "deny"]).default("allow"),
});
export type SendPolicyConfig = z.output<typeof SendPolicyConfigSchema>;

/** An identityLinks name becomes the peer id of DM keys (SPEC §2), so it needs some non-blank text. */
const IdentityLinkName = z.string().refine((name) => identityLinkPeerId(name) !== "", {
  error: (iss) =>
    `must contain more than whitespace: it becomes the peer id in the person's DM session keys (got ${formatValue(iss.input)})`,
});

const SessionFields = z.strictObject({
  scope: z.enum(["per-sender", "global"]).default("per-sender"),
  dmScope: z.enum(["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]).default("main"),
  mainKey: Id.default("main"),
  timezone: TimeZone.default("UTC"),
  identityLinks: z.record(IdentityLinkName, z.array(NonEmpty)).default(() => ({})),
  caseSensitiveChannels: z.array(Id).default(() => ["signal", "matrix"]),
  // Mode "idle" may take its minutes from the legacy `idleMinutes`, so this one is checked below.
  reset: ResetFields.optional(),
  /** Legacy: see `withEffectiveReset`. */
  idleMinutes: PositiveInt.optional(),
  resetByType: z
    .strictObject({
      direct: ResetPolicySchema.optional(),
      group: ResetPolicySchema.optional(),
      thread: ResetPolicySchema.optional(),
    })
    .prefault({}),
  resetByChannel: z.record(Id, ResetPolicySchema).default(() => ({})),
  resetTriggers: z.array(NonEmpty).default(() => ["/new", "/reset"]),
  sendPolicy: SendPolicyConfigSchema.prefault({}),
  agentToAgent: z
    .strictObject({
      maxPingPongTurns: intBetween(0, 5).default(5),
      maxHops: PositiveInt.default(12),
    })
    .prefault({}),
  queue: z
    .strictObject({
      mode: z.enum(["followup", "collect"]).default("followup"),
      cap: PositiveInt.default(50),
    })
    .prefault({}),
  retention: z.strictObject({ days: PositiveInt.optional() }).prefault({}),
  /**
   * A connector's message is recorded in D1 (entry, run, inputs, inbound row) with its run's
   * next write, at most a second after the ack, instead of before the ack: one D1 round trip
   * per message instead of two. `false` records it before the ack.
   */
  writeBehind: z.boolean().default(true),
  /**
   * OpenClaw's path of its session store file. Accepted so that an OpenClaw config loads, and
   * ignored: the session index lives in D1 (`status` says so).
   */
  store: z.string().optional(),
});

/**
 * Resolves the effective default reset policy, so `session.reset` is always defined after parsing:
 * - `session.reset` set: used as is; its `idleMinutes` falls back to the legacy `session.idleMinutes`.
 * - Legacy rule (SPEC §10): `session.idleMinutes` set with neither `reset` nor any `resetByType`
 *   entry → idle-only, `{ mode: "idle", idleMinutes }`.
 * - `session.idleMinutes` with `resetByType` entries but no `reset` → daily at 4 plus that idle
 *   limit (as OpenClaw resolves it).
 * - Otherwise daily at 04:00 in `session.timezone`.
 * `resetByType` / `resetByChannel` entries replace this policy whole for their chat type/channel.
 */
function withEffectiveReset(session: z.output<typeof SessionFields>) {
  const { reset, idleMinutes: legacyIdle, resetByType } = session;
  const hasTypeResets = Object.values(resetByType).some((policy) => policy !== undefined);
  let effective: ResetPolicy;
  if (reset) {
    const idleMinutes = reset.idleMinutes ?? legacyIdle;
    effective = idleMinutes === undefined ? { ...reset } : { ...reset, idleMinutes };
  } else if (legacyIdle !== undefined) {
    effective = { mode: hasTypeResets ? "daily" : "idle", atHour: 4, idleMinutes: legacyIdle };
  } else {
    effective = { ...DEFAULT_RESET_POLICY };
  }
  return { ...session, reset: effective };
}

const SessionSchema = SessionFields.superRefine((session, ctx) => {
  // Two names with one peer id ("Alice", "alice") would silently share one DM session.
  const nameOf = new Map<string, string>();
  for (const name of Object.keys(session.identityLinks)) {
    const peerId = identityLinkPeerId(name);
    const earlier = nameOf.get(peerId);
    if (earlier === undefined) {
      nameOf.set(peerId, name);
      continue;
    }
    ctx.addIssue({
      code: "custom",
      path: ["identityLinks", name],
      message: `becomes the same peer id "${peerId}" as the name ${JSON.stringify(earlier)}: put both lists under one name`,
    });
  }
  const reset = session.reset;
  if (reset?.mode === "idle" && reset.idleMinutes === undefined && session.idleMinutes === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["reset", "idleMinutes"],
      message: 'is required when mode is "idle" (or set the legacy session.idleMinutes)',
    });
  }
}).transform(withEffectiveReset);
export type SessionConfig = z.output<typeof SessionSchema>;
export type DmScope = SessionConfig["dmScope"];

// ─── agents ──────────────────────────────────────────────────────────────────────────────────

const AgentDefaultsSchema = z.strictObject({
  model: NonEmpty.default("echo/echo"),
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

const AgentListSchema = z
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

// ─── bindings, tools ─────────────────────────────────────────────────────────────────────────

const BindingSchema = z.strictObject({
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

const ToolsSchema = z.strictObject({
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

// ─── models ──────────────────────────────────────────────────────────────────────────────────

const ProviderSchema = z
  .strictObject({
    api: z.enum(["openai", "anthropic", "openai-compatible", "workers-ai", "echo"]),
    baseUrl: HttpUrl.optional(),
    apiKeyEnv: EnvName.optional(),
    contextWindow: PositiveInt.optional(),
    headers: z.record(NonEmpty, z.string()).optional(),
  })
  .superRefine((provider, ctx) => {
    if (provider.api === "openai-compatible" && provider.baseUrl === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["baseUrl"],
        message: 'is required when api is "openai-compatible"',
      });
    }
  });
export type ProviderConfig = z.output<typeof ProviderSchema>;

const ModelRef = z.string().regex(/^[^/\s]+\/\S/, {
  error: (iss) => `must be a "provider/model" reference (got ${formatValue(iss.input)})`,
});

/** A `models.catalog` key: the exact `provider/model` a reference resolves to (provider lowercase). */
const CatalogRef = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}\/\S+$/, {
  error: (iss) =>
    `must be an exact "provider/model" reference with a lowercase provider id (got ${formatValue(iss.input)})`,
});

const ModelLimitsSchema = z.strictObject({
  contextTokens: PositiveInt,
  maxOutputTokens: PositiveInt.optional(),
});

const ModelsSchema = z.strictObject({
  providers: z.record(Id, ProviderSchema).default(() => ({})),
  aliases: z.record(NonEmpty, ModelRef).default(() => ({})),
  /**
   * Limits per exact model reference; an entry replaces the built-in catalog's whole. Context
   * window resolution: `agents.list[].contextTokens` > this > the built-in catalog
   * (`src/agent/catalog.ts`) > the provider's `contextWindow` > `contextWindow` below.
   */
  catalog: z.record(CatalogRef, ModelLimitsSchema).default(() => ({})),
  retry: z
    .strictObject({
      /** Total provider calls per model step, the first included (SPEC §17). */
      attempts: intBetween(1, 10).default(3),
      baseDelayMs: NonNegativeInt.default(500),
    })
    .prefault({}),
  /** Context window for models that nothing above names (default 128,000 tokens). */
  contextWindow: PositiveInt.default(128_000),
});
export type ModelsConfig = z.output<typeof ModelsSchema>;

// ─── connectors, hooks, gateway, commands ────────────────────────────────────────────────────

const HooksSchema = z.strictObject({
  enabled: z.boolean().default(false),
  allowRequestSessionKey: z.boolean().default(false),
  allowedSessionKeyPrefixes: z.array(NonEmpty).default(() => ["hook:"]),
});
export type HooksConfig = z.output<typeof HooksSchema>;

// ─── cron, delivery ──────────────────────────────────────────────────────────────────────────

const CronJobSchema = z.strictObject({
  id: Id,
  schedule: CronSchedule,
  /** Defaults to `session.timezone` where the job is evaluated. */
  timezone: TimeZone.optional(),
  agentId: Id.optional(),
  message: NonEmpty,
  isolated: z.boolean().default(true),
  deliver: z.strictObject({ channel: Id, to: NonEmpty, accountId: Id.optional() }).optional(),
});
export type CronJobConfig = z.output<typeof CronJobSchema>;

const CronSchema = z.strictObject({
  jobs: z
    .array(CronJobSchema)
    .default(() => [])
    .superRefine((jobs, ctx) => {
      const firstIndex = new Map<string, number>();
      jobs.forEach((job, i) => {
        const seen = firstIndex.get(job.id);
        if (seen === undefined) firstIndex.set(job.id, i);
        else {
          ctx.addIssue({
            code: "custom",
            path: [i, "id"],
            message: `duplicate job id "${job.id}" (already used by cron.jobs[${seen}])`,
          });
        }
      });
    }),
});

const DeliverySchema = z
  .strictObject({
    maxAttempts: intBetween(1, 50).default(8),
    baseDelayMs: PositiveInt.default(1000),
    maxDelayMs: PositiveInt.default(600_000),
  })
  .superRefine((delivery, ctx) => {
    if (delivery.maxDelayMs < delivery.baseDelayMs) {
      ctx.addIssue({
        code: "custom",
        path: ["maxDelayMs"],
        message: `must be at least baseDelayMs (${delivery.baseDelayMs}) (got ${delivery.maxDelayMs})`,
      });
    }
  });
export type DeliveryConfig = z.output<typeof DeliverySchema>;

// ─── the document ────────────────────────────────────────────────────────────────────────────

export const ConfigSchema = z
  .strictObject({
    session: SessionSchema.prefault({}),
    agents: z
      .strictObject({ defaults: AgentDefaultsSchema.prefault({}), list: AgentListSchema })
      .prefault({}),
    bindings: z.array(BindingSchema).default(() => []),
    tools: ToolsSchema.prefault({}),
    models: ModelsSchema.prefault({}),
    connectors: z.record(Id, ConnectorSchema).default(() => ({})),
    hooks: HooksSchema.prefault({}),
    gateway: z
      .strictObject({ tools: z.strictObject({ allow: z.array(NonEmpty).default(() => []) }).prefault({}) })
      .prefault({}),
    commands: z
      .strictObject({
        /** `channel:peerId` entries or identityLinks names. */
        owners: z.array(NonEmpty).default(() => []),
      })
      .prefault({}),
    cron: CronSchema.prefault({}),
    delivery: DeliverySchema.prefault({}),
    storage: StorageSchema.prefault({}),
  })
  .superRefine((config, ctx) => {
    // A job delivering to a channel with no connector would only ever produce dead deliveries.
    const channels = Object.keys(config.connectors);
    config.cron.jobs.forEach((job, i) => {
      if (job.deliver && !channels.includes(job.deliver.channel)) {
        ctx.addIssue({
          code: "custom",
          path: ["cron", "jobs", i, "deliver", "channel"],
          message: `unknown connector "${job.deliver.channel}" (${channels.length ? `connectors has: ${channels.join(", ")}` : "no connectors are configured"})`,
        });
      }
    });
    // With no agents configured every id is accepted (the implicit agent is `main`); otherwise a
    // reference to an unconfigured agent would silently route nowhere.
    const known = config.agents.list.map((agent) => agent.id);
    if (known.length === 0) return;
    const knownList = known.join(", ");
    config.bindings.forEach((binding, i) => {
      if (!known.includes(binding.agentId)) {
        ctx.addIssue({
          code: "custom",
          path: ["bindings", i, "agentId"],
          message: `unknown agent "${binding.agentId}" (agents.list has: ${knownList})`,
        });
      }
    });
    config.cron.jobs.forEach((job, i) => {
      if (job.agentId !== undefined && !known.includes(job.agentId)) {
        ctx.addIssue({
          code: "custom",
          path: ["cron", "jobs", i, "agentId"],
          message: `unknown agent "${job.agentId}" (agents.list has: ${knownList})`,
        });
      }
    });
  });

export type Config = z.output<typeof ConfigSchema>;
/** What a config document may contain before defaults are applied (for tests and tooling). */
export type ConfigInput = z.input<typeof ConfigSchema>;
