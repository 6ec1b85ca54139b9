/**
 * Bench phase 16: `usage.summary` (SPEC §21) by day over the last 30 days against a
 * `sessions.list` of 50 rows, both operator RPCs through POST /rpc, one request at a time, in
 * alternating blocks (bench/search.ts's), with 100,000 runs' worth of usage in D1. The usage
 * rollup (`usage_daily`, one row per day, session and model, and `usage_agents`, per day, agent,
 * model and channel) is seeded by bulk SQL as the runs' finalizes would have written it, beside the 10,000 sessions those runs belong to, before the
 * gateway starts: a run adds to its day's row of its session, so the rows the summary reads
 * depend on how the runs fall on days. Two shapes, each on a gateway of its own: 10 runs per
 * session on 4 of the 30 days (a chat's conversations come in spells: 40,000 rows), and every
 * run on a day of its own (the most rows 100,000 runs can make in 10,000 sessions: 100,000
 * rows). `usage.summary` by session (its top 100 of 10,000 groups) is timed beside them,
 * informational. `node bench/run.ts --usage` runs it alone.
 */
import { rmSync } from "node:fs";
import type { LocalServer } from "../scripts/lib/local-server.ts";
import { alternatingBlocks, type ReadCost, type SearchContext, seedLocalD1 } from "./search.ts";

export const RUNS = 100_000;
export const SESSIONS = 10_000;
export const DAYS = 30;
const AGENTS = ["main", "sales", "support", "ops"];
const CHANNELS = ["telegram", "slack", "discord", "whatsapp"];

export const SHAPES = [
  { label: "10 runs per session on 4 of 30 days", activeDays: 4 },
  { label: "every run on a day of its own", activeDays: 10 },
] as const;

export interface UsageCosts {
  label: string;
  /** Rollup rows seeded (day, session, model). */
  rows: number;
  list: ReadCost;
  byDay: ReadCost;
  bySession: ReadCost;
  /** What the summary by day answered: its days and its total of runs (the seed, read back). */
  days: number;
  totalRuns: number;
}

/** `YYYY-MM-DD` of `now` and the 29 days before it, in UTC (the gateway's default timezone). */
function lastDays(now: number): string[] {
  return Array.from({ length: DAYS }, (_, i) => new Date(now - i * 86_400_000).toISOString().slice(0, 10));
}

/**
 * The seed: SESSIONS sessions (agent and channel by turns) and the rollup rows of RUNS runs, each
 * session's 10 runs spread over `activeDays` distinct days (its row k on day (s + 7k) mod 30),
 * each run about 4,500 tokens in (2,500 read from the cache), 300 out and a tenth of a cent.
 */
