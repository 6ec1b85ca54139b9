/**
 * Transcript message shapes (SPEC §3): what a stored transcript row holds. A neutral module:
 * the D1 queries, the agent loop, the SessionActor and the tools all speak in these shapes.
 */

export type Role = "user" | "assistant" | "toolResult" | "system";
export type ContentPart =
  | { type: "text"; text: string }
  | { type: "toolCall"; id: string; name: string; arguments: unknown }
  | MediaPart;

/**
 * A file a message carries before it is fetched (SPEC §22): a platform's file id, fetched through
 * its connector with the platform's own auth, or an https URL (the bridge's). The run fetches,
 * stores and transcribes it (session/run/media.ts) and it becomes a MediaPart.
 */
export interface MediaRef {
  kind: "image" | "audio" | "file";
  ref?: string;
  url?: string;
  mimeType?: string;
  name?: string;
  /** Its size when the platform said it. */
  bytes?: number;
}

/**
 * A file a person sent (SPEC §22), stored in R2 under `mediaId`: what the model is given is
 * decided when a turn is built (an image as image input to a model that sees, a text file
 * inline, anything else a line naming it); an audio part keeps its `transcript`.
 */
export interface MediaPart {
  type: "image" | "audio" | "file";
  mediaId: string;
  mimeType: string;
  bytes: number;
  name?: string;
  /** Audio: what the transcription said (it is also the message's text). */
  transcript?: string;
}

export interface Provenance {
  kind: "external_user" | "inter_session" | "internal_system" | "subagent_announce";
  sourceSessionKey?: string;
  sourceChannel?: string;
  sourceTool?: string;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  /** Of the input, read from and written to the provider's prompt cache (SPEC §21). */
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  /** The model calls this usage sums, and those of a model without a price. */
  modelCalls?: number;
  unpricedCalls?: number;
  /** US dollars of the priced calls (agent/pricing.ts); null when no call had a price. */
  costUsd?: number | null;
}

/**
 * One span of a run's timeline (SPEC §21 `runs.get`): where the run's time went. `queued` and
 * `delivery` come from the run's and its delivery's rows; the agent loop records `model` (name:
 * the model; outcome ok, error, aborted or refused) and `tool` (name: the tool; outcome ok,
 * error or skipped) spans in its checkpoint, so a resumed run keeps the spans before the crash.
 */
export interface TimelineSpan {
  phase: "queued" | "model" | "tool" | "delivery";
  name?: string;
  startedAt: number;
  ms: number;
  outcome?: string;
}

export interface TranscriptMessage {
  /** Deterministic id (`<runId>:<step…>`): appends are idempotent by it. */
  id: string;
  /**
   * The time the run spent producing this message (its model call, its tool), kept with the
   * run's step while it runs and gathered into the run's timeline at its end; no transcript
   * column holds it.
   */
  span?: TimelineSpan;
  seq?: number;
  role: Role;
  content: ContentPart[];
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
  timestamp: number;
  runId?: string;
  model?: string;
  usage?: Usage;
  provenance?: Provenance;
  /**
   * Set on a compaction entry (SPEC §3, §5): a `system` message whose text is the summary of
   * everything before `firstKeptSeq`. Written with `firstKeptId` (the first message kept
   * verbatim; absent when none is kept) and read back with the seq it resolved to.
   */
  compaction?: { firstKeptId?: string; firstKeptSeq?: number };
}

export function isCompaction(m: Pick<TranscriptMessage, "compaction">): boolean {
  return m.compaction !== undefined;
}

/**
 * The silent memory-flush turn before an automatic compaction stores its messages (for the
 * record) under ids with this mark; they never enter a later turn's context.
 */
export const FLUSH_ID_MARK = ":flush:";

export function isFlushMessage(m: Pick<TranscriptMessage, "id">): boolean {
  return m.id.includes(FLUSH_ID_MARK);
}

export function textOf(message: Pick<TranscriptMessage, "content">): string {
  return message.content
    .filter((p): p is { type: "text"; text: string } => p.type === "text")
    .map((p) => p.text)
    .join("");
}

/**
 * The most text one transcript message holds (each text part, and a tool call's arguments as
 * JSON). A longer model answer, tool result or input is cut with a marker that says so, so a
 * stored row stays far below the 2 MB row limit of D1 and DO SQLite whatever the input.
 */
export const MAX_MESSAGE_CHARS = 64_000;

export function cutMarker(cut: number): string {
  return `\n[… ${cut} more characters cut: a transcript message holds at most ${MAX_MESSAGE_CHARS.toLocaleString("en-US")} …]`;
}

/** `text`, cut to MAX_MESSAGE_CHARS with a marker when longer. */
export function boundedText(text: string): string {
  return text.length > MAX_MESSAGE_CHARS
    ? text.slice(0, MAX_MESSAGE_CHARS) + cutMarker(text.length - MAX_MESSAGE_CHARS)
    : text;
}

/** Tool-call arguments as stored: whole, or a preview when their JSON passes the bound. */
export function boundedArguments(args: unknown): unknown {
  const json = JSON.stringify(args ?? null);
  if (json.length <= MAX_MESSAGE_CHARS) return args;
  return { truncated: true, preview: json.slice(0, 1_000) + cutMarker(json.length - 1_000) };
}

/** A media part as a line of text: what a model that cannot take it, and a listing, reads. */
export function mediaLine(p: MediaPart): string {
  const size =
    p.bytes >= 1024 * 1024
      ? `${(p.bytes / 1024 / 1024).toFixed(1)} MB`
      : `${Math.max(1, Math.round(p.bytes / 1024))} KB`;
  const what = p.type === "audio" ? "audio" : p.type === "image" ? "image" : "file";
  return `[${what}: ${p.name ?? p.mediaId}, ${p.mimeType}, ${size}]`;
}
