/**
 * `sessions_history` (SPEC §6): one page of a visible session's transcript, oldest first, bounded
 * for model context: secrets redacted, text cut at 4000 characters, the whole result at 80 KB
 * (oldest messages dropped first). The bounding is the pure `boundHistory`; `boundMessageLists`
 * bounds the messages of a `sessions_list` page the same way.
 */
import { z } from "zod";
import { type HistoryPage, sessionWithHistoryPage } from "../db/messages";
import type { ContentPart, TranscriptMessage } from "../transcript/message";
import { redactSecrets } from "../transcript/redaction";
import { clampInt } from "../views/session-page";
import { findVisibleSessionWith } from "./resolve-session";
import { defineTool, toolError } from "./types";

export const MAX_TEXT_CHARS = 4000;
export const MAX_HISTORY_BYTES = 80 * 1024;
/** Room kept for the result's other fields, so the whole JSON result stays within MAX_HISTORY_BYTES. */
const ENVELOPE_BYTES = 1024;

interface Flags {
  redacted: boolean;
  truncated: boolean;
}

/** Redacts first, then cuts: a secret straddling the cut is never left half visible. */
function boundText(text: string, maxChars: number, flags: Flags): string {
  const r = redactSecrets(text);
  if (r.redacted) flags.redacted = true;
  if (r.text.length <= maxChars) return r.text;
  flags.truncated = true;
  const cut = r.text.slice(0, maxChars);
  return `${cut}\n…[truncated: ${r.text.length - maxChars} more characters]`;
}

function boundValue(value: unknown, maxChars: number, flags: Flags): unknown {
  if (typeof value === "string") return boundText(value, maxChars, flags);
  if (Array.isArray(value)) return value.map((v) => boundValue(v, maxChars, flags));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, boundValue(v, maxChars, flags)]));
  }
  return value;
}

function boundPart(part: ContentPart, maxChars: number, flags: Flags): ContentPart {
  if (part.type === "text") return { ...part, text: boundText(part.text, maxChars, flags) };
  if (part.type === "toolCall") return { ...part, arguments: boundValue(part.arguments, maxChars, flags) };
  return part;
}

function boundMessage(m: TranscriptMessage, maxChars: number, flags: Flags): TranscriptMessage {
  return { ...m, content: m.content.map((p) => boundPart(p, maxChars, flags)) };
}

export interface BoundedHistory {
  messages: TranscriptMessage[];
  /** Whether older messages of the page were dropped to fit `maxBytes`. */
  truncated: boolean;
  droppedMessages: number;
  /** Whether some text was cut at `maxChars`. */
  contentTruncated: boolean;
  contentRedacted: boolean;
  /** UTF-8 size of the serialized `messages`. */
  bytes: number;
}

const encoder = new TextEncoder();

/**
 * Bounds a page of messages (oldest first) for a model's context: secrets redacted, text (and
 * string arguments of tool calls) cut at `maxChars` with a marker, then the oldest messages
 * dropped until the serialized messages fit in `maxBytes` minus room for the result envelope.
 */
export function boundHistory(
  messages: TranscriptMessage[],
  opts: { maxChars?: number; maxBytes?: number } = {},
): BoundedHistory {
  const maxChars = opts.maxChars ?? MAX_TEXT_CHARS;
  const budget = (opts.maxBytes ?? MAX_HISTORY_BYTES) - ENVELOPE_BYTES;
  const flags: Flags = { redacted: false, truncated: false };
  const bounded = messages.map((m) => boundMessage(m, maxChars, flags));
  const whole = encoder.encode(JSON.stringify(bounded)).length;
  if (whole <= budget) {
    // The common case: the page fits, so no message's own size is needed.
    return {
      messages: bounded,
      truncated: false,
      droppedMessages: 0,
      contentTruncated: flags.truncated,
      contentRedacted: flags.redacted,
      bytes: whole,
    };
  }
  const sizes = bounded.map((m) => encoder.encode(JSON.stringify(m)).length);
  // "[" + "]" + one "," between messages.
  let bytes = 2 + sizes.reduce((sum, n) => sum + n, 0) + Math.max(0, sizes.length - 1);
  let dropped = 0;
  while (dropped < bounded.length && bytes > budget) {
    bytes -= (sizes[dropped] ?? 0) + (bounded.length - dropped > 1 ? 1 : 0);
    dropped++;
  }
  return {
    messages: bounded.slice(dropped),
    truncated: dropped > 0,
    droppedMessages: dropped,
    contentTruncated: flags.truncated,
    contentRedacted: flags.redacted,
    bytes,
  };
}

export interface BoundedLists {
  /** One list per input list, each the newest of its messages, oldest first. */
  lists: TranscriptMessage[][];
  /** Whether older messages of some list were dropped to fit `maxBytes`. */
  truncated: boolean;
  droppedMessages: number;
  contentTruncated: boolean;
  contentRedacted: boolean;
  /** UTF-8 size of the serialized lists, together. */
  bytes: number;
}

/**
 * Bounds several lists of messages (each oldest first, e.g. the rows of a `sessions_list` page)
 * to `maxBytes` together: each message redacted and cut like `boundHistory`'s, then the oldest
 * message of the list holding the most bytes is dropped until the lists fit. Small lists keep
 * everything, large ones share what is left about equally, and every list keeps its newest.
 */
