/**
 * Calling a platform's API from a connector: one request with a deadline, its answer read, and
 * the answer classified the way SPEC §18 says (a 429 after the platform's own wait, 5xx and
 * network errors with the outbox's backoff, a refusal dead at once with the platform's reason);
 * and a split message posted part after part, from where a previous attempt stopped.
 */
import type { SendResult } from "./types";

/** One call gives up after this long (deliveries run in the background of the session). */
export const API_TIMEOUT_MS = 15_000;

export interface ApiAnswer {
  status: number;
  headers: Headers;
  /** The body as JSON, or undefined when it is not JSON. */
  json: unknown;
  text: string;
}

export type Failure = Extract<SendResult, { ok: false }>;
/** A failure of one call, before postParts says how many parts went out. */
export type PartFailure = Omit<Failure, "partsSent">;

/** Calls the platform (giving up after `timeoutMs`); a network failure or timeout is a retryable failure. */
export async function callApi(
  url: string,
  init: RequestInit,
  timeoutMs = API_TIMEOUT_MS,
): Promise<ApiAnswer | PartFailure> {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, json, text };
  } catch (error) {
    return { ok: false, error: `unreachable: ${error instanceof Error ? error.message : String(error)}` };
  }
}

export function isFailure(a: ApiAnswer | PartFailure): a is PartFailure {
  return "ok" in a;
}

/** `Retry-After` in ms: delta-seconds (fractions allowed) or an HTTP date. */
export function retryAfterHeader(headers: Headers, now = Date.now()): number | undefined {
  const value = headers.get("retry-after");
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The usual reading of a platform's HTTP status: 2xx is sent; 429 is retried after `retryAfterMs`
 * (the platform's wait); 5xx is retried with backoff; any other 4xx is dead at once.
 */
export function classifyStatus(
  a: ApiAnswer,
  what: string,
  reason: string,
  retryAfterMs?: number,
): PartFailure | undefined {
  if (a.status >= 200 && a.status < 300) return undefined;
  const error = `${what} answered ${a.status}${reason ? `: ${reason}` : ""}`;
  if (a.status === 429) return { ok: false, error, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  if (a.status >= 500) return { ok: false, error };
  return { ok: false, error, permanent: true };
}

/**
 * Posts `parts` in order from `from` on, recording each one the platform accepted (`onPart`), so
 * a retry never posts an accepted part again; stops at the first failure.
 */
export async function postParts(
  parts: readonly string[],
  from: number,
  post: (part: string, index: number) => Promise<PartFailure | undefined>,
  onPart: (partsSent: number) => void,
): Promise<SendResult> {
  for (let i = from; i < parts.length; i++) {
    const failure = await post(parts[i] ?? "", i);
    if (failure) return { ...failure, partsSent: i };
    if (i + 1 < parts.length) onPart(i + 1);
  }
  return { ok: true };
}

/** A short form of a platform's error text for a delivery's lastError. */
export function brief(text: string): string {
  return text.length > 200 ? `${text.slice(0, 197)}...` : text;
}
