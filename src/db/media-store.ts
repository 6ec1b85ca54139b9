/**
 * Where the files people send are kept (SPEC §22): the R2 bucket `media.r2` names, one object
 * per file under `sessions/<sessionId>/<mediaId>`, so a transcript's files go with it (a
 * session deleted with its transcript, retention's cutoff). The run keeps them
 * (session/run/media.ts); `GET /v1/media/:mediaId` reads them.
 */
import type { Config } from "../config/schema";

/** The R2 bucket files are kept in, when `media.r2` names one the Worker has. */
export function mediaBucket(env: Env, config: Config): R2Bucket | undefined {
  const name = config.media.r2;
  const bucket = name ? (env as unknown as Record<string, unknown>)[name] : undefined;
  return bucket && typeof (bucket as R2Bucket).put === "function" ? (bucket as R2Bucket) : undefined;
}

/** A stored file's id: its transcript's sessionId, then a hash of where in which run it came. */
export async function mediaIdOf(
  sessionId: string,
  runId: string,
  input: number,
  file: number,
): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${runId}:${input}:${file}`));
  const hex = [...new Uint8Array(digest).slice(0, 12)].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${sessionId}.${hex}`;
}

/** The R2 key of a file by its id, or undefined for a malformed id. */
export function mediaKey(mediaId: string): string | undefined {
  const m = /^([0-9A-Za-z-]{1,64})\.([0-9a-f]{24})$/.exec(mediaId);
  return m ? `sessions/${m[1]}/${mediaId}` : undefined;
}

/**
 * Deletes the files of transcripts `sessionIds` (those kept before `before`, when given: what
 * retention cut off of them). How many were deleted.
 */
export async function deleteTranscriptMedia(
  bucket: R2Bucket,
  sessionIds: readonly string[],
  before?: number,
): Promise<number> {
  let deleted = 0;
  for (const sessionId of sessionIds) {
    let cursor: string | undefined;
    do {
      const page = await bucket.list({ prefix: `sessions/${sessionId}/`, ...(cursor ? { cursor } : {}) });
      const keys = page.objects
        .filter((o) => before === undefined || o.uploaded.getTime() < before)
        .map((o) => o.key);
      if (keys.length > 0) await bucket.delete(keys);
      deleted += keys.length;
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor);
  }
  return deleted;
}

/**
 * A stored file as an HTTP response (its MIME type, its name), streamed from R2; undefined when
 * the id is malformed or nothing is stored under it.
 */
export async function mediaResponse(bucket: R2Bucket, mediaId: string): Promise<Response | undefined> {
  const key = mediaKey(mediaId);
  const object = key ? await bucket.get(key) : null;
  if (!object) return undefined;
  const name = object.customMetadata?.name;
  return new Response(object.body, {
    headers: {
      "content-type": object.httpMetadata?.contentType ?? "application/octet-stream",
      "content-length": String(object.size),
      "cache-control": "private, max-age=3600",
      ...(name ? { "content-disposition": `inline; filename="${name.replace(/["\\\r\n]/g, "_")}"` } : {}),
      "x-content-type-options": "nosniff",
    },
  });
}
