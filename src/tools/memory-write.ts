/**
 * `memory_write` (SPEC §5): saves a durable note for the acting session's agent, readable from
 * every session of that agent with `memory_read`. With `key`, the note of that key is replaced;
 * without, a note is added. Refused when the agent's workspace is read-only
 * (`agents.list[].workspace.writable: false`) or when the agent already keeps
 * MAX_NOTES_PER_AGENT notes. Secrets are redacted before the note is stored.
 */
import { z } from "zod";
import { MAX_NOTES_PER_AGENT, writeMemory } from "../db/memory";
import { redactSecrets } from "../transcript/redaction";
import { defineTool, forbidden, toolError } from "./types";

/** The longest note, in characters after trimming: a note is a fact, not a document. */
export const MAX_NOTE_CHARS = 4000;
export const MAX_KEY_CHARS = 128;
const KEY_PATTERN = /^[A-Za-z0-9._:/-]+$/;

const got = (input: unknown) => (typeof input === "string" ? ` (got ${input.length})` : "");

export const memoryWriteTool = defineTool({
  name: "memory_write",
  description:
    "Save a durable note for your agent: it outlives this session and every session of your agent can read it " +
    "with memory_read. Pass `key` to keep one note per topic up to date (writing the same key replaces it); " +
    `without a key a new note is added. Up to ${MAX_NOTES_PER_AGENT} notes per agent.`,
  schema: z.strictObject({
    text: z
      .string()
      .trim()
      .min(1, { error: "must not be empty" })
      .max(MAX_NOTE_CHARS, {
        error: (iss) => `must be at most ${MAX_NOTE_CHARS} characters${got(iss.input)}`,
      })
      .describe(
        `The note, 1-${MAX_NOTE_CHARS} characters: a fact, preference or decision worth remembering.`,
      ),
    key: z
      .string()
      .trim()
      .min(1, { error: "must not be empty" })
      .max(MAX_KEY_CHARS, { error: (iss) => `must be at most ${MAX_KEY_CHARS} characters${got(iss.input)}` })
      .regex(KEY_PATTERN, { error: "may contain only letters, digits and . _ : - /" })
      .optional()
      .describe(
        `Optional name of the note (1-${MAX_KEY_CHARS} letters, digits, . _ : - /), e.g. \`user/timezone\`. ` +
          "Writing an existing key replaces its text.",
      ),
  }),
  async execute(args, ctx) {
    const { caller, config, env } = ctx;
    const agent = config.agents.list.find((a) => a.id === caller.agentId);
    if (agent?.workspace.writable === false) {
      return forbidden(
        `agent ${caller.agentId} has a read-only workspace (agents.list[].workspace.writable is false): memory_write is refused; memory_read still works`,
      );
    }
    const { text, redacted } = redactSecrets(args.text);
    const result = await writeMemory(env, {
      agentId: caller.agentId,
      ...(args.key !== undefined ? { key: args.key } : {}),
      text,
      sessionKey: caller.sessionKey,
      now: Date.now(),
    });
    if ("full" in result) {
      return toolError(
        `memory is full: agent ${caller.agentId} keeps ${MAX_NOTES_PER_AGENT} notes, the most allowed. ` +
          "Update an existing note by writing to its key (memory_read shows the keys) instead of adding new notes.",
      );
    }
    return {
      status: "ok" as const,
      id: result.id,
      ...(result.key !== null ? { key: result.key } : {}),
      created: result.created,
      ...(redacted ? { redacted: true } : {}),
    };
  },
});
