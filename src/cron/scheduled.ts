/**
 * The `* * * * *` trigger (SPEC §11). Each invocation runs these tasks, each bounded and
 * idempotent, one after another, so a slow or failing task never stops the others:
 * - `jobs`: scheduled jobs due this minute (jobs.ts);
 * - `resetSweep`: sessions whose reset policy expired are closed (reset-sweep.ts);
 * - `archival`: sub-agent sessions idle for `agents.defaults.subagents.archiveAfterMinutes`;
 * - `retention`: old transcripts, runs and deliveries (`session.retention.days`, retention.ts);
 * - `searchIndex`: transcripts stored before the search index are indexed, a bounded chunk per
 *   database per invocation (db/search.ts; `npm run migrate` runs it to the end);
 * - `backstop`: actors with runs left queued/running or deliveries past due are nudged, in case
 *   an alarm was lost, so that nothing is lost.
 * What each task did is recorded in D1 (`maintenance`) and shown by the `status` RPC.
 */
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import type { TaskRun } from "../db/json-columns";
import { recordTaskRuns } from "../db/maintenance";
import { checkPlacement } from "../db/placement-check";
import { archiveIdleSubagents } from "../db/queries";
import { overdueDeliveries, staleActiveRuns } from "../db/runs";
import { backfillSearchIndex } from "../db/search";
import { runDueJobs } from "./jobs";
import { sweepExpiredSessions } from "./reset-sweep";
import { applyRetention } from "./retention";

const CHUNK = 100;
/** Backfill steps per database and invocation (each BACKFILL_ROWIDS messages at most). */
const SEARCH_BACKFILL_STEPS = 5;
const GRACE_MS = 60_000;

type Counts = Record<string, unknown>;
type Task = (
  env: Env,
  config: Config,
  now: number,
) => Promise<{ counts: Counts; worked: boolean } | undefined>;

export const TASKS: Record<string, Task> = {
  async jobs(env, config, now) {
    if (config.cron.jobs.length === 0) return undefined;
    const r = await runDueJobs(env, config, now);
    return { counts: { ...r }, worked: r.queued.length + r.skipped.length > 0 };
  },
  async resetSweep(env, config, now) {
    const r = await sweepExpiredSessions(env, config, now);
    return { counts: { ...r }, worked: r.closed + r.rescheduled > 0 };
  },
  async archival(env, config, now) {
    const before = now - config.agents.defaults.subagents.archiveAfterMinutes * 60_000;
    const archived = (await archiveIdleSubagents(env, before, now, CHUNK)).length;
    return { counts: { archived }, worked: archived > 0 };
  },
  async retention(env, config, now) {
    const r = await applyRetention(env, config, now);
    if (!r) return undefined;
    const { more, ...deleted } = r;
    return { counts: { ...r }, worked: Object.values(deleted).some((n) => n > 0) };
  },
  async searchIndex(env) {
    const r = await backfillSearchIndex(env, SEARCH_BACKFILL_STEPS);
    // Nothing to record once the backfill is done.
    return r.steps > 0 ? { counts: { ...r }, worked: true } : undefined;
  },
  async backstop(env, _config, now) {
    const [runs, deliveries] = await Promise.all([
      staleActiveRuns(env, now - GRACE_MS, CHUNK),
      overdueDeliveries(env, now - GRACE_MS, CHUNK),
    ]);
    const keys = new Set([...runs.map((r) => r.sessionKey), ...deliveries.map((d) => d.sessionKey)]);
    await Promise.allSettled([...keys].map((key) => env.SESSION_ACTOR.getByName(key).kick(key)));
    return { counts: { nudged: keys.size }, worked: keys.size > 0 };
  },
};

export async function runScheduled(
  controller: Pick<ScheduledController, "scheduledTime">,
  env: Env,
): Promise<void> {
  const now = controller.scheduledTime || Date.now();
  const config = loadConfig(env);
  try {
    await checkPlacement(env);
  } catch (error) {
    // Placed with another storage.d1: no maintenance until the rebalance (the message says so).
    console.error(`scheduled maintenance skipped: ${error instanceof Error ? error.message : error}`);
    return;
  }
  const runs: Record<string, TaskRun> = {};
  for (const [name, task] of Object.entries(TASKS)) {
    const started = Date.now();
    try {
      const result = await task(env, config, now);
      if (result)
        runs[name] = { at: now, durationMs: Date.now() - started, worked: result.worked, ...result.counts };
    } catch (error) {
      console.error(`scheduled task ${name} failed`, error);
      const message = error instanceof Error ? error.message : String(error);
      runs[name] = { at: now, durationMs: Date.now() - started, worked: false, error: message };
    }
  }
  await recordTaskRuns(env, runs);
}
