import { describe, expect, it } from "vitest";
import { CATCH_UP_MS, dueSlot, latestSlot, mayCatchUp, minuteOf, nextSlot } from "../../src/cron/schedule";

const utc = (iso: string) => Date.parse(iso);
const daily8 = { schedule: "0 8 * * *", timezone: "UTC" };
const everyMinute = { schedule: "* * * * *", timezone: "UTC" };

describe("scheduled job timing", () => {
  it("runs a job in the minute its expression matches, whatever second the trigger fires in", () => {
    expect(dueSlot(everyMinute, utc("2026-11-25T10:07:00Z"), undefined)).toEqual({
      at: utc("2026-11-25T10:07:00Z"),
      late: false,
    });
    expect(dueSlot(everyMinute, utc("2026-11-25T10:07:59.999Z"), undefined)).toEqual({
      at: utc("2026-11-25T10:07:00Z"),
      late: false,
    });
    expect(dueSlot(daily8, utc("2026-11-25T08:00:31Z"), undefined)?.at).toBe(utc("2026-11-25T08:00:00Z"));
    expect(dueSlot(daily8, utc("2026-11-25T09:00:00Z"), undefined)).toBeUndefined();
  });

  it("reads the expression in the job's time zone", () => {
    const berlin = { schedule: "0 8 * * *", timezone: "Europe/Berlin" };
    // Winter: 08:00 in Berlin is 07:00 UTC; summer: 06:00 UTC.
    expect(dueSlot(berlin, utc("2026-11-25T07:00:10Z"), undefined)?.at).toBe(utc("2026-11-25T07:00:00Z"));
    expect(dueSlot(berlin, utc("2026-11-25T08:00:10Z"), undefined)).toBeUndefined();
    expect(dueSlot(berlin, utc("2026-07-01T06:00:10Z"), undefined)?.at).toBe(utc("2026-07-01T06:00:00Z"));
    expect(nextSlot(berlin, utc("2026-11-25T07:00:00Z"))).toBe(utc("2026-11-26T07:00:00Z"));
  });

  it("accepts nicknames", () => {
    expect(latestSlot({ schedule: "@hourly", timezone: "UTC" }, utc("2026-11-25T10:59:00Z"))).toBe(
      utc("2026-11-25T10:00:00Z"),
    );
  });

  describe("a minute missed while no trigger ran", () => {
    const missed = utc("2026-11-25T08:00:00Z");
    const lastRun = utc("2026-11-24T08:00:00Z");

    it("is made up once by the first trigger within the catch-up window", () => {
      expect(mayCatchUp(daily8, utc("2026-11-25T08:05:00Z"))).toBe(true);
      expect(dueSlot(daily8, utc("2026-11-25T08:05:00Z"), lastRun)).toEqual({ at: missed, late: true });
      // Once claimed, the same minute is not due again.
      expect(dueSlot(daily8, utc("2026-11-25T08:06:00Z"), missed)).toBeUndefined();
    });

    it("is skipped when the window has passed", () => {
      const late = missed + CATCH_UP_MS + 60_000;
      expect(mayCatchUp(daily8, late)).toBe(false);
      expect(dueSlot(daily8, late, lastRun)).toBeUndefined();
    });

    it("is not run for a job that never ran before (it may not have existed then)", () => {
      expect(dueSlot(daily8, utc("2026-11-25T08:05:00Z"), undefined)).toBeUndefined();
    });

    it("is never replayed as a burst: only the latest missed minute counts", () => {
      const every5 = { schedule: "*/5 * * * *", timezone: "UTC" };
      // Down from 10:00 to 10:23: 10:05 … 10:20 were missed; one late run, for 10:20.
      expect(dueSlot(every5, utc("2026-11-25T10:23:00Z"), utc("2026-11-25T10:00:00Z"))).toEqual({
        at: utc("2026-11-25T10:20:00Z"),
        late: true,
      });
    });
  });

  it("floors times to their minute", () => {
    expect(minuteOf(utc("2026-11-25T10:07:42.5Z"))).toBe(utc("2026-11-25T10:07:00Z"));
  });
});
