/**
 * How numbers, durations and instants read to people: in messages (announcements, the status
 * card) and on the dashboard (the Usage page). Pure.
 */
import { localFields } from "../time/zones";

export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const pad = (n: number) => String(n).padStart(2, "0");
  if (h > 0) return `${h}h${pad(m)}m${pad(s)}s`;
  if (m > 0) return `${m}m${pad(s)}s`;
  return `${s}s`;
}

export function formatTokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(1).replace(/\.0$/, "")}k`;
  return `${(n / 1_000_000).toFixed(1).replace(/\.0$/, "")}M`;
}

/** US dollars: cents from a cent up (`$1.23`), four decimals below it (`$0.0042`). */
export function formatUsd(usd: number): string {
  if (usd === 0) return "$0";
  return usd >= 0.01 ? `$${usd.toFixed(2)}` : `$${usd.toFixed(4)}`;
}

/**
 * US dollars to the micro-cent, for where the exact figure is asked for (a chart bar's title, a
 * cost cell's tooltip): at least two decimals, trailing zeros trimmed beyond them, so
 * `$0.000105` and `$1.50`. Eight decimals are finer than any one token's price.
 */
export function formatUsdExact(usd: number): string {
  const fixed = usd.toFixed(8).replace(/0+$/, "");
  const [whole, frac = ""] = fixed.split(".");
  return `$${whole}.${frac.padEnd(2, "0")}`;
}

/** A whole count with thousands separators (`12,345`), the same in every locale. */
export function formatCount(n: number): string {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** `2026-11-25 04:00` in the given time zone. */
export function formatInstant(ms: number, timeZone: string): string {
  const f = localFields(ms, timeZone);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${f.year}-${pad(f.month)}-${pad(f.day)} ${pad(f.hour)}:${pad(f.minute)}`;
}
