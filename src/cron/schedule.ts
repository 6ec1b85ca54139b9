/**
 * When a scheduled job is due (SPEC §11, §17 "Scheduled jobs"), as pure functions of the job's
 * cron expression, its time zone and the trigger's minute. Expressions are read by `croner`
 * (5 fields, or a nickname such as `@daily`), in the job's time zone, else `session.timezone`.
 *
 * Missed minutes: a minute that passed while no trigger ran (downtime, a late trigger) is made
 * up once, by the first trigger within `CATCH_UP_MS` of it, and only if the job had run before
 * (a new or renamed job never runs for a minute before it existed). Only the most recent missed
 * minute counts: an outage is never replayed as a burst of runs.
 */
import { Cron } from "croner";

export const MINUTE_MS = 60_000;
export const CATCH_UP_MS = 30 * MINUTE_MS;

export interface JobTiming {
  schedule: string;
  timezone: string;
}

/** One parsed pattern per (expression, time zone); jobs come from config, so there are few. */
const patterns = new Map<string, Cron>();
const MAX_PATTERNS = 256;

function cronOf(job: JobTiming): Cron {
  const cacheKey = `${job.timezone}\n${job.schedule}`;
  let cron = patterns.get(cacheKey);
  if (!cron) {
    cron = new Cron(job.schedule.trim(), { paused: true, mode: "5-part", timezone: job.timezone });
    if (patterns.size >= MAX_PATTERNS) patterns.clear();
    patterns.set(cacheKey, cron);
  }
  return cron;
}

export function minuteOf(t: number): number {
  return Math.floor(t / MINUTE_MS) * MINUTE_MS;
}

/** The most recent scheduled minute at or before `minute`. */
export function latestSlot(job: JobTiming, minute: number): number | undefined {
  // croner's previousRuns includes a run earlier in the reference's own second.
  return cronOf(job)
    .previousRuns(1, new Date(minute + 1))[0]
    ?.getTime();
}

/** The first scheduled minute after `t`. */
export function nextSlot(job: JobTiming, t: number): number | undefined {
  return cronOf(job).nextRun(new Date(t))?.getTime();
}

export interface DueSlot {
  /** The scheduled minute (epoch ms) to run for: the claim key. */
  at: number;
  /** Made up after it was missed. */
  late: boolean;
}

/**
 * The minute a trigger at `tick` runs the job for, if any: the tick's own minute when the
 * schedule matches it; else a missed minute within the catch-up window that is newer than the
 * job's last claimed minute (`lastClaimed`, undefined when it never ran).
 */
export function dueSlot(job: JobTiming, tick: number, lastClaimed: number | undefined): DueSlot | undefined {
  const minute = minuteOf(tick);
  const slot = latestSlot(job, minute);
  if (slot === undefined) return undefined;
  if (slot === minute) return { at: minute, late: false };
  if (lastClaimed === undefined || slot <= lastClaimed || minute - slot > CATCH_UP_MS) return undefined;
  return { at: slot, late: true };
}

/** Whether a missed minute could be made up at `tick` (the caller then reads the last claim). */
export function mayCatchUp(job: JobTiming, tick: number): boolean {
  const minute = minuteOf(tick);
  const slot = latestSlot(job, minute);
  return slot !== undefined && slot < minute && minute - slot <= CATCH_UP_MS;
}
