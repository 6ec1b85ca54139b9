/**
 * The value types config fields are made of (ids, secret names, URLs, bounded integers, time
 * zones, cron expressions), each with a message that says what is allowed and what was given.
 */
import { Cron } from "croner";
import { z } from "zod";

/** How config messages show an offending value: strings quoted, containers by kind only. */
export function formatValue(value: unknown): string {
  if (typeof value === "string") {
    const quoted = JSON.stringify(value);
    return quoted.length > 80 ? `${quoted.slice(0, 77)}…"` : quoted;
  }
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return String(value);
}

const ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
export const ID_RULE =
  'a lowercase id (a-z, 0-9, "_", "-"; starting with a letter or digit; at most 64 characters)';

/** Agent, channel, account, provider and job ids: already canonical (SPEC §2), so keys built from them are too. */
export const Id = z
  .string()
  .regex(ID_PATTERN, { error: (iss) => `must be ${ID_RULE} (got ${formatValue(iss.input)})` });

export const EnvName = z.string().regex(/^[A-Z_][A-Z0-9_]*$/, {
  error: (iss) =>
    `must be the name of a Worker secret or variable, like "TELEGRAM_CONNECTOR_SECRET" (got ${formatValue(iss.input)})`,
});

export const HttpUrl = z.url({
  protocol: /^https?$/,
  error: (iss) => `must be an http:// or https:// URL (got ${formatValue(iss.input)})`,
});

export const NonEmpty = z.string().min(1);

export function intBetween(min: number, max: number) {
  const error = (iss: { input?: unknown }) =>
    `must be an integer between ${min} and ${max} (got ${formatValue(iss.input)})`;
  return z.int().min(min, { error }).max(max, { error });
}

export const PositiveInt = z.int().min(1);
export const NonNegativeInt = z.int().min(0);

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** IANA names only matter to Intl: Workers have no host local time, so this is the whole check. */
export const TimeZone = z.string().refine(isTimeZone, {
  error: (iss) =>
    `must be an IANA time zone name such as "UTC" or "Europe/Berlin" (got ${formatValue(iss.input)})`,
});

/**
 * Five fields (minute hour day-of-month month day-of-week) or a nickname such as `@daily`: jobs
 * are evaluated by a once-a-minute trigger (SPEC §17), so a seconds field could never be honoured.
 */
export const CronSchedule = z.string().superRefine((expr, ctx) => {
  const trimmed = expr.trim();
  const fields = trimmed ? trimmed.split(/\s+/).length : 0;
  if (!trimmed.startsWith("@") && fields !== 5) {
    ctx.addIssue({
      code: "custom",
      message: `must be a cron expression with 5 fields "minute hour day-of-month month day-of-week" or a nickname like "@daily" (got ${formatValue(expr)}, ${fields} field${fields === 1 ? "" : "s"})`,
    });
    return;
  }
  try {
    new Cron(trimmed, { paused: true, mode: "5-part" });
  } catch (err) {
    const reason = (err instanceof Error ? err.message : String(err)).replace(/^CronPattern:\s*/, "");
    ctx.addIssue({
      code: "custom",
      message: `is not a valid cron expression: ${reason} (got ${formatValue(expr)})`,
    });
  }
});
