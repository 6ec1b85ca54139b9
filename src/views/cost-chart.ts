/**
 * The daily cost chart of the dashboard's Usage page (SPEC §21), drawn as an SVG string on the
 * server: one bar per day of the range (a day without usage is a bar of height 0, so the axis is
 * continuous), a y axis in dollars on a 1-2-5 scale, a <title> per bar with its day and exact
 * cost, and a hatched marker for a day whose every model call was unpriced (its cost is unknown,
 * not 0). Pure: no I/O, no clock; the page turns `usage.summary` rows into `ChartDay`s here.
 */
import { formatUsdExact } from "./format";

/** One day's figures as `usage.summary` (groupBy "day") answers them. */
export interface DayUsage {
  /** The day, `YYYY-MM-DD`. */
  group: string;
  /** Null when every model call of the day was unpriced. */
  costUsd: number | null;
  modelCalls: number;
  unpricedCalls: number;
}

export interface ChartDay {
  day: string;
  /** US dollars of the priced calls; null when the day had calls and none of them was priced. */
  costUsd: number | null;
  modelCalls: number;
  unpricedCalls: number;
}

const DAY = /^(\d{4})-(\d\d)-(\d\d)$/;
const DAY_MS = 86_400_000;

/** Whether `s` is a real calendar day `YYYY-MM-DD` (not `2025-02-30`, which Date would roll over). */
export function isCalendarDay(s: string): boolean {
  const ms = DAY.test(s) ? Date.parse(`${s}T00:00:00Z`) : Number.NaN;
  return Number.isFinite(ms) && new Date(ms).toISOString().slice(0, 10) === s;
}

/** Every day from `from` to `to`, both included; a bad day or `from` after `to` is a RangeError. */
export function daysInRange(from: string, to: string): string[] {
  if (!isCalendarDay(from) || !isCalendarDay(to)) {
    throw new RangeError(`not a calendar day range: ${from} to ${to}`);
  }
  const start = Date.parse(`${from}T00:00:00Z`);
  const end = Date.parse(`${to}T00:00:00Z`);
  if (start > end) throw new RangeError(`${from} is after ${to}`);
  const days: string[] = [];
  for (let ms = start; ms <= end; ms += DAY_MS) days.push(new Date(ms).toISOString().slice(0, 10));
  return days;
}

/** Whether a row's calls were all unpriced: its cost is unknown rather than 0. */
export function allUnpriced(u: { modelCalls: number; unpricedCalls: number }): boolean {
  return u.modelCalls > 0 && u.unpricedCalls >= u.modelCalls;
}

/** One entry per day of the range, in order: the rows' figures, zero where a day has none. */
export function dailyCosts(from: string, to: string, rows: readonly DayUsage[]): ChartDay[] {
  const byDay = new Map(rows.map((r) => [r.group, r]));
  return daysInRange(from, to).map((day) => {
    const r = byDay.get(day);
    if (!r) return { day, costUsd: 0, modelCalls: 0, unpricedCalls: 0 };
    return {
      day,
      costUsd: allUnpriced(r) ? null : r.costUsd,
      modelCalls: r.modelCalls,
      unpricedCalls: r.unpricedCalls,
    };
  });
}

export interface CostScale {
  /** The axis' top, a whole number of steps at or above the largest cost. */
  top: number;
  step: number;
  /** From 0 up to `top`, one per step. */
  ticks: number[];
}

/** The floor of the axis when nothing cost anything: a cent, so an empty chart still has a scale. */
const EMPTY_TOP = 0.01;

/** A y axis for costs up to `max`: about four steps of 1, 2 or 5 × 10ⁿ dollars. */
export function costScale(max: number): CostScale {
  const m = Number.isFinite(max) && max > 0 ? max : EMPTY_TOP;
  const raw = m / 4;
  const exp = Math.floor(Math.log10(raw));
  const f = raw / 10 ** exp;
  const mantissa = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  // Dividing by 10ⁿ for n < 0 keeps 5 × 10⁻⁵ exactly 0.00005 (times 10⁻⁵ would not).
  const at = (units: number) => (exp < 0 ? units / 10 ** -exp : units * 10 ** exp);
  const step = at(mantissa);
  // The epsilon keeps 0.3 / 0.1 = 2.9999999999999996 from becoming an extra, empty step.
  const steps = Math.max(1, Math.ceil(m / step - 1e-9));
  const ticks = Array.from({ length: steps + 1 }, (_, i) => at(i * mantissa));
  return { top: at(steps * mantissa), step, ticks };
}

