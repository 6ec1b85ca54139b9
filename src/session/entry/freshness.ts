/**
 * Session freshness (SPEC §10): daily resets at `atHour` in `session.timezone`, idle resets
 * after `idleMinutes` without a user interaction; when both apply, whichever expires first
 * wins. Pure functions: the caller supplies `now`.
 */
import { ownEntry } from "../../config/lookup";
import type { Config } from "../../config/schema";
import { localFields, offsetMs } from "../../time/zones";

export interface ResetPolicy {
  mode: "daily" | "idle";
  atHour?: number;
  idleMinutes?: number;
}

export interface FreshnessInput {
  sessionStartedAt: number;
  lastInteractionAt: number | null;
}

/** `resetByChannel` beats `resetByType` beats `reset` (SPEC §10). */
export function resolveResetPolicy(
  session: Config["session"],
  channel: string | null | undefined,
  chatType: "direct" | "group" | "channel",
  thread: boolean,
): ResetPolicy {
  const byChannel = channel ? ownEntry(session.resetByChannel, channel) : undefined;
  if (byChannel) return byChannel;
  const type = thread ? "thread" : chatType === "direct" ? "direct" : "group";
  return session.resetByType[type] ?? session.reset ?? { mode: "daily", atHour: 4 };
}

/** UTC instant of `hour`:00 local time on the given local calendar day. */
function zonedHour(y: number, m: number, d: number, hour: number, timeZone: string): number {
  const guess = Date.UTC(y, m, d, hour);
  const first = guess - offsetMs(guess, timeZone);
  return guess - offsetMs(first, timeZone);
}

/** The first daily boundary strictly after `t`. */
export function nextDailyBoundary(t: number, atHour: number, timeZone: string): number {
  const { year, month, day } = localFields(t, timeZone);
  const today = zonedHour(year, month - 1, day, atHour, timeZone);
  if (today > t) return today;
  // Date.UTC rolls day + 1 over month and year ends.
  return zonedHour(year, month - 1, day + 1, atHour, timeZone);
}

/** When the session becomes stale under the policy, or undefined if it never does. */
export function sessionExpiry(
  entry: FreshnessInput,
  policy: ResetPolicy,
  timeZone: string,
): number | undefined {
  const candidates: number[] = [];
  if (policy.mode === "daily")
    candidates.push(nextDailyBoundary(entry.sessionStartedAt, policy.atHour ?? 4, timeZone));
  if (policy.idleMinutes !== undefined) {
    candidates.push((entry.lastInteractionAt ?? entry.sessionStartedAt) + policy.idleMinutes * 60_000);
  }
  return candidates.length ? Math.min(...candidates) : undefined;
}

export function evaluateFreshness(
  entry: FreshnessInput,
  policy: ResetPolicy,
  timeZone: string,
  now: number,
): { fresh: boolean; expiresAt?: number } {
  const expiresAt = sessionExpiry(entry, policy, timeZone);
  return expiresAt === undefined ? { fresh: true } : { fresh: now < expiresAt, expiresAt };
}
