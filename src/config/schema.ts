/**
 * The SWITCHBOARD_CONFIG document as one zod schema (SPEC §15). Every object is strict, so a
 * misspelt key is an error instead of a silently ignored setting, and every key has a default,
 * so `ConfigSchema.parse({})` is a complete, runnable config. Messages raised here are whole
 * sentences ending in "(got …)"; `load.ts` supplies the messages for zod's built-in checks and
 * prefixes each with its `config.` path. The sections with files of their own: session.ts,
 * agents.ts (with bindings and tools), models.ts, connectors.ts, storage.ts; hooks, the gateway's
 * tools, commands, cron and delivery are here, with the checks across sections.
 */
import { z } from "zod";
import { AgentDefaultsSchema, AgentListSchema, BindingSchema, ToolsSchema } from "./agents";
import { ConnectorSchema } from "./connectors";
import { CronSchedule, Id, intBetween, NonEmpty, PositiveInt, TimeZone } from "./fields";
import { MediaSchema } from "./media";
import { ModelsSchema } from "./models";
import { SessionSchema } from "./session";
import { BindingName, StorageSchema } from "./storage";

// ─── hooks ───────────────────────────────────────────────────────────────────────────────────

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
    media: MediaSchema.prefault({}),
    observability: z
      .strictObject({
        /** SPEC §21: the Workers Analytics Engine binding usage data points go to; none: nowhere. */
        analyticsEngine: BindingName.optional(),
      })
      .prefault({}),
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
