/**
 * The usage rollup (SPEC §21): what a run adds to its day's rows in its finalize's batch, and
 * `usage.summary`, which reads those rows of every database and adds them up by day, agent,
 * model, channel or session. Two tables, each read where it is small: `usage_daily` (per day,
 * session and model) for what names a session (groupBy session, a sessionKey filter, a
 * session's spend today), `usage_agents` (per day, agent, model and channel) for the rest, a
 * few rows a day however many sessions there are.
 *
 * The addition is once per run however often its finalize is written: it is made only while the
 * run's row is not ended yet, and the finalize's next statement ends it (one batch, one
 * transaction), so a batch written again after a crash adds nothing.
 */
import type { Usage } from "../transcript/message";
import { allDatabases } from "./placement";

/** What a run adds to its day's row. */
export interface UsageAddition {
  runId: string;
  day: string;
  sessionKey: string;
  agentId: string;
  channel: string | null;
  model: string | null;
  usage: Usage;
}

const ENDED = "('ok', 'error', 'aborted', 'timeout', 'budget_exceeded')";

/** The addition of one run to both tables, each guarded by its run row (they go before the statement that ends it). */
export function usageRollupStatements(db: D1Database, a: UsageAddition): D1PreparedStatement[] {
  return [sessionRollup(db, a), agentRollup(db, a)];
}

/** The sums a run adds, in the order of the tables' columns after their keys. */
function sums(u: Usage): number[] {
  return [
    u.modelCalls ?? 0,
    u.inputTokens,
    u.outputTokens,
    u.cacheReadTokens ?? 0,
    u.cacheWriteTokens ?? 0,
    u.costUsd ?? 0,
    u.unpricedCalls ?? 0,
  ];
}

const ADD_SUMS = (table: string) =>
  [
    "model_calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "unpriced_calls",
  ]
    .map((c) => `${c} = ${table}.${c} + excluded.${c}`)
    .join(",\n         ");

function agentRollup(db: D1Database, a: UsageAddition): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO usage_agents (day, agent_id, model, channel, runs, model_calls, input_tokens,
         output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, unpriced_calls)
       SELECT ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?
       WHERE NOT EXISTS (SELECT 1 FROM runs WHERE run_id = ? AND status IN ${ENDED})
       ON CONFLICT (day, agent_id, model, channel) DO UPDATE SET
         runs = usage_agents.runs + 1,
         ${ADD_SUMS("usage_agents")}`,
    )
    .bind(a.day, a.agentId, a.model ?? "", a.channel ?? "", ...sums(a.usage), a.runId);
}

function sessionRollup(db: D1Database, a: UsageAddition): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO usage_daily (day, session_key, model, agent_id, channel, runs, model_calls,
         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, unpriced_calls)
       SELECT ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?
       WHERE NOT EXISTS (SELECT 1 FROM runs WHERE run_id = ? AND status IN ${ENDED})
       ON CONFLICT (day, session_key, model) DO UPDATE SET
         channel = coalesce(excluded.channel, usage_daily.channel),
         runs = usage_daily.runs + 1,
         ${ADD_SUMS("usage_daily")}`,
    )
    .bind(a.day, a.sessionKey, a.model ?? "", a.agentId, a.channel, ...sums(a.usage), a.runId);
}

export type UsageGroup = "day" | "agent" | "model" | "channel" | "session";

export interface UsageFilter {
  /** Days, `YYYY-MM-DD`, both included. */
  from: string;
  to: string;
  agentId?: string | undefined;
  channel?: string | undefined;
  sessionKey?: string | undefined;
}

export interface UsageRow {
  group: string;
  runs: number;
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
  unpricedCalls: number;
}

const GROUP_COLUMNS: Record<UsageGroup, string> = {
  day: "day",
  agent: "agent_id",
  model: "model",
  channel: "coalesce(channel, '')",
  session: "session_key",
};

const SUMS = [
  ["runs", "runs"],
  ["modelCalls", "model_calls"],
  ["inputTokens", "input_tokens"],
  ["outputTokens", "output_tokens"],
  ["cacheReadTokens", "cache_read_tokens"],
  ["cacheWriteTokens", "cache_write_tokens"],
  ["costUsd", "cost_usd"],
  ["unpricedCalls", "unpriced_calls"],
] as const;

/**
 * The rollup's rows in `filter`, added up by `groupBy` over every database (a session's rows
 * may sit in more than one after a rebalance: they add up too), largest cost first (by day:
 * in day order).
 */
