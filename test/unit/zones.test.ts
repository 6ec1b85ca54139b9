import { describe, expect, it } from "vitest";
import { localDay, localFields, offsetMs } from "../../src/time/zones";

/** The offset straight from Intl, with no caching: what offsetMs must always agree with. */
function reference(utcMs: number, timeZone: string): number {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone,
    hourCycle: "h23",
    year: "numeric",
    month: "numeric",
    day: "numeric",
    hour: "numeric",
    minute: "numeric",
    second: "numeric",
  }).formatToParts(new Date(utcMs));
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  const local = Date.UTC(
    get("year"),
    get("month") - 1,
    get("day"),
    get("hour"),
    get("minute"),
    get("second"),
  );
  return local - Math.floor(utcMs / 1000) * 1000;
}

// Transitions: New York springs forward at 07:00Z, Lord Howe shifts by 30 minutes at 15:00Z,
// St John's is -3:30 and Kathmandu +5:45 (no transition), London falls back at 01:00Z.
const AROUND: Array<[string, string]> = [
  ["America/New_York", "2026-03-08T07:00:00Z"],
  ["America/New_York", "2026-11-01T06:00:00Z"],
  ["Australia/Lord_Howe", "2026-04-04T15:00:00Z"],
  ["America/St_Johns", "2026-03-08T05:30:00Z"],
  ["Asia/Kathmandu", "2026-06-01T00:00:00Z"],
  ["Europe/London", "2026-10-25T01:00:00Z"],
];

describe("offsetMs", () => {
  it("agrees with Intl at every minute for two hours around transitions, asked in any order", () => {
    for (const [zone, at] of AROUND) {
      const t = Date.parse(at);
      const instants: number[] = [];
      for (let m = -60; m <= 60; m++) instants.push(t + m * 60_000 + (m % 7) * 1000);
      // Late instants first, then early ones: a cached hour must never answer for another.
      for (const u of [...instants].reverse().concat(instants)) {
        expect(offsetMs(u, zone), `${zone} at ${new Date(u).toISOString()}`).toBe(reference(u, zone));
      }
    }
  });

  it("gives local calendar fields across a spring-forward gap", () => {
    expect(localFields(Date.parse("2026-03-08T06:59:00Z"), "America/New_York")).toMatchObject({
      hour: 1,
      minute: 59,
    });
    expect(localFields(Date.parse("2026-03-08T07:00:00Z"), "America/New_York")).toMatchObject({
      hour: 3,
      minute: 0,
    });
  });
});

describe("localDay", () => {
  it("is the calendar day where the zone is, across a day boundary", () => {
    // 07:30 UTC on Nov 28 is still Nov 27 in Los Angeles (UTC-8) and already Nov 28 in Tokyo.
    const at = Date.UTC(2026, 10, 28, 7, 30);
    expect(localDay(at, "UTC")).toBe("2026-11-28");
    expect(localDay(at, "America/Los_Angeles")).toBe("2026-11-27");
    expect(localDay(at, "Asia/Tokyo")).toBe("2026-11-28");
    // 08:00 UTC is midnight in Los Angeles: the new day.
    expect(localDay(Date.UTC(2026, 10, 28, 8, 0), "America/Los_Angeles")).toBe("2026-11-28");
    expect(localDay(Date.UTC(2026, 10, 28, 7, 59, 59, 999), "America/Los_Angeles")).toBe("2026-11-27");
  });
});