/** A tick's label: whole dollars from a $1 step up, else as many decimals as the step needs (≥ 2). */
export function tickLabel(usd: number, step: number): string {
  const decimals = step >= 1 ? 0 : Math.max(2, -Math.floor(Math.log10(step) + 1e-9));
  return `$${usd.toFixed(decimals)}`;
}

export interface ChartBox {
  width: number;
  height: number;
}

const BOX: ChartBox = { width: 760, height: 240 };
const PAD = { left: 64, right: 12, top: 12, bottom: 30 };
/** The height of the marker of an all-unpriced day: visible, and plainly not a cost. */
const UNPRICED_MARK = 6;
/** At most this many day labels under the axis; the rest are in the bars' titles. */
const MAX_DAY_LABELS = 8;

export interface Bar {
  day: string;
  x: number;
  width: number;
  /** The top of the bar (SVG y grows downwards) and its height; 0 high for a zero or unknown cost. */
  y: number;
  height: number;
  unpriced: boolean;
  /** The day's cost as it came (null: unpriced), kept on the bar as `data-usd` for readers. */
  usd: number | null;
  title: string;
}

export interface CostChart {
  box: ChartBox;
  plot: { left: number; top: number; width: number; height: number };
  scale: CostScale;
  bars: Bar[];
  /** Which days are labelled under the axis (their bar's centre). */
  dayLabels: Array<{ day: string; x: number }>;
  label: string;
}

function barTitle(d: ChartDay): string {
  if (d.costUsd === null) return `${d.day}: unpriced (${d.modelCalls} model calls, none priced)`;
  const partly = d.unpricedCalls > 0 ? ` + ${d.unpricedCalls} unpriced calls` : "";
  return `${d.day}: ${formatUsdExact(d.costUsd)}${partly}`;
}

/** What a reader of the chart should take from it, for `aria-label`. */
function summary(days: readonly ChartDay[]): string {
  const first = days[0]?.day ?? "";
  const last = days.at(-1)?.day ?? "";
  const priced = days.filter((d): d is ChartDay & { costUsd: number } => d.costUsd !== null);
  const total = priced.reduce((n, d) => n + d.costUsd, 0);
  const peak = priced.reduce<(typeof priced)[number] | undefined>(
    (best, d) => (d.costUsd > 0 && (!best || d.costUsd > best.costUsd) ? d : best),
    undefined,
  );
  const unpriced = days.length - priced.length;
  return [
    `Daily cost, ${days.length} ${days.length === 1 ? "day" : "days"} from ${first} to ${last}: ${formatUsdExact(total)} in total`,
    peak ? `highest ${formatUsdExact(peak.costUsd)} on ${peak.day}` : "no priced cost",
    ...(unpriced > 0 ? [`${unpriced} ${unpriced === 1 ? "day" : "days"} unpriced`] : []),
  ].join("; ");
}

/** The chart's geometry for `days` (one bar each, in order), in a `box` of SVG units. */
export function layoutCostChart(days: readonly ChartDay[], box: ChartBox = BOX): CostChart {
  const plot = {
    left: PAD.left,
    top: PAD.top,
    width: box.width - PAD.left - PAD.right,
    height: box.height - PAD.top - PAD.bottom,
  };
  const scale = costScale(Math.max(0, ...days.map((d) => d.costUsd ?? 0)));
  const slot = days.length > 0 ? plot.width / days.length : plot.width;
  // A gap of a fifth of the slot between bars, none once bars are thinner than two units.
  const width = slot >= 2 ? slot * 0.8 : slot;
  const bottom = plot.top + plot.height;
  const bars = days.map((d, i): Bar => {
    const height = d.costUsd === null ? 0 : (Math.max(0, d.costUsd) / scale.top) * plot.height;
    return {
      day: d.day,
      x: plot.left + i * slot + (slot - width) / 2,
      width,
      y: bottom - height,
      height,
      unpriced: d.costUsd === null,
      usd: d.costUsd,
      title: barTitle(d),
    };
  });
  const every = Math.max(1, Math.ceil(days.length / MAX_DAY_LABELS));
  const labelled = days.map((_, i) => i).filter((i) => i % every === 0);
  const last = days.length - 1;
  if (last > 0 && labelled.at(-1) !== last) {
    // The last day is always labelled; the label before it goes when the two would overlap.
    if (last - (labelled.at(-1) ?? 0) < every) labelled.pop();
    labelled.push(last);
  }
  const dayLabels = labelled.map((i) => ({ day: days[i]!.day, x: plot.left + i * slot + slot / 2 }));
  return { box, plot, scale, bars, dayLabels, label: summary(days) };
}

