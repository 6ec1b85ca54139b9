/**
 * What the CLI prints for people: aligned tables with truncated cells, key/value blocks,
 * relative or ISO times, transcript messages as lines. Pure: every function takes the clock it
 * needs and returns text.
 */

export interface Column<R> {
  header: string;
  value(row: R): string;
  /** Longer cells are cut to this many characters, ending with "…". */
  max?: number;
  align?: "left" | "right";
}

/**
 * Text safe to write to a terminal: control characters other than newline and tab (escape
 * sequences that could retitle the window, hide lines or set the clipboard) become U+FFFD.
 * Transcripts, model output and connector errors are not the operator's to run.
 */
export function terminalSafe(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point.
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, "\ufffd");
}

/** A cell on one line: newlines and tabs become spaces. */
export function oneLine(text: string): string {
  return text.replace(/\s*[\r\n\t]+\s*/g, " ");
}

export function truncate(text: string, max: number): string {
  if (max < 1) return "";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * Rows under a header, each column as wide as its widest cell, two spaces between columns,
 * no trailing spaces.
 */
export function table<R>(rows: readonly R[], columns: readonly Column<R>[]): string {
  const cells = rows.map((row) =>
    columns.map((c) => {
      const text = oneLine(c.value(row));
      return c.max ? truncate(text, c.max) : text;
    }),
  );
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i]?.length ?? 0)));
  const line = (values: string[]) =>
    values
      .map((v, i) => {
        const width = widths[i] ?? 0;
        if (columns[i]?.align === "right") return v.padStart(width);
        return i === values.length - 1 ? v : v.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  return [line(columns.map((c) => c.header)), ...cells.map(line)].join("\n");
}

/** `label  value` lines with the labels aligned; pairs whose value is undefined are left out. */
export function keyValues(pairs: ReadonlyArray<readonly [string, string | undefined]>): string {
  const shown = pairs.filter((p): p is readonly [string, string] => p[1] !== undefined);
  const width = Math.max(0, ...shown.map(([k]) => k.length));
  return shown.map(([k, v]) => `${k.padEnd(width)}  ${v}`.trimEnd()).join("\n");
}

export interface TimeStyle {
  now: number;
  /** ISO timestamps instead of "3m ago". */
  iso: boolean;
}

/** `2025-06-01T12:01:05Z`: UTC, to the second. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

const UNITS: Array<[limitMs: number, unitMs: number, suffix: string]> = [
  [60_000, 1_000, "s"],
  [3_600_000, 60_000, "m"],
  [86_400_000, 3_600_000, "h"],
  [30 * 86_400_000, 86_400_000, "d"],
];

/** "12s ago", "3m ago", "in 5h"; beyond 30 days the date. */
export function relativeTime(ms: number, now: number): string {
  const delta = ms - now;
  const abs = Math.abs(delta);
  if (abs < 1_000) return "now";
  for (const [limit, unit, suffix] of UNITS) {
    if (abs < limit) {
      const n = Math.floor(abs / unit);
      return delta < 0 ? `${n}${suffix} ago` : `in ${n}${suffix}`;
    }
  }
  return isoTime(ms).slice(0, 10);
}

/** A timestamp as the style asks; "-" when there is none. */
export function when(ms: number | null | undefined, style: TimeStyle): string {
  if (ms === null || ms === undefined) return "-";
  return style.iso ? isoTime(ms) : relativeTime(ms, style.now);
}

/** A transcript message as the gateway returns it (chat.history). */
export interface HistoryMessage {
  id?: string;
  seq?: number;
  role: string;
  content: Array<{ type: string; text?: string; name?: string; arguments?: unknown }>;
  toolName?: string;
  isError?: boolean;
  timestamp: number;
  runId?: string;
}

const TOOL_TEXT_MAX = 300;
const ROLE_WIDTH = "assistant".length;

function textParts(m: HistoryMessage): string {
  return m.content
    .filter((p) => p.type === "text" && typeof p.text === "string")
    .map((p) => p.text)
    .join("");
}

/** The assistant's text of a message (tool calls left out). */
export function messageText(m: HistoryMessage): string {
  return textParts(m);
}

/**
 * A message as printed lines: `<ISO time>  <role>  <text>`, continuation lines indented.
 * Tool calls (`→ name {args}`) and tool results (`← name: text`) are shown only with `tools`;
 * a message with nothing left to show prints nothing.
 */
export function messageLines(m: HistoryMessage, opts: { tools: boolean }): string[] {
  const body: string[] = [];
  if (m.role === "toolResult") {
    if (!opts.tools) return [];
    const text = truncate(oneLine(textParts(m)), TOOL_TEXT_MAX);
    body.push(`← ${m.toolName ?? "tool"}${m.isError ? " (error)" : ""}: ${text}`);
  } else {
    const text = textParts(m);
    if (text.trim()) body.push(...text.split("\n"));
    if (opts.tools) {
      for (const part of m.content) {
        if (part.type !== "toolCall") continue;
        const args = truncate(JSON.stringify(part.arguments ?? {}), TOOL_TEXT_MAX);
        body.push(`→ ${part.name ?? "tool"} ${args}`);
      }
    }
  }
  if (body.length === 0) return [];
  const role = m.role === "toolResult" ? "tool" : m.role;
  const head = `${isoTime(m.timestamp)}  ${role.padEnd(ROLE_WIDTH)}  `;
  const indent = " ".repeat(head.length);
  return body.map((line, i) => `${i === 0 ? head : indent}${line}`.trimEnd());
}

/** JSON for `--json`: two-space indented, so `| jq` and people both read it. */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
