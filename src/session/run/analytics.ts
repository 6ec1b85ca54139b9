/**
 * Usage as Workers Analytics Engine data points (SPEC §21, optional): with a binding named by
 * `observability.analyticsEngine`, one point per model call and one per run end, so usage can
 * be queried with Cloudflare's SQL API at any scale. Without the setting nothing is written;
 * with a setting whose binding the Worker lacks, a warning once and nothing written. A write
 * never fails a run: Analytics Engine is best-effort by design, and so are these points (a
 * model call made again after a crash is a second point, as it is a second call).
 *
 * Every point has the same columns, so one query sums both kinds:
 *   index1  the agent
 *   blob1 agent, blob2 model, blob3 channel ("" when none), blob4 kind ("model_call" | "run"),
 *   blob5 outcome (a model call's ok | error | aborted; a run's end status)
 *   double1 input tokens, double2 output tokens, double3 cache read tokens, double4 cache write
 *   tokens, double5 cost in US dollars of the priced calls, double6 ms, double7 model calls,
 *   double8 model calls without a price (so an unpriced cost is never read as 0)
 */
import type { ModelCallReport } from "../../agent/checkpoint";
import type { Config } from "../../config/schema";
import type { SessionRow } from "../../db/queries";
import type { Usage } from "../../transcript/message";

/** Who a point is about. */
export interface UsageSubject {
  agentId: string;
  channel: string | null;
}

/** The agent and channel of a session's run, as the usage rollup records them (run/lifecycle.ts). */
export function usageSubject(entry: SessionRow | undefined, agentId: string): UsageSubject {
  return { agentId: entry?.agentId ?? agentId, channel: entry?.channel ?? entry?.lastChannel ?? null };
}

export interface UsageEvents {
  modelCall(who: UsageSubject, call: ModelCallReport): void;
  runEnded(who: UsageSubject, run: { status: string; model: string | null; ms: number; usage: Usage }): void;
}

const NONE: UsageEvents = { modelCall() {}, runEnded() {} };
const warned = new Set<string>();

function isDataset(value: unknown): value is AnalyticsEngineDataset {
  return typeof (value as AnalyticsEngineDataset | undefined)?.writeDataPoint === "function";
}

/** The gateway's usage events: to the configured dataset, or nowhere. */
export function usageEvents(env: Env, config: Config): UsageEvents {
  const name = config.observability.analyticsEngine;
  if (!name) return NONE;
  const dataset = (env as unknown as Record<string, unknown>)[name];
  if (!isDataset(dataset)) {
    if (!warned.has(name)) {
      warned.add(name);
      console.warn(
        `observability.analyticsEngine is "${name}", but the Worker has no Analytics Engine binding of that name (declare it in wrangler.toml: [[analytics_engine_datasets]] binding = "${name}"); no usage data points are written`,
      );
    }
    return NONE;
  }
  const write = (point: AnalyticsEngineDataPoint) => {
    try {
      dataset.writeDataPoint(point);
    } catch (error) {
      console.error("analytics engine write failed:", error);
    }
  };
  return {
    modelCall(who, call) {
      write({
        indexes: [who.agentId],
        blobs: [who.agentId, call.model, who.channel ?? "", "model_call", call.outcome],
        doubles: [
          call.tokens.inputTokens,
          call.tokens.outputTokens,
          call.tokens.cacheReadTokens,
          call.tokens.cacheWriteTokens,
          call.costUsd ?? 0,
          call.ms,
          1,
          call.outcome === "ok" && call.costUsd === null ? 1 : 0,
        ],
      });
    },
    runEnded(who, run) {
      const u = run.usage;
      write({
        indexes: [who.agentId],
        blobs: [who.agentId, run.model ?? "", who.channel ?? "", "run", run.status],
        doubles: [
          u.inputTokens,
          u.outputTokens,
          u.cacheReadTokens ?? 0,
          u.cacheWriteTokens ?? 0,
          u.costUsd ?? 0,
          run.ms,
          u.modelCalls ?? 0,
          u.unpricedCalls ?? 0,
        ],
      });
    },
  };
}
