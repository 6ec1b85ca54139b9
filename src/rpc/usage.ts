/**
 * Operator RPC on usage and cost (SPEC §21): `usage.summary`, the usage rollup (db/usage.ts)
 * added up by day, agent, model, channel or session over a range of days in
 * `session.timezone` (default: the last 30 days, today included), with its total.
 */
import { z } from "zod";
import { summarizeUsage, type UsageRow, usageTotal } from "../db/usage";
import { ApiError } from "../http/errors";
import { localDay } from "../time/zones";
import { Key, type Method, method } from "./method";

const Day = z.string().regex(/^\d{4}-\d\d-\d\d$/, { error: "must be a day, YYYY-MM-DD" });
const DAY_MS = 86_400_000;

/** SPEC §21: figures whose every model call was unpriced cost null, never 0. */
function withUnknownCost<R extends Omit<UsageRow, "group">>(
  r: R,
): Omit<R, "costUsd"> & { costUsd: number | null } {
  return r.modelCalls > 0 && r.unpricedCalls >= r.modelCalls ? { ...r, costUsd: null } : r;
}

/** `day` moved by `days` (calendar days; pure). */
function addDays(day: string, days: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + days * DAY_MS).toISOString().slice(0, 10);
}

export const USAGE_METHODS: Record<string, Method> = {
  "usage.summary": method(
    z.strictObject({
      from: Day.optional(),
      to: Day.optional(),
      groupBy: z.enum(["day", "agent", "model", "channel", "session"]).default("day"),
      agentId: z.string().trim().min(1).max(64).optional(),
      channel: z.string().trim().min(1).max(64).optional(),
      sessionKey: Key.optional(),
      limit: z.int().min(1).max(1000).default(100),
    }),
    async (p, { env, config }) => {
      const to = p.to ?? localDay(Date.now(), config.session.timezone);
      const from = p.from ?? addDays(to, -29);
      if (from > to) throw new ApiError("INVALID_REQUEST", `\`from\` (${from}) is after \`to\` (${to})`);
      const rows = await summarizeUsage(
        env,
        { from, to, agentId: p.agentId, channel: p.channel, sessionKey: p.sessionKey },
        p.groupBy,
      );
      return {
        from,
        to,
        groupBy: p.groupBy,
        timezone: config.session.timezone,
        rows: rows.slice(0, p.limit).map(withUnknownCost),
        ...(rows.length > p.limit ? { more: rows.length - p.limit } : {}),
        total: withUnknownCost(usageTotal(rows)),
      };
    },
  ),
};
