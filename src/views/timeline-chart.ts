/**
 * A run's timeline (SPEC §21, `runs.get`) drawn as a waterfall for the dashboard's run page: a
 * row per span (the queue, each model call and tool, each delivery), its bar placed from the
 * run's creation on one time axis, coloured by phase, a failed or refused span marked, a <title>
 * per row with its exact figures. An SVG string made on the server; pure: no I/O, no clock.
 */
import type { TimelineSpan } from "../transcript/message";

const ROW = 22;
const LABEL = 190;
const WIDTH = 900;
const PAD = { top: 8, right: 16, bottom: 26 };
/** Bars shorter than this many units are drawn this wide, so a 0 ms span stays visible. */
const MIN_BAR = 2;

const COLOURS: Record<TimelineSpan["phase"], string> = {
  queued: "#9aa5b4",
  model: "#2457c5",
  tool: "#b7791f",
  delivery: "#2f855a",
};
const FAILED = new Set(["error", "aborted", "refused", "dead", "timeout"]);

function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** A coordinate, short. */
function n(v: number): string {
  return String(Math.round(v * 100) / 100);
}

/** `1.2 s`, `340 ms`. */
export function spanDuration(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(ms >= 10_000 ? 0 : 1)} s` : `${Math.round(ms)} ms`;
}

/** What a span is called on its row: its phase, and the model, tool or delivery kind. */
export function spanLabel(s: TimelineSpan): string {
  return s.name ? `${s.phase} ${s.name}` : s.phase;
}

/** A step of 1, 2 or 5 × 10ⁿ ms giving at most 6 ticks up to `total`. */
function tickStep(total: number): number {
  const rough = Math.max(total, 1) / 6;
  const pow = 10 ** Math.floor(Math.log10(rough));
  return ([1, 2, 5, 10].map((m) => m * pow).find((s) => s >= rough) ?? 10 * pow) as number;
}

/**
 * The waterfall of `spans` (as runs.get answers them, in start order), measured from `origin`
 * (the run's creation). An empty timeline draws the axis alone.
 */
export function timelineSvg(spans: readonly TimelineSpan[], origin: number): string {
  const end = Math.max(1, ...spans.map((s) => s.startedAt + s.ms - origin));
  const plot = { left: LABEL, width: WIDTH - LABEL - PAD.right };
  const height = PAD.top + spans.length * ROW + PAD.bottom;
  const x = (ms: number) => plot.left + (Math.max(0, ms) / end) * plot.width;
  const step = tickStep(end);
  const ticks: string[] = [];
  for (let t = 0; t <= end; t += step) {
    ticks.push(
      `<g class="tick"><line x1="${n(x(t))}" x2="${n(x(t))}" y1="${PAD.top}" y2="${n(height - PAD.bottom)}" stroke="#e3e7ed"/>` +
        `<text x="${n(x(t))}" y="${n(height - PAD.bottom + 16)}" text-anchor="middle">${escapeXml(spanDuration(t))}</text></g>`,
    );
  }
  const rows = spans.map((s, i) => {
    const y = PAD.top + i * ROW;
    const from = s.startedAt - origin;
    const width = Math.max(MIN_BAR, x(from + s.ms) - x(from));
    const failed = s.outcome !== undefined && FAILED.has(s.outcome);
    const title = `${spanLabel(s)}: ${spanDuration(s.ms)} from +${spanDuration(from)}${s.outcome ? `, ${s.outcome}` : ""}`;
    return (
      `<g class="span${failed ? " failed" : ""}" data-phase="${s.phase}" data-name="${escapeXml(s.name ?? "")}" data-ms="${s.ms}" data-outcome="${escapeXml(s.outcome ?? "")}">` +
      `<title>${escapeXml(title)}</title>` +
      `<text x="${LABEL - 8}" y="${n(y + ROW / 2)}" text-anchor="end" dominant-baseline="middle">${escapeXml(spanLabel(s))}</text>` +
      `<rect x="${n(x(from))}" y="${n(y + 4)}" width="${n(width)}" height="${ROW - 8}" rx="2" fill="${COLOURS[s.phase]}"${failed ? ' stroke="#c53030" stroke-width="2"' : ""}/>` +
      "</g>"
    );
  });
  const label = `Run timeline: ${spans.length} spans over ${spanDuration(end)}`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="${escapeXml(label)}" font-size="11" fill="#2d3748">`,
    `<g class="axis">${ticks.join("")}</g>`,
    `<g class="spans">${rows.join("")}</g>`,
    "</svg>",
  ].join("");
}
