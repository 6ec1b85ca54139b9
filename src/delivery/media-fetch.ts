/**
 * Downloading a file a person sent (SPEC §22), from where its message says: a platform's file
 * id through its connector, with the platform's own auth (Telegram's `getFile`, …), or the
 * bridge's https URL. At most `maxBytes` are read: a larger file stops the download, however
 * its server declared it. What is kept, and where, is the run's (session/run/media.ts).
 */
import { ownEntry } from "../config/lookup";
import type { Config } from "../config/schema";
import { accountWith } from "../connectors/registry";
import type { FileSource } from "../connectors/types";
import type { MediaRef } from "../transcript/message";

export type Fetched =
  | { ok: true; data: Uint8Array; mimeType: string | undefined }
  | { ok: false; error: string; permanent: boolean; tooLarge?: boolean };

/** One download gives up after this long; the run's attempt is retried. */
const FETCH_TIMEOUT_MS = 60_000;

async function sourceOf(
  ref: MediaRef,
  route: { channel: string; accountId: string },
  config: Config,
  env: Env,
): Promise<FileSource> {
  if (ref.url) {
    if (!ref.url.startsWith("https://"))
      return {
        ok: false,
        error: `only https URLs are fetched (got ${ref.url.slice(0, 80)})`,
        permanent: true,
      };
    return { ok: true, url: ref.url };
  }
  const connector = ownEntry(config.connectors, route.channel);
  if (!ref.ref || !connector || connector.type === "webhook")
    return {
      ok: false,
      error: `nothing to fetch the file from on channel "${route.channel}"`,
      permanent: true,
    };
  const found = accountWith(connector, route.accountId, env);
  if (!found)
    return {
      ok: false,
      error: `connector "${route.channel}" has no account "${route.accountId}"`,
      permanent: true,
    };
  if (!found.module.fileSource)
    return { ok: false, error: `${connector.type} files carry a URL, not an id`, permanent: true };
  return found.module.fileSource(ref.ref, found.account, found.secrets);
}

/**
 * The size the platform gives a file its message did not size (connectors' `fileSize`), or
 * undefined: not a platform that can tell, or it did not answer within SIZE_TIMEOUT_MS.
 */
export async function statedSize(
  ref: string,
  route: { channel: string; accountId: string },
  config: Config,
  env: Env,
): Promise<number | undefined> {
  const connector = ownEntry(config.connectors, route.channel);
  if (!connector || connector.type === "webhook") return undefined;
  const found = accountWith(connector, route.accountId, env);
  const size = found?.module.fileSize;
  if (!found || !size) return undefined;
  return size(ref, found.account, found.secrets, SIZE_TIMEOUT_MS).catch(() => undefined);
}

/** How long the webhook waits for a platform to say a file's size (the run checks it anyway). */
const SIZE_TIMEOUT_MS = 3_000;

/** The file's bytes, read up to `maxBytes`. */
export async function fetchMedia(
  ref: MediaRef,
  route: { channel: string; accountId: string },
  config: Config,
  env: Env,
  signal: AbortSignal,
): Promise<Fetched> {
  const max = config.media.maxBytes;
  const source = await sourceOf(ref, route, config, env);
  if (!source.ok) return source;
  let res: Response;
  try {
    res = await fetch(source.url, {
      headers: source.headers ?? {},
      signal: AbortSignal.any([signal, AbortSignal.timeout(FETCH_TIMEOUT_MS)]),
    });
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    return {
      ok: false,
      error: `fetching the file: ${error instanceof Error ? error.message : error}`,
      permanent: false,
    };
  }
  if (!res.ok) {
    await res.body?.cancel();
    return {
      ok: false,
      error: `fetching the file answered ${res.status}`,
      permanent: res.status >= 400 && res.status < 500 && res.status !== 429 && res.status !== 408,
    };
  }
  const declared = Number(res.headers.get("content-length") ?? Number.NaN);
  if (declared > max) {
    await res.body?.cancel();
    return {
      ok: false,
      error: `the file is ${declared} bytes, past media.maxBytes (${max})`,
      permanent: true,
      tooLarge: true,
    };
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = res.body?.getReader();
  while (reader) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel();
      return {
        ok: false,
        error: `the file is past media.maxBytes (${max})`,
        permanent: true,
        tooLarge: true,
      };
    }
    chunks.push(value);
  }
  const data = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    data.set(c, at);
    at += c.byteLength;
  }
  return { ok: true, data, mimeType: res.headers.get("content-type")?.split(";")[0]?.trim() || undefined };
}
