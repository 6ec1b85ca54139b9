/**
 * Retention (`session.retention.days`, SPEC §11): deletes transcript messages older than the
 * cutoff, oldest first, then the transcript records left with no message that are no session's
 * current sessionId, and finished runs, settled deliveries and job claims older than the
 * cutoff. Every delete is by index and bounded per invocation; what is left goes on the next
 * minute. Queued or running runs and deliveries still owed are never deleted.
 */
import type { Config } from "../config/schema";
import {
  deleteEmptyTranscripts,
  deleteOldMessages,
  deleteOldRows,
  type RetainedTable,
} from "../db/maintenance";
import { deleteTranscriptMedia, mediaBucket } from "../db/media-store";

const DAY_MS = 24 * 3_600_000;
export const RETENTION_CHUNK = 500;
const MESSAGE_CHUNKS = 4;

export type RetentionResult = Record<RetainedTable | "messages" | "transcripts" | "media", number> & {
  more: boolean;
};

export async function applyRetention(
  env: Env,
  config: Config,
  now: number,
  bounds = { chunk: RETENTION_CHUNK, messageChunks: MESSAGE_CHUNKS },
): Promise<RetentionResult | undefined> {
  const days = config.session.retention.days;
  if (!days) return undefined;
  const before = now - days * DAY_MS;
  let messages = 0;
  let more = false;
  const touched = new Set<string>();
  for (let chunk = 0; chunk < bounds.messageChunks; chunk++) {
    const { deleted, sessionIds, more: left } = await deleteOldMessages(env, before, bounds.chunk);
    for (const id of sessionIds) touched.add(id);
    messages += deleted;
    if (!left) break;
    if (chunk === bounds.messageChunks - 1) more = true;
  }
  const transcripts = await deleteEmptyTranscripts(env, [...touched]);
  // The files kept before the cutoff of the transcripts it cut (SPEC §22).
  const bucket = touched.size > 0 ? mediaBucket(env, config) : undefined;
  const media = bucket ? await deleteTranscriptMedia(bucket, [...touched], before) : 0;
  const rows = await deleteOldRows(env, before, bounds.chunk);
  if (rows.more) more = true;
  return { messages, transcripts, media, ...rows.deleted, more };
}
