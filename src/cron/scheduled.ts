/**
 * Cron triggers (SPEC §11). Every sweep is bounded per invocation and idempotent. This module
 * currently runs the backstops that keep "nothing lost" true even if an alarm was dropped:
 * actors with runs left queued/running and deliveries past due are nudged.
 */
import { overdueDeliveries, staleActiveRuns } from "../db/queries";

const CHUNK = 100;
const GRACE_MS = 60_000;

export async function runScheduled(controller: ScheduledController, env: Env): Promise<void> {
  const now = controller.scheduledTime || Date.now();
  const [runs, deliveries] = await Promise.all([
    staleActiveRuns(env, now - GRACE_MS, CHUNK),
    overdueDeliveries(env, now - GRACE_MS, CHUNK),
  ]);
  const keys = new Set([...runs.map((r) => r.sessionKey), ...deliveries.map((d) => d.sessionKey)]);
  await Promise.allSettled([...keys].map((key) => env.SESSION_ACTOR.getByName(key).kick(key)));
}
