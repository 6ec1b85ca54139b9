/**
 * The files of a run's inputs (SPEC §22). `fetched`, before a run's start is recorded: each
 * file is downloaded (delivery/media-fetch.ts), kept in R2 (`media.r2`) under
 * `sessions/<sessionId>/<mediaId>`, audio transcribed (agent/transcribe.ts), and the input gets
 * its parts and, for a voice note, its text; the inputs as fetched go in the run's progress, so
 * an attempt made again after a crash does not fetch again (an object put twice is the same
 * object: its id derives from the run). Then `mediaInputs` loads what this run's model call is
 * given: its inputs' images for a model that sees, text files up to 100 KB inline.
 *
 * A file that cannot be had (gone, refused, too large once downloaded) becomes a line saying so
 * in the message; a network failure fails the attempt, which is retried.
 */
import type { MediaInputs } from "../../agent/context";
import { TranscriptionError, transcribeAudio } from "../../agent/transcribe";
import type { Config } from "../../config/schema";
import { mediaBucket, mediaIdOf, mediaKey } from "../../db/media-store";
import { fetchMedia } from "../../delivery/media-fetch";
import type { RunInput } from "../../runs/types";
import type { MediaPart, MediaRef } from "../../transcript/message";
import { INLINE_FILE_BYTES } from "../../transcript/tokens";

export interface MediaHost {
  readonly env: Env;
  readonly config: Config;
}

export function hasMedia(inputs: readonly RunInput[]): boolean {
  return inputs.some((i) => (i.media?.length ?? 0) > 0 && !i.parts);
}

const TEXT_TYPES = /^(text\/|application\/(json|xml|x-yaml|yaml|javascript|x-sh|csv|toml))/;

function isText(mimeType: string): boolean {
  return TEXT_TYPES.test(mimeType);
}

/** A file kept as a line of text instead (it could not be had). */
function missing(ref: MediaRef, why: string): string {
  return `[${ref.kind}${ref.name ? `: ${ref.name}` : ""} — not available: ${why}]`;
}

/**
 * The inputs with their files fetched, kept and transcribed (see the header). Throws on what a
 * later attempt may get past (the network, R2).
 */
export async function ingestMedia(
  h: MediaHost,
  route: { channel: string; accountId: string } | undefined,
  sessionId: string,
  runId: string,
  inputs: readonly RunInput[],
  signal: AbortSignal,
): Promise<RunInput[]> {
  const bucket = mediaBucket(h.env, h.config);
  const out: RunInput[] = [];
  for (const [i, input] of inputs.entries()) {
    if (!input.media?.length || input.parts) {
      out.push(input);
      continue;
    }
    const parts: MediaPart[] = [];
    const lines: string[] = [];
    let voice: string | undefined;
    for (const [j, ref] of input.media.entries()) {
      if (!bucket) {
        lines.push(missing(ref, `no media store is configured (media.r2)`));
        continue;
      }
      const fetched = await fetchMedia(ref, route ?? { channel: "", accountId: "" }, h.config, h.env, signal);
      if (!fetched.ok) {
        if (!fetched.permanent) throw new Error(`file ${j + 1} of message ${i + 1}: ${fetched.error}`);
        lines.push(
          missing(ref, fetched.tooLarge ? `larger than ${h.config.media.maxBytes} bytes` : fetched.error),
        );
        continue;
      }
      const mediaId = await mediaIdOf(sessionId, runId, i, j);
      const mimeType = ref.mimeType ?? fetched.mimeType ?? "application/octet-stream";
      await bucket.put(mediaKey(mediaId) as string, fetched.data, {
        httpMetadata: { contentType: mimeType },
        customMetadata: { runId, ...(ref.name ? { name: ref.name } : {}) },
      });
      const part: MediaPart = {
        type: ref.kind,
        mediaId,
        mimeType,
        bytes: fetched.data.byteLength,
        ...(ref.name ? { name: ref.name } : {}),
      };
      if (ref.kind === "audio") {
        if (h.config.media.transcription) {
          try {
            part.transcript = await transcribeAudio(fetched.data, h.config, h.env as never, signal);
            voice = voice ? `${voice}\n${part.transcript}` : part.transcript;
          } catch (error) {
            if (!(error instanceof TranscriptionError)) throw error;
            lines.push(missing(ref, `not transcribed: ${error.message}`));
          }
        } else {
          lines.push(
            `[${ref.name === "voice.ogg" ? "voice note" : "audio"}: not transcribed (no media.transcription)]`,
          );
        }
      }
      parts.push(part);
    }
    const text = [voice !== undefined ? `[voice note] ${voice}` : "", input.text, ...lines]
      .filter((t) => t.trim() !== "")
      .join("\n");
    out.push({ ...input, text, parts });
  }
  return out;
}

/** What this run's model calls are given of its inputs' files (see the header). */
export async function mediaInputs(
  h: MediaHost,
  inputs: readonly RunInput[],
  vision: boolean,
): Promise<MediaInputs | undefined> {
  const files = inputs.flatMap((i) => i.parts ?? []);
  const bucket = mediaBucket(h.env, h.config);
  if (files.length === 0 || !bucket) return undefined;
  const images = new Map<string, { data: Uint8Array; mediaType: string }>();
  const texts = new Map<string, string>();
  for (const f of files) {
    const wanted =
      (f.type === "image" && vision) ||
      (f.type === "file" && isText(f.mimeType) && f.bytes <= INLINE_FILE_BYTES);
    if (!wanted) continue;
    const key = mediaKey(f.mediaId);
    const object = key ? await bucket.get(key) : null;
    if (!object) continue;
    if (f.type === "image")
      images.set(f.mediaId, { data: new Uint8Array(await object.arrayBuffer()), mediaType: f.mimeType });
    else texts.set(f.mediaId, await object.text());
  }
  return { images, texts };
}
