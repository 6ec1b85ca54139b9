/**
 * Provider call retries (SPEC §5, §17 "Model retries"): `attempts` is the total number of
 * provider calls per model step, the first included. Only transient failures are retried:
 * 429, 5xx, timeouts and network errors. The AI SDK's own retries are off (`maxRetries: 0`).
 */
import { APICallError } from "ai";

export interface RetryPolicy {
  attempts: number;
  baseDelayMs: number;
}

export function isRetryable(error: unknown): boolean {
  if (APICallError.isInstance(error)) {
    if (error.isRetryable) return true;
    const status = error.statusCode ?? 0;
    return status === 408 || status === 429 || status >= 500;
  }
  if (error instanceof Error && error.name === "AbortError") return false;
  // fetch() network failures surface as TypeError in workerd.
  return error instanceof TypeError;
}

/** The provider's own words: status code and message, never a generic wrapper. */
export function describeProviderError(error: unknown): string {
  if (APICallError.isInstance(error)) {
    const status = error.statusCode ? `${error.statusCode} ` : "";
    return `provider error ${status}${error.message}`.trim();
  }
  return error instanceof Error ? error.message : String(error);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

export async function withRetries<T>(
  policy: RetryPolicy,
  signal: AbortSignal | undefined,
  call: () => Promise<T>,
): Promise<T> {
  let attempt = 0;
  for (;;) {
    attempt++;
    try {
      return await call();
    } catch (error) {
      if (attempt >= policy.attempts || !isRetryable(error) || signal?.aborted) throw error;
      const backoff = policy.baseDelayMs * 2 ** (attempt - 1);
      await sleep(backoff + Math.random() * backoff * 0.2, signal);
    }
  }
}
