import { APICallError } from "ai";
import { describe, expect, it } from "vitest";
import { describeProviderError, isRetryable, withRetries } from "../../src/agent/retry";

function apiError(statusCode: number | undefined, message = `HTTP ${statusCode}`, isRetryableFlag?: boolean) {
  return new APICallError({
    message,
    url: "https://provider.test/v1/chat/completions",
    requestBodyValues: {},
    statusCode,
    ...(isRetryableFlag === undefined ? {} : { isRetryable: isRetryableFlag }),
  });
}

/** A call that fails with the given errors in turn, then succeeds; counts its invocations. */
function flaky(errors: unknown[], value = "done") {
  let calls = 0;
  const call = async () => {
    const error = errors[calls++];
    if (error !== undefined) throw error;
    return value;
  };
  return { call, calls: () => calls };
}

const fast = { attempts: 3, baseDelayMs: 0 };

describe("withRetries", () => {
  it("makes exactly `attempts` calls when every call fails, then throws the last error", async () => {
    const errors = [apiError(500, "first"), apiError(502, "second"), apiError(503, "third"), apiError(504)];
    const f = flaky(errors);
    await expect(withRetries(fast, undefined, f.call)).rejects.toBe(errors[2]);
    expect(f.calls()).toBe(3);
  });

  it("counts the first call: attempts 1 means no retry", async () => {
    const f = flaky([apiError(429)]);
    await expect(withRetries({ attempts: 1, baseDelayMs: 0 }, undefined, f.call)).rejects.toBeInstanceOf(
      APICallError,
    );
    expect(f.calls()).toBe(1);
  });

  it("returns the first success and stops calling", async () => {
    const f = flaky([apiError(429), new TypeError("network connection lost")], "ok");
    expect(await withRetries({ attempts: 5, baseDelayMs: 0 }, undefined, f.call)).toBe("ok");
    expect(f.calls()).toBe(3);
  });

  it("does not retry a non-retryable error", async () => {
    const bad = apiError(400, "invalid model parameter");
    const f = flaky([bad]);
    await expect(withRetries(fast, undefined, f.call)).rejects.toBe(bad);
    expect(f.calls()).toBe(1);
  });

  it("does not retry an ordinary programming error", async () => {
    const f = flaky([new Error("undefined is not a function")]);
    await expect(withRetries(fast, undefined, f.call)).rejects.toThrow("undefined is not a function");
    expect(f.calls()).toBe(1);
  });

  it("stops retrying once the signal is aborted", async () => {
    const controller = new AbortController();
    let calls = 0;
    const call = async () => {
      calls++;
      controller.abort(new Error("stopped"));
      throw apiError(503);
    };
    await expect(withRetries(fast, controller.signal, call)).rejects.toBeInstanceOf(APICallError);
    expect(calls).toBe(1);
  });

  it("backs off exponentially from baseDelayMs between attempts", async () => {
    const f = flaky([apiError(500), apiError(500)]);
    const started = Date.now();
    await withRetries({ attempts: 3, baseDelayMs: 40 }, undefined, f.call);
    // 40 ms then 80 ms (plus up to 20 % jitter each).
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(120);
    expect(elapsed).toBeLessThan(1000);
    expect(f.calls()).toBe(3);
  });

  it("an abort during the backoff ends the wait with the abort reason", async () => {
    const controller = new AbortController();
    const reason = new Error("run aborted");
    const f = flaky([apiError(500)]);
    const pending = withRetries({ attempts: 3, baseDelayMs: 10_000 }, controller.signal, f.call);
    setTimeout(() => controller.abort(reason), 10);
    await expect(pending).rejects.toBe(reason);
    expect(f.calls()).toBe(1);
  });
});

describe("isRetryable", () => {
  it.each([
    [429, true],
    [408, true],
    [500, true],
    [502, true],
    [503, true],
    [400, false],
    [401, false],
    [403, false],
    [404, false],
    [422, false],
  ])("provider status %i → %s", (status, expected) => {
    expect(isRetryable(apiError(status))).toBe(expected);
  });

  it("retries a provider error the SDK marks retryable even without a status", () => {
    expect(isRetryable(apiError(undefined, "socket hang up", true))).toBe(true);
  });

  it("retries a 5xx even if the SDK flag says otherwise", () => {
    expect(isRetryable(apiError(500, "overloaded", false))).toBe(true);
  });

  it("retries network failures (TypeError from fetch)", () => {
    expect(isRetryable(new TypeError("fetch failed"))).toBe(true);
  });

  it("does not retry aborts, plain errors or non-errors", () => {
    expect(isRetryable(new DOMException("aborted", "AbortError"))).toBe(false);
    const abort = new Error("aborted");
    abort.name = "AbortError";
    expect(isRetryable(abort)).toBe(false);
    expect(isRetryable(new Error("bug"))).toBe(false);
    expect(isRetryable("429")).toBe(false);
    expect(isRetryable(undefined)).toBe(false);
  });
});

describe("describeProviderError", () => {
  it("keeps the provider's status and message", () => {
    expect(describeProviderError(apiError(429, "Rate limit reached for requests"))).toBe(
      "provider error 429 Rate limit reached for requests",
    );
  });

  it("uses the message of other errors as is", () => {
    expect(describeProviderError(new TypeError("fetch failed"))).toBe("fetch failed");
    expect(describeProviderError("plain")).toBe("plain");
  });
});
