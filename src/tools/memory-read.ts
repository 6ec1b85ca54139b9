/**
 * `memory_read` (SPEC §5): the acting session's agent's notes (written with `memory_write`),
 * most recently written first, optionally only those whose text or key contains `query`.
 * Bounded for model context like sessions_history: the result stays within MAX_READ_BYTES,
 * the oldest notes of the page dropped first (`truncated: true`).
 */
import { z } from "zod";
import { MAX_READ_LIMIT, type MemoryRow, readMemory } from "../db/memory";
import { clampInt } from "../views/session-page";
import { MAX_HISTORY_BYTES } from "./sessions-history";
import { defineTool } from "./types";

/** The same bound as sessions_history: one tool result never adds more than this to a context. */
export const MAX_READ_BYTES = MAX_HISTORY_BYTES;
/** Room kept for the result's other fields. */
const ENVELOPE_BYTES = 256;
const DEFAULT_LIMIT = 10;

export interface Note {
  id: string;
  key?: string;
  text: string;
  updatedAt: number;
}

const encoder = new TextEncoder();

/** Keeps the newest notes whose serialized size fits `maxBytes` (minus the envelope). */
export function boundNotes(
  rows: MemoryRow[],
  maxBytes = MAX_READ_BYTES,
): { notes: Note[]; truncated: boolean } {
  let bytes = 2 + ENVELOPE_BYTES;
  const notes: Note[] = [];
  for (const r of rows) {
    const note: Note = {
      id: r.id,
      ...(r.key !== null ? { key: r.key } : {}),
      text: r.text,
      updatedAt: r.updatedAt,
    };
    const size = encoder.encode(JSON.stringify(note)).length + (notes.length ? 1 : 0);
    if (bytes + size > maxBytes) return { notes, truncated: true };
    bytes += size;
    notes.push(note);
  }
  return { notes, truncated: false };
}

export const memoryReadTool = defineTool({
  name: "memory_read",
  description:
    "Read your agent's saved notes (from memory_write), most recently written first. " +
    "Pass `query` to find notes whose text or key contains it (case-insensitive).",
  schema: z.strictObject({
    query: z
      .string()
      .trim()
      .min(1, { error: "must not be empty (leave it out to read the newest notes)" })
      .max(200, { error: "must be at most 200 characters" })
      .optional()
      .describe("Only notes whose text or key contains this (case-insensitive substring)."),
    limit: z.number().optional().describe(`Notes to return, 1-${MAX_READ_LIMIT} (default ${DEFAULT_LIMIT}).`),
  }),
  async execute(args, ctx) {
    const rows = await readMemory(ctx.env, {
      agentId: ctx.caller.agentId,
      ...(args.query !== undefined ? { query: args.query } : {}),
      limit: clampInt(args.limit, 1, MAX_READ_LIMIT, DEFAULT_LIMIT),
    });
    const { notes, truncated } = boundNotes(rows);
    return { status: "ok" as const, notes, count: notes.length, truncated };
  },
});