export function boundMessageLists(
  lists: TranscriptMessage[][],
  opts: { maxChars?: number; maxBytes: number },
): BoundedLists {
  const maxChars = opts.maxChars ?? MAX_TEXT_CHARS;
  const flags: Flags = { redacted: false, truncated: false };
  const bounded = lists.map((list) => list.map((m) => boundMessage(m, maxChars, flags)));
  const sizes = bounded.map((list) => list.map((m) => encoder.encode(JSON.stringify(m)).length));
  // "[" + "]" + one "," between messages, per list.
  const listBytes = sizes.map((s) => 2 + s.reduce((sum, n) => sum + n, 0) + Math.max(0, s.length - 1));
  const dropped = lists.map(() => 0);
  let bytes = listBytes.reduce((sum, n) => sum + n, 0);
  while (bytes > opts.maxBytes) {
    let largest = -1;
    for (let i = 0; i < bounded.length; i++) {
      const kept = (bounded[i]?.length ?? 0) - (dropped[i] ?? 0);
      if (kept > 0 && (largest < 0 || (listBytes[i] ?? 0) > (listBytes[largest] ?? 0))) largest = i;
    }
    if (largest < 0) break;
    const d = dropped[largest] ?? 0;
    const kept = (bounded[largest]?.length ?? 0) - d;
    const freed = (sizes[largest]?.[d] ?? 0) + (kept > 1 ? 1 : 0);
    listBytes[largest] = (listBytes[largest] ?? 0) - freed;
    bytes -= freed;
    dropped[largest] = d + 1;
  }
  const droppedMessages = dropped.reduce((sum, n) => sum + n, 0);
  return {
    lists: bounded.map((list, i) => list.slice(dropped[i])),
    truncated: droppedMessages > 0,
    droppedMessages,
    contentTruncated: flags.truncated,
    contentRedacted: flags.redacted,
    bytes,
  };
}

export const sessionsHistoryTool = defineTool({
  name: "sessions_history",
  description:
    "Read a session's transcript (oldest first): a session key from sessions_list, `main`, or a sessionId. " +
    "Pass `nextBefore` back as `before` for older messages. Long texts are cut and secrets redacted.",
  schema: z.strictObject({
    sessionKey: z.string().trim().min(1).describe("Session key, `main`, or a sessionId from sessions_list."),
    sessionId: z
      .string()
      .trim()
      .min(1)
      .optional()
      .describe("One transcript of this session, current or from before a reset (a search hit's sessionId)."),
    limit: z.number().optional().describe("Messages per page, 1-200 (default 50)."),
    includeTools: z.boolean().optional().describe("Include tool results (default false)."),
    before: z
      .number()
      .optional()
      .describe("`nextBefore` from the previous page: only messages before this seq."),
    aroundSeq: z
      .number()
      .optional()
      .describe(
        "A page centred on this seq (a search hit's seq); `hasNewer` says whether newer messages follow.",
      ),
  }),
  async execute(args, ctx) {
    const opts = {
      limit: clampInt(args.limit, 1, 200, 50),
      before: args.before === undefined ? undefined : Math.trunc(args.before),
      around: args.aroundSeq === undefined ? undefined : Math.trunc(args.aroundSeq),
      includeTools: args.includeTools ?? false,
      sessionId: args.sessionId?.toLowerCase(),
    };
    // The session and its page in one D1 round trip when the argument is a key.
    const target = await findVisibleSessionWith(args.sessionKey, ctx, {
      byKey: async (key) => {
        const { row, page, transcriptKey } = await sessionWithHistoryPage(ctx.env, key, opts);
        return {
          row,
          extra: { page, transcriptKey } as { page: HistoryPage; transcriptKey?: string | null },
        };
      },
      byRow: async (row) => {
        const { page, transcriptKey } = await sessionWithHistoryPage(ctx.env, row.key, opts);
        return { page, transcriptKey };
      },
    });
    if ("status" in target) return target;
    const { row, displayKey } = target;
    const { page, transcriptKey } = target.extra;
    if (opts.sessionId !== undefined && transcriptKey !== row.key) {
      return toolError(
        `sessionId ${opts.sessionId} is not a transcript of session ${displayKey}; pass the sessionKey of the session it belongs to (sessions_search returns both)`,
      );
    }
    const bounded = boundHistory(page.messages);
    // Dropped messages are older than every kept one, so paging on from the oldest kept message
    // reaches them; when nothing fits, page on past the whole page.
    const oldestKept = bounded.messages[0]?.seq;
    const newest = page.messages[page.messages.length - 1]?.seq;
    const hasMore = page.hasMore || bounded.truncated;
    const nextBefore = bounded.truncated ? (oldestKept ?? newest) : page.nextBefore;
    return {
      sessionKey: displayKey,
      sessionId: opts.sessionId ?? row.sessionId,
      messages: bounded.messages,
      hasMore,
      ...(page.hasNewer !== undefined ? { hasNewer: page.hasNewer } : {}),
      ...(hasMore && nextBefore !== undefined ? { nextBefore } : {}),
      truncated: bounded.truncated,
      droppedMessages: bounded.droppedMessages,
      contentTruncated: bounded.contentTruncated,
      contentRedacted: bounded.contentRedacted,
      bytes: bounded.bytes,
    };
  },
});
