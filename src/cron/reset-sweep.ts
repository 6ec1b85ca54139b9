/**
 * The reset sweep (SPEC §10, §11): closes sessions whose reset policy has expired, on time,
 * without waiting for their next message. Due sessions come from the partial index
 * `sessions_due` (live sessions by expiry), never a scan of all sessions, in chunks, at most
 * `MAX_CHUNKS` per invocation. Each is re-checked under the current config: still stale → closed
 * (`expiredAt` = the instant it went stale, the same value its actor writes); a later expiry (the
 * config changed) → rescheduled. Updates are guarded by the expiry they were read with, so two
 * overlapping invocations, or an invocation racing a new message, change each row once.
 *
 * Closing does not mint a sessionId: the row keeps the old one (its transcript stays readable)
 * and shows `expired`; the next run under the key starts a new sessionId (admission.ts).
 */
import type { Config } from "../config/schema";
import { applyExpiryChanges, dueSessions, type ExpiryChange } from "../db/maintenance";
import { entryExpiry } from "../session/entry/rules";

export const SWEEP_CHUNK = 100;
export const SWEEP_MAX_CHUNKS = 10;

export interface SweepResult {
  closed: number;
  rescheduled: number;
  /** Rows another writer changed first (a new message, an overlapping sweep). */
  skipped: number;
  /** Whether due sessions are left for the next invocation. */
  more: boolean;
}

export async function sweepExpiredSessions(
  env: Env,
  config: Config,
  now: number,
  bounds = { chunk: SWEEP_CHUNK, maxChunks: SWEEP_MAX_CHUNKS },
): Promise<SweepResult> {
  const result: SweepResult = { closed: 0, rescheduled: 0, skipped: 0, more: false };
  for (let chunk = 0; chunk < bounds.maxChunks; chunk++) {
    const due = await dueSessions(env, now, bounds.chunk);
    if (due.length === 0) return result;
    const changes = due.map((row): ExpiryChange => {
      const expiry = entryExpiry(row, config);
      return expiry !== null && expiry <= now
        ? { key: row.key, was: row.expiresAt, closeAt: expiry }
        : { key: row.key, was: row.expiresAt, expiresAt: expiry };
    });
    const applied = await applyExpiryChanges(env, changes);
    changes.forEach((c, i) => {
      if (!applied[i]) result.skipped++;
      else if (c.closeAt !== undefined) result.closed++;
      else result.rescheduled++;
    });
    if (due.length < bounds.chunk) return result;
  }
  result.more = true;
  return result;
}
