/**
 * Time zones without host local time (Workers have none): the offset of an IANA zone at an
 * instant, and an instant's local calendar fields. Pure; one Intl formatter per zone and the
 * offsets of hours without a transition are cached.
 */

/** One formatter per time zone: constructing an Intl.DateTimeFormat costs far more than using one. */
const formatters = new Map<string, Intl.DateTimeFormat>();
const MAX_FORMATTERS = 64;

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    // Time zones come from config, so few; the bound only guards against unbounded growth.
    if (formatters.size >= MAX_FORMATTERS) formatters.clear();
    formatters.set(timeZone, f);
  }
  return f;
}

/** The offset at an instant, asked of Intl (the expensive part: a formatToParts call). */
function formattedOffsetMs(utcMs: number, timeZone: string): number {
  const parts = formatter(timeZone).formatToParts(new Date(utcMs));
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  const asUtc = Date.UTC(
    get("year"),
    get("month") - 1,
    get("day"),
    get("hour"),
    get("minute"),
    get("second"),
  );
  return asUtc - Math.floor(utcMs / 1000) * 1000;
}

const HOUR_MS = 3_600_000;
/** Offsets of whole UTC hours with no transition inside them, by zone and hour. */
const hourOffsets = new Map<string, number>();
const MAX_HOUR_OFFSETS = 4096;

/**
 * How far `timeZone` is ahead of UTC at `utcMs`, in milliseconds (whole seconds). An hour
 * whose first and last second have the same offset has no transition inside it (a zone never
 * changes its offset twice within an hour), so its offset is kept and reused for any instant
 * in it; an hour with a transition is asked of Intl each time.
 */
export function offsetMs(utcMs: number, timeZone: string): number {
  const hour = Math.floor(utcMs / HOUR_MS);
  const key = `${timeZone}|${hour}`;
  const known = hourOffsets.get(key);
  if (known !== undefined) return known;
  const start = formattedOffsetMs(hour * HOUR_MS, timeZone);
  const end = formattedOffsetMs(hour * HOUR_MS + HOUR_MS - 1000, timeZone);
  if (start !== end) return formattedOffsetMs(utcMs, timeZone);
  if (hourOffsets.size >= MAX_HOUR_OFFSETS) hourOffsets.clear();
  hourOffsets.set(key, start);
  return start;
}

/** The local calendar fields of an instant in `timeZone` (month 1-12). */
export function localFields(utcMs: number, timeZone: string) {
  const local = new Date(utcMs + offsetMs(utcMs, timeZone));
  return {
    year: local.getUTCFullYear(),
    month: local.getUTCMonth() + 1,
    day: local.getUTCDate(),
    hour: local.getUTCHours(),
    minute: local.getUTCMinutes(),
  };
}

/** The local day of an instant in `timeZone`, `YYYY-MM-DD` (what daily rollups key on). */
export function localDay(utcMs: number, timeZone: string): string {
  const f = localFields(utcMs, timeZone);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${f.year}-${pad(f.month)}-${pad(f.day)}`;
}
