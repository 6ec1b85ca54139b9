/**
 * Cron triggers (SPEC §11). Every sweep is bounded per invocation and idempotent:
 * - sub-agent sessions idle for `agents.defaults.subagents.archiveAfterMinutes` are archived;
 * - backstops that keep "nothing lost" true even if an alarm was dropped: actors with runs left
 *   queued/running and deliveries past due are nudged.
 */
import { loadConfig } from "../config/load";
import { archiveIdleSubagents, overdueDeliveries, staleActiveRuns } from "../db/queries";

const CHUNK = 100;
const GRACE_MS = 60_000;

export async function runScheduled(controller: ScheduledController, env: Env): Promise<void> {
  const now = controller.scheduledTime || Date.now();
  const config = loadConfig(env);
  const archiveBefore = now - config.agents.defaults.subagents.archiveAfterMinutes * 60_000;
  await archiveIdleSubagents(env, archiveBefore, now, CHUNK);
  const [runs, deliveries] = await Promise.all([
    staleActiveRuns(env, now - GRACE_MS, CHUNK),
    overdueDeliveries(env, now - GRACE_MS, CHUNK),
  ]);
  const keys = new Set([...runs.map((r) => r.sessionKey), ...deliveries.map((d) => d.sessionKey)]);
  await Promise.allSettled([...keys].map((key) => env.SESSION_ACTOR.getByName(key).kick(key)));
}