function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** A coordinate, short: two decimals are finer than any screen. */
function n(v: number): string {
  return String(Math.round(v * 100) / 100);
}

/** The chart as an SVG element (a string; every text in it escaped). */
export function renderCostChart(chart: CostChart): string {
  const { box, plot, scale } = chart;
  const bottom = plot.top + plot.height;
  const right = plot.left + plot.width;
  const y = (usd: number) => bottom - (usd / scale.top) * plot.height;
  const grid = scale.ticks.map(
    (t) =>
      `<g class="tick"><line x1="${n(plot.left)}" x2="${n(right)}" y1="${n(y(t))}" y2="${n(y(t))}" stroke="#d9dee5"/>` +
      `<text x="${n(plot.left - 6)}" y="${n(y(t))}" text-anchor="end" dominant-baseline="middle">${escapeXml(tickLabel(t, scale.step))}</text></g>`,
  );
  const bars = chart.bars.map((b) => {
    // The transparent rect over the whole slot height gives a zero-cost day a target for its title.
    const hit = `<rect class="hit" x="${n(b.x)}" y="${n(plot.top)}" width="${n(b.width)}" height="${n(plot.height)}" fill="transparent"/>`;
    const mark = b.unpriced
      ? `<rect class="unpriced" x="${n(b.x)}" y="${n(bottom - UNPRICED_MARK)}" width="${n(b.width)}" height="${UNPRICED_MARK}" fill="url(#cost-chart-unpriced)" stroke="#8a94a3" stroke-width="0.5"/>`
      : `<rect class="cost" x="${n(b.x)}" y="${n(b.y)}" width="${n(b.width)}" height="${n(b.height)}" fill="#2457c5"/>`;
    return `<g class="bar${b.unpriced ? " is-unpriced" : ""}" data-day="${escapeXml(b.day)}" data-usd="${b.usd ?? ""}"><title>${escapeXml(b.title)}</title>${hit}${mark}</g>`;
  });
  const labels = chart.dayLabels.map(
    (l) =>
      `<text x="${n(l.x)}" y="${n(bottom + 18)}" text-anchor="middle">${escapeXml(l.day.slice(5))}</text>`,
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="cost-chart" viewBox="0 0 ${box.width} ${box.height}" role="img" aria-label="${escapeXml(chart.label)}" font-size="11" fill="#5b6573">`,
    `<defs><pattern id="cost-chart-unpriced" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="4" height="4" fill="#eef1f5"/><line x1="0" y1="0" x2="0" y2="4" stroke="#8a94a3" stroke-width="1.5"/></pattern></defs>`,
    `<g class="y-axis">${grid.join("")}</g>`,
    `<g class="bars">${bars.join("")}</g>`,
    `<line class="x-axis" x1="${n(plot.left)}" x2="${n(right)}" y1="${n(bottom)}" y2="${n(bottom)}" stroke="#5b6573"/>`,
    `<g class="x-labels">${labels.join("")}</g>`,
    "</svg>",
  ].join("");
}

/** The chart of `usage.summary`'s day rows over `from`…`to`, as SVG. */
export function costChartSvg(from: string, to: string, rows: readonly DayUsage[]): string {
  return renderCostChart(layoutCostChart(dailyCosts(from, to, rows)));
}
