/**
 * The delivery backoff (src/delivery/deliver.ts `retryDelayMs`): capped exponential from
 * `delivery.baseDelayMs`, and with the defaults a platform down for a minute is outlasted, so
 * the end-to-end connector tests can show recovery after a few failed attempts instead of waiting
 * out a real minute.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { retryDelayMs } from "../../src/delivery/deliver";

describe("retryDelayMs", () => {
  it("doubles from baseDelayMs after each failure, capped at maxDelayMs", () => {
    const cfg = { maxAttempts: 8, baseDelayMs: 100, maxDelayMs: 1_000 };
    expect([1, 2, 3, 4, 5, 6].map((a) => retryDelayMs(a, cfg))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
    expect(retryDelayMs(0, cfg)).toBe(100);
  });

  it("with the default settings, the last attempt comes more than a minute after the first", () => {
    const { delivery } = parseConfig(undefined);
    let waited = 0;
    for (let failures = 1; failures < delivery.maxAttempts; failures++)
      waited += retryDelayMs(failures, delivery);
    expect(delivery.maxAttempts).toBe(8);
    expect(waited).toBe(127_000);
    expect(waited).toBeGreaterThan(60_000);
  });
});