export async function summarizeUsage(
  env: Env,
  filter: UsageFilter,
  groupBy: UsageGroup,
): Promise<UsageRow[]> {
  const where = ["day >= ?", "day <= ?"];
  const params: unknown[] = [filter.from, filter.to];
  if (filter.agentId !== undefined) {
    where.push("agent_id = ?");
    params.push(filter.agentId);
  }
  if (filter.channel !== undefined) {
    where.push("channel = ?");
    params.push(filter.channel);
  }
  if (filter.sessionKey !== undefined) {
    where.push("session_key = ?");
    params.push(filter.sessionKey);
  }
  const group = GROUP_COLUMNS[groupBy];
  // What names no session reads the per-agent table (channel is '' there, never null).
  const table = groupBy === "session" || filter.sessionKey !== undefined ? "usage_daily" : "usage_agents";
  const sql = `SELECT ${group} AS "group", ${SUMS.map(([k, c]) => `SUM(${c}) AS "${k}"`).join(", ")}
    FROM ${table} WHERE ${where.join(" AND ")} GROUP BY 1`;
  const parts = await Promise.all(
    allDatabases(env).map(
      async (db) =>
        (
          await db
            .prepare(sql)
            .bind(...params)
            .all<UsageRow>()
        ).results,
    ),
  );
  const merged = new Map<string, UsageRow>();
  for (const row of parts.flat()) {
    const into = merged.get(row.group);
    if (!into) {
      merged.set(row.group, { ...row });
      continue;
    }
    for (const [k] of SUMS) into[k] += row[k];
  }
  const rows = [...merged.values()];
  return groupBy === "day"
    ? rows.sort((a, b) => (a.group < b.group ? -1 : 1))
    : rows.sort((a, b) => b.costUsd - a.costUsd || b.runs - a.runs || (a.group < b.group ? -1 : 1));
}

/** The rows added up. */
export function usageTotal(rows: readonly UsageRow[]): Omit<UsageRow, "group"> {
  const total = Object.fromEntries(SUMS.map(([k]) => [k, 0])) as Omit<UsageRow, "group">;
  for (const row of rows) for (const [k] of SUMS) total[k] += row[k];
  return total;
}

/**
 * What agent `agentId` has spent since `monthStart` and on `today` (days, `YYYY-MM-DD`), and
 * session `sessionKey` today, from the rollup of every database (US dollars, priced calls).
 */
export async function agentSpend(
  env: Env,
  q: { agentId: string; sessionKey: string; today: string; monthStart: string },
): Promise<{ agentDay: number; agentMonth: number; sessionDay: number }> {
  // The agent's from the per-agent table (a few rows a day), the session's from its own day's
  // rows (a seek on the key's prefix): one statement per database.
  const sql = `SELECT
      (SELECT coalesce(SUM(cost_usd), 0) FROM usage_agents WHERE day >= ?1 AND day <= ?2 AND agent_id = ?4) AS month,
      (SELECT coalesce(SUM(cost_usd), 0) FROM usage_agents WHERE day = ?2 AND agent_id = ?4) AS day,
      (SELECT coalesce(SUM(cost_usd), 0) FROM usage_daily WHERE day = ?2 AND session_key = ?3) AS session`;
  const parts = await Promise.all(
    allDatabases(env).map((db) =>
      db
        .prepare(sql)
        .bind(q.monthStart, q.today, q.sessionKey, q.agentId)
        .first<{ month: number; day: number; session: number }>(),
    ),
  );
  const sum = (k: "month" | "day" | "session") => parts.reduce((n, p) => n + (p?.[k] ?? 0), 0);
  return { agentDay: sum("day"), agentMonth: sum("month"), sessionDay: sum("session") };
}

/** What each agent spent on `today` and since `monthStart`, from every database (US dollars). */
export async function agentsSpend(
  env: Env,
  q: { today: string; monthStart: string },
): Promise<Map<string, { day: number; month: number }>> {
  const sql = `SELECT agent_id AS agentId, coalesce(SUM(cost_usd), 0) AS month,
      coalesce(SUM(CASE WHEN day = ?2 THEN cost_usd END), 0) AS day
    FROM usage_agents WHERE day >= ?1 AND day <= ?2 GROUP BY agent_id`;
  const parts = await Promise.all(
    allDatabases(env).map(
      async (db) =>
        (
          await db
            .prepare(sql)
            .bind(q.monthStart, q.today)
            .all<{ agentId: string; month: number; day: number }>()
        ).results,
    ),
  );
  const out = new Map<string, { day: number; month: number }>();
  for (const row of parts.flat()) {
    const into = out.get(row.agentId) ?? { day: 0, month: 0 };
    out.set(row.agentId, { day: into.day + row.day, month: into.month + row.month });
  }
  return out;
}