function seedSql(activeDays: number, now: number): string {
  const runsPerSession = RUNS / SESSIONS;
  const rows = SESSIONS * activeDays;
  const days = JSON.stringify(lastDays(now));
  const agents = JSON.stringify(AGENTS);
  const channels = JSON.stringify(CHANNELS);
  const pick = (json: string, index: string) => `json_extract('${json}', '$[' || (${index}) || ']')`;
  const agent = (s: string) => pick(agents, `${s} % ${AGENTS.length}`);
  const channel = (s: string) => pick(channels, `(${s} / ${AGENTS.length}) % ${CHANNELS.length}`);
  const key = (s: string) => `'agent:' || ${agent(s)} || ':' || ${channel(s)} || ':dm:usage-' || ${s}`;
  // Row j: session s = j % SESSIONS, its k-th active day; the 10 runs shared out over its rows.
  const runs = `(${Math.floor(runsPerSession / activeDays)} + CASE WHEN j / ${SESSIONS} < ${runsPerSession % activeDays} THEN 1 ELSE 0 END)`;
  return `
INSERT INTO sessions (key, agent_id, session_id, kind, chat_type, channel, display_name, created_at, updated_at,
  session_started_at, last_interaction_at, model, context_tokens, input_tokens, output_tokens, total_tokens,
  system_sent, delivery_context, run_status, expires_at)
WITH RECURSIVE n(s) AS (SELECT 0 UNION ALL SELECT s + 1 FROM n WHERE s < ${SESSIONS - 1})
SELECT ${key("s")}, ${agent("s")}, printf('05a9e000-0000-4000-8000-%012d', s), 'other', 'direct',
  ${channel("s")}, 'Seed ' || s, ${now} - s * 1000, ${now} - s * 1000, ${now} - s * 1000, ${now} - s * 1000,
  'openai/gpt-4o-mini', 32000, 20, 20, 40, 1,
  json_object('channel', ${channel("s")}, 'to', 'usage-' || s, 'accountId', 'default'), 'idle', ${now + 86_400_000}
FROM n;
INSERT INTO transcripts (session_id, session_key, created_at)
SELECT session_id, key, created_at FROM sessions WHERE key LIKE '%:dm:usage-%';
INSERT INTO usage_daily (day, session_key, model, agent_id, channel, runs, model_calls, input_tokens,
  output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, unpriced_calls)
WITH RECURSIVE r(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM r WHERE j < ${rows - 1})
SELECT ${pick(days, `(j % ${SESSIONS} + 7 * (j / ${SESSIONS})) % ${DAYS}`)}, ${key(`(j % ${SESSIONS})`)},
  'openai/gpt-4o-mini', ${agent(`(j % ${SESSIONS})`)}, ${channel(`(j % ${SESSIONS})`)}, ${runs},
  ${runs} + (j % 3 = 0), ${runs} * (4000 + j % 1000), ${runs} * 300, ${runs} * 2500, 0,
  ${runs} * (0.0009 + (j % 100) / 1e6), 0
FROM r;
INSERT INTO usage_agents SELECT day, agent_id, model, coalesce(channel, ''), SUM(runs), SUM(model_calls),
  SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens), SUM(cache_write_tokens), SUM(cost_usd),
  SUM(unpriced_calls)
FROM usage_daily GROUP BY 1, 2, 3, 4;`;
}

/** Phase 16 at one shape: seed, start, time the list and both summaries in alternating blocks. */
async function atShape(ctx: SearchContext, shape: (typeof SHAPES)[number]): Promise<UsageCosts> {
  const { launcher } = ctx;
  const dir = launcher.scratchDir("switchboard-bench-usage-");
  let server: LocalServer | undefined;
  const rows = SESSIONS * shape.activeDays;
  try {
    ctx.log(
      `phase 16: usage.summary, ${RUNS} runs (${shape.label}: ${rows} rollup rows): migrating and seeding`,
    );
    await launcher.applyLocalMigrations(dir, { d1: ["DB"] });
    const seconds = await seedLocalD1(ctx, dir, "seed-usage.sql", seedSql(shape.activeDays, Date.now()));
    ctx.log(`seeded in ${seconds.toFixed(1)} s`);
    server = await launcher.startLocalServer({
      persistTo: dir,
      migrate: false,
      d1: ["DB"],
      vars: ctx.vars,
      config: ctx.config,
    });
    const target = server;
    const rpc = async <T>(method: string, params: Record<string, unknown>): Promise<T> => {
      const res = await fetch(`${target.url}/rpc/${method}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.token}`, "content-type": "application/json" },
        body: JSON.stringify(params),
      });
      const parsed = (await res.json()) as { ok: boolean; payload?: T };
      if (!res.ok || !parsed.ok || !parsed.payload)
        throw new Error(`${method} → ${res.status}: ${JSON.stringify(parsed).slice(0, 300)}`);
      return parsed.payload;
    };
    interface Summary {
      rows: unknown[];
      total: { runs: number };
    }
    const first = await rpc<Summary>("usage.summary", { groupBy: "day" });
    const costs = await alternatingBlocks(ctx, target.pid, {
      list: async () => (await rpc<{ sessions: unknown[] }>("sessions.list", { limit: 50 })).sessions.length,
      byDay: async () => (await rpc<Summary>("usage.summary", { groupBy: "day" })).rows.length,
      bySession: async () => (await rpc<Summary>("usage.summary", { groupBy: "session" })).rows.length,
    });
    return { label: shape.label, rows, ...costs, days: first.rows.length, totalRuns: first.total.runs };
  } finally {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Phase 16 at both shapes, fewer rows first. */
export async function usagePhase(ctx: SearchContext): Promise<UsageCosts[]> {
  const out: UsageCosts[] = [];
  for (const shape of SHAPES) out.push(await atShape(ctx, shape));
  return out;
}
