/**
 * Operator RPC methods about the gateway itself: `status` (version, agents, connectors, what the
 * scheduled maintenance did last, the scheduled jobs), `agents.list`, `cron.list` and
 * `security.audit`.
 */
import { z } from "zod";
import type { ConfigError } from "../config/load";
import { ignoredSettings } from "../config/notices";
import { listJobs } from "../cron/jobs";
import { readTaskRuns } from "../db/maintenance";
import { countDeadRecords } from "../db/queries";
import { defaultAgentId } from "../keys/agent-binding";
import { VERSION } from "../version";
import { type Method, method } from "./method";
import { securityAudit } from "./security-audit";

export const StatusParams = z.strictObject({});

/**
 * The `status` payload when SWITCHBOARD_CONFIG is invalid: the operator sees every problem here
 * (other callers get a generic 500), and nothing else, since the rest depends on the config.
 */
export function invalidConfigStatus(error: ConfigError) {
  return { version: VERSION, now: Date.now(), config: { valid: false, problems: error.problems } };
}

export const GATEWAY_METHODS: Record<string, Method> = {
  status: method(StatusParams, async (_p, { config, env }) => {
    const now = Date.now();
    const [tasks, jobs, deadRecords] = await Promise.all([
      readTaskRuns(env),
      listJobs(env, config, now),
      countDeadRecords(env),
    ]);
    const ignored = ignoredSettings(config);
    return {
      version: VERSION,
      now,
      config: { valid: true, ...(ignored.length ? { ignored } : {}) },
      defaultAgentId: defaultAgentId(config.agents.list),
      defaultModel: config.agents.defaults.model,
      agents: config.agents.list.map((a) => a.id),
      connectors: Object.entries(config.connectors).map(([channel, c]) => ({
        channel,
        deliverUrl: !!c.deliverUrl,
        secretSet: typeof (env as unknown as Record<string, unknown>)[c.secretEnv] === "string",
      })),
      queue: config.session.queue,
      // Deferred records D1 refused again and again; `records.dead` lists them.
      deadRecords,
      // What each scheduled task did on its last run, and on the last run that changed something.
      maintenance: Object.fromEntries(
        tasks.map((t) => [t.task, { lastRun: t.lastRun, ...(t.lastWork ? { lastWork: t.lastWork } : {}) }]),
      ),
      jobs,
    };
  }),

  "cron.list": method(z.strictObject({}), async (_p, { config, env }) => ({
    jobs: await listJobs(env, config, Date.now()),
  })),

  "security.audit": method(z.strictObject({}), async (_p, { config, env }) =>
    securityAudit(config, env as unknown as Record<string, unknown>),
  ),

  "agents.list": method(z.strictObject({}), async (_p, { config }) => {
    const def = defaultAgentId(config.agents.list);
    const list = config.agents.list.length
      ? config.agents.list
      : [{ id: "main", name: undefined, model: undefined }];
    return {
      defaultId: def,
      agents: list.map((a) => ({
        id: a.id,
        ...(a.name ? { name: a.name } : {}),
        default: a.id === def,
        model: a.model ?? config.agents.defaults.model,
      })),
    };
  }),
};
