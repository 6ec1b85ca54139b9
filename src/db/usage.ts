/**
 * The usage rollup (SPEC §21): what a run adds to its day's row (`usage_daily`, per day, session
 * and model) in its finalize's batch, and `usage.summary`, which reads those rows of every
 * database and adds them up by day, agent, model, channel or session.
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

/** The addition of one run, guarded by its run row (goes before the statement that ends it). */
export function usageRollupStatement(db: D1Database, a: UsageAddition): D1PreparedStatement {
  const u = a.usage;
  return db
    .prepare(
      `INSERT INTO usage_daily (day, session_key, model, agent_id, channel, runs, model_calls,
         input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, unpriced_calls)
       SELECT ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?
       WHERE NOT EXISTS (SELECT 1 FROM runs WHERE run_id = ? AND status IN ${ENDED})
       ON CONFLICT (day, session_key, model) DO UPDATE SET
         channel = coalesce(excluded.channel, usage_daily.channel),
         runs = usage_daily.runs + 1,
         model_calls = usage_daily.model_calls + excluded.model_calls,
         input_tokens = usage_daily.input_tokens + excluded.input_tokens,
         output_tokens = usage_daily.output_tokens + excluded.output_tokens,
         cache_read_tokens = usage_daily.cache_read_tokens + excluded.cache_read_tokens,
         cache_write_tokens = usage_daily.cache_write_tokens + excluded.cache_write_tokens,
         cost_usd = usage_daily.cost_usd + excluded.cost_usd,
         unpriced_calls = usage_daily.unpriced_calls + excluded.unpriced_calls`,
    )
    .bind(
      a.day,
      a.sessionKey,
      a.model ?? "",
      a.agentId,
      a.channel,
      u.modelCalls ?? 0,
      u.inputTokens,
      u.outputTokens,
      u.cacheReadTokens ?? 0,
      u.cacheWriteTokens ?? 0,
      u.costUsd ?? 0,
      u.unpricedCalls ?? 0,
      a.runId,
    );
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
  const sql = `SELECT ${group} AS "group", ${SUMS.map(([k, c]) => `SUM(${c}) AS "${k}"`).join(", ")}
    FROM usage_daily WHERE ${where.join(" AND ")} GROUP BY 1`;
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
  const sql = `SELECT coalesce(SUM(cost_usd), 0) AS month,
      coalesce(SUM(CASE WHEN day = ?2 THEN cost_usd END), 0) AS day,
      coalesce(SUM(CASE WHEN day = ?2 AND session_key = ?3 THEN cost_usd END), 0) AS session
    FROM usage_daily WHERE day >= ?1 AND day <= ?2 AND agent_id = ?4`;
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
    FROM usage_daily WHERE day >= ?1 AND day <= ?2 GROUP BY agent_id`;
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
