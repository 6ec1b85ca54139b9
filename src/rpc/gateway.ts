/**
 * Operator RPC methods about the gateway itself: `status` (version, agents, connectors, what the
 * scheduled maintenance did last, the scheduled jobs), `agents.list`, `cron.list` and
 * `security.audit` (the policy in policy/audit/, over the facts gathered here).
 */
import { z } from "zod";
import { agentsOverBudget } from "../agent/budget";
import { resolveModelRef } from "../agent/models";
import { accountIdsOf, accountOf, type ConnectorConfig } from "../config/connectors";
import type { ConfigError } from "../config/load";
import { ignoredSettings } from "../config/notices";
import type { Config } from "../config/schema";
import { accountWith, platformOf } from "../connectors/registry";
import type { Account } from "../connectors/types";
import { listJobs } from "../cron/jobs";
import { readTaskRuns } from "../db/maintenance";
import { pendingCodes, refusalCounts } from "../db/pairing";
import { countDeadRecords } from "../db/run-records";
import { searchIndexStatus } from "../db/search";
import { agentsSpend } from "../db/usage";
import { endpointsOf, pathOf, SURFACE } from "../http/surface";
import { defaultAgentId } from "../keys/agent-binding";
import { type AuditFacts, securityAudit } from "../policy/audit/report";
import { localDay } from "../time/zones";
import { VERSION } from "../version";
import { type Method, method } from "./method";

export const StatusParams = z.strictObject({});

/**
 * The `status` payload when SWITCHBOARD_CONFIG is invalid: the operator sees every problem here
 * (other callers get a generic 500), and nothing else, since the rest depends on the config.
 */
export function invalidConfigStatus(error: ConfigError) {
  return { version: VERSION, now: Date.now(), config: { valid: false, problems: error.problems } };
}

/** A connector in `status`: its type, and whether what it needs is set (names stay in security.audit). */
function connectorStatus(channel: string, c: ConnectorConfig, env: Env) {
  if (c.type === "webhook") {
    return {
      channel,
      type: c.type,
      deliverUrl: !!c.deliverUrl,
      secretSet: typeof (env as unknown as Record<string, unknown>)[c.secretEnv] === "string",
    };
  }
  const accounts = (accountIdsOf(c) ?? []).map((accountId) => {
    const found = accountWith(c, accountId, env);
    return { accountId, secretsSet: !!found && found.missing.length === 0 };
  });
  return { channel, type: c.type, webhook: pathOf(SURFACE.platform, { channel }), accounts };
}

/** What `security.audit` needs beyond the config: the model providers, connectors' secrets and endpoints. */
export function auditFacts(config: Config): AuditFacts {
  return {
    providerOf: (ref) => {
      const { provider, spec } = resolveModelRef(ref, config);
      return { name: provider, api: spec.api, apiKeyEnv: spec.apiKeyEnv };
    },
    secretNamesOf: (connector, accountId) => {
      const account = accountOf(connector, accountId);
      return account ? platformOf(connector).secretNames(account as Account) : [];
    },
    endpoints: endpointsOf(config),
  };
}

export const GATEWAY_METHODS: Record<string, Method> = {
  status: method(StatusParams, async (_p, { config, env }) => {
    const now = Date.now();
    const budgets = config.agents.list
      .map((a) => ({ agentId: a.id, budget: a.budget ?? config.agents.defaults.budget }))
      .filter((b) => b.budget);
    const today = localDay(now, config.session.timezone);
    const [tasks, jobs, deadRecords, refused, pending, search, spent] = await Promise.all([
      readTaskRuns(env),
      listJobs(env, config, now),
      countDeadRecords(env),
      refusalCounts(env),
      pendingCodes(env, now),
      searchIndexStatus(env),
      budgets.length ? agentsSpend(env, { today, monthStart: `${today.slice(0, 8)}01` }) : new Map(),
    ]);
    const ignored = ignoredSettings(config);
    return {
      version: VERSION,
      now,
      config: { valid: true, ...(ignored.length ? { ignored } : {}) },
      defaultAgentId: defaultAgentId(config.agents.list),
      defaultModel: config.agents.defaults.model,
      agents: config.agents.list.map((a) => a.id),
      connectors: Object.entries(config.connectors).map(([channel, c]) => connectorStatus(channel, c, env)),
      // Messages the connectors' access rules refused, per channel and reason (never turns).
      access: { refused, pendingPairingCodes: pending },
      queue: config.session.queue,
      // Deferred records D1 refused again and again; `records.dead` lists them.
      deadRecords,
      // The transcript search index's backfill: messages it indexed, and left to index.
      search,
      // Agents at or over their daily or monthly budget (SPEC §21), with what they spent.
      overBudget: agentsOverBudget(budgets, spent),
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
    securityAudit(config, env as unknown as Record<string, unknown>, auditFacts(config)),
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
