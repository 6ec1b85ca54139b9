/**
 * Durable JSON documents: how a value kept in Durable Object storage (an entry, a queued run, a
 * run's checkpoint, an outcome, a deferred record, an outbox payload) is written and read back.
 * Each kind of document has a zod schema and a version. A document is written as its JSON
 * object with the version in a reserved `_v` key, and read back only through its schema, so a
 * value this code cannot understand is refused with a clear error instead of being misread:
 * - written by a newer version (a deploy rolled back, or two versions running at once in the
 *   middle of a deploy): `DurableDocumentError` (`newer`) naming both versions; the caller's
 *   retry (a run's backoff) reads it again once the newer code serves the object;
 * - not matching its schema (corrupt, or a shape changed without a version bump): the same
 *   error, naming the field.
 * A document written before versions existed (no `_v`) is version 0 and is read through the
 * current schema, whose defaults fill what it lacks. A shape change that defaults cannot bridge
 * bumps the codec's version and adds a step that turns the older document into the new one.
 * Code of an earlier version reads a versioned document as it always did (one key more), so a
 * rollback does not misread it either. Pure: no I/O.
 */
import type { z } from "zod";

export class DurableDocumentError extends Error {
  override readonly name = "DurableDocumentError";
  /** Written by a newer version: readable once that version serves the object again. */
  readonly newer: boolean;

  constructor(message: string, newer = false) {
    super(message);
    this.newer = newer;
  }
}

/** The key a document's version is kept under. */
const VERSION_KEY = "_v";

export interface DurableCodec<T> {
  readonly name: string;
  readonly version: number;
  encode(value: T): string;
  decode(raw: string): T;
}

/** A codec for one kind of document; a document of an older version must match the current schema. */
export function durableCodec<T extends object>(
  name: string,
  version: number,
  schema: z.ZodType<T>,
): DurableCodec<T> {
  return {
    name,
    version,
    encode(value) {
      return JSON.stringify({ [VERSION_KEY]: version, ...value });
    },
    decode(raw) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        throw new DurableDocumentError(`stored ${name} is not JSON`);
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        throw new DurableDocumentError(`stored ${name} is not a JSON object`);
      }
      const { [VERSION_KEY]: stamp, ...body } = parsed as Record<string, unknown>;
      const from = typeof stamp === "number" ? stamp : 0;
      if (from > version) {
        throw new DurableDocumentError(
          `stored ${name} is version ${from}, written by a newer deploy; this one reads up to version ${version}`,
          true,
        );
      }
      const result = schema.safeParse(body);
      if (!result.success) {
        const issue = result.error.issues[0];
        const at = issue?.path.length ? issue.path.join(".") : "(root)";
        throw new DurableDocumentError(
          `stored ${name} (version ${from}) is invalid at ${at}: ${issue?.message}`,
        );
      }
      return result.data;
    },
  };
}
