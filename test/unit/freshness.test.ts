import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import type { ConfigInput } from "../../src/config/schema";
import {
  evaluateFreshness,
  nextDailyBoundary,
  resolveResetPolicy,
  sessionExpiry,
} from "../../src/session/entry/freshness";

const MIN = 60_000;
const HOUR = 60 * MIN;
const utc = (iso: string) => Date.parse(iso);

function session(cfg: ConfigInput["session"]) {
  return parseConfig(JSON.stringify({ session: cfg })).session;
}

describe("daily reset in UTC", () => {
  const daily = { mode: "daily", atHour: 4 } as const;

  it("expires at the first atHour boundary after the session started", () => {
    const started = utc("2025-01-10T03:59:00Z");
    expect(sessionExpiry({ sessionStartedAt: started, lastInteractionAt: null }, daily, "UTC")).toBe(
      utc("2025-01-10T04:00:00Z"),
    );
  });

  it("a session started exactly at the boundary lives until the next day's boundary", () => {
    const started = utc("2025-01-10T04:00:00Z");
    expect(nextDailyBoundary(started, 4, "UTC")).toBe(utc("2025-01-11T04:00:00Z"));
  });

  it("a session started after the boundary expires at tomorrow's boundary", () => {
    expect(nextDailyBoundary(utc("2025-01-10T22:30:00Z"), 4, "UTC")).toBe(utc("2025-01-11T04:00:00Z"));
  });

  it("is fresh one millisecond before the boundary and stale at it", () => {
    const entry = {
      sessionStartedAt: utc("2025-01-10T12:00:00Z"),
      lastInteractionAt: utc("2025-01-11T03:00:00Z"),
    };
    const boundary = utc("2025-01-11T04:00:00Z");
    expect(evaluateFreshness(entry, daily, "UTC", boundary - 1)).toEqual({
      fresh: true,
      expiresAt: boundary,
    });
    expect(evaluateFreshness(entry, daily, "UTC", boundary)).toEqual({ fresh: false, expiresAt: boundary });
  });

  it("ignores recent activity: a daily session expires at the boundary however busy it is", () => {
    const entry = {
      sessionStartedAt: utc("2025-01-10T05:00:00Z"),
      lastInteractionAt: utc("2025-01-11T03:59:59Z"),
    };
    expect(evaluateFreshness(entry, daily, "UTC", utc("2025-01-11T04:00:01Z")).fresh).toBe(false);
  });

  it("honours atHour 0", () => {
    expect(nextDailyBoundary(utc("2025-01-10T12:00:00Z"), 0, "UTC")).toBe(utc("2025-01-11T00:00:00Z"));
    expect(nextDailyBoundary(utc("2025-01-10T00:00:00Z"), 0, "UTC")).toBe(utc("2025-01-11T00:00:00Z"));
  });

  it("honours atHour 23 before the boundary", () => {
    expect(nextDailyBoundary(utc("2025-01-10T12:00:00Z"), 23, "UTC")).toBe(utc("2025-01-10T23:00:00Z"));
  });

  it.each([22, 23])(
    "with atHour %i, a session started after the boundary expires the next day, not a day later",
    (atHour) => {
      const started = Date.UTC(2025, 0, 10, atHour, 30);
      expect(nextDailyBoundary(started, atHour, "UTC")).toBe(Date.UTC(2025, 0, 11, atHour));
      expect(
        evaluateFreshness(
          { sessionStartedAt: started, lastInteractionAt: null },
          { mode: "daily", atHour },
          "UTC",
          Date.UTC(2025, 0, 11, atHour, 1),
        ).fresh,
      ).toBe(false);
    },
  );

  it("with atHour 23 in Europe/Berlin, a session started at 23:30 local expires at 23:00 local the next day", () => {
    // 23:30 CET on Jan 10 is 22:30Z; 23:00 CET on Jan 11 is 22:00Z.
    expect(nextDailyBoundary(utc("2025-01-10T22:30:00Z"), 23, "Europe/Berlin")).toBe(
      utc("2025-01-11T22:00:00Z"),
    );
  });

  it("crosses month and year ends", () => {
    expect(nextDailyBoundary(utc("2024-12-31T10:00:00Z"), 4, "UTC")).toBe(utc("2025-01-01T04:00:00Z"));
    expect(nextDailyBoundary(utc("2024-02-28T10:00:00Z"), 4, "UTC")).toBe(utc("2024-02-29T04:00:00Z"));
  });
});

describe("daily reset in a timezone", () => {
  it("uses the local calendar day when it differs from the UTC day (Asia/Tokyo, UTC+9)", () => {
    // 03:00 JST on Jan 11 is 18:00Z on Jan 10; 04:00 JST on Jan 11 is 19:00Z on Jan 10.
    expect(nextDailyBoundary(utc("2025-01-10T18:00:00Z"), 4, "Asia/Tokyo")).toBe(utc("2025-01-10T19:00:00Z"));
    // 05:00 JST on Jan 11 → next boundary 04:00 JST on Jan 12.
    expect(nextDailyBoundary(utc("2025-01-10T20:00:00Z"), 4, "Asia/Tokyo")).toBe(utc("2025-01-11T19:00:00Z"));
  });

  it("works west of UTC (America/Los_Angeles, UTC-8 in January)", () => {
    // 22:00 PST on Jan 10 is 06:00Z on Jan 11; 04:00 PST on Jan 11 is 12:00Z.
    expect(nextDailyBoundary(utc("2025-01-11T06:00:00Z"), 4, "America/Los_Angeles")).toBe(
      utc("2025-01-11T12:00:00Z"),
    );
  });

  describe("Europe/Berlin across the March switch (CET → CEST on 2025-03-30 at 02:00)", () => {
    it("the boundary before the switch is 04:00 CET = 03:00Z", () => {
      // 03:30 CET on Mar 29.
      expect(nextDailyBoundary(utc("2025-03-29T02:30:00Z"), 4, "Europe/Berlin")).toBe(
        utc("2025-03-29T03:00:00Z"),
      );
    });

    it("the first boundary after the switch is 04:00 CEST = 02:00Z", () => {
      expect(nextDailyBoundary(utc("2025-03-29T12:00:00Z"), 4, "Europe/Berlin")).toBe(
        utc("2025-03-30T02:00:00Z"),
      );
    });

    it("a session started on the switch night at 01:30 CET expires at 04:00 CEST the same morning", () => {
      expect(nextDailyBoundary(utc("2025-03-30T00:30:00Z"), 4, "Europe/Berlin")).toBe(
        utc("2025-03-30T02:00:00Z"),
      );
    });

    it("03:00 local on the switch day is 01:00Z (the first instant of CEST)", () => {
      expect(nextDailyBoundary(utc("2025-03-29T12:00:00Z"), 3, "Europe/Berlin")).toBe(
        utc("2025-03-30T01:00:00Z"),
      );
    });

    it("is fresh at 03:59 CEST and stale at 04:00 CEST on the switch day", () => {
      const entry = { sessionStartedAt: utc("2025-03-29T12:00:00Z"), lastInteractionAt: null };
      const policy = { mode: "daily", atHour: 4 } as const;
      expect(evaluateFreshness(entry, policy, "Europe/Berlin", utc("2025-03-30T01:59:00Z")).fresh).toBe(true);
      expect(evaluateFreshness(entry, policy, "Europe/Berlin", utc("2025-03-30T02:00:00Z")).fresh).toBe(
        false,
      );
    });
  });

  describe("Europe/Berlin across the October switch (CEST → CET on 2025-10-26 at 03:00)", () => {
    it("the boundary before the switch is 04:00 CEST = 02:00Z", () => {
      expect(nextDailyBoundary(utc("2025-10-24T12:00:00Z"), 4, "Europe/Berlin")).toBe(
        utc("2025-10-25T02:00:00Z"),
      );
    });

    it("the first boundary after the switch is 04:00 CET = 03:00Z", () => {
      expect(nextDailyBoundary(utc("2025-10-25T12:00:00Z"), 4, "Europe/Berlin")).toBe(
        utc("2025-10-26T03:00:00Z"),
      );
    });

    it("a session started in the repeated hour expires at 04:00 CET", () => {
      // 02:30 CET (the second 02:30 of the night) is 01:30Z.
      expect(nextDailyBoundary(utc("2025-10-26T01:30:00Z"), 4, "Europe/Berlin")).toBe(
        utc("2025-10-26T03:00:00Z"),
      );
    });

    it("is still fresh at 02:30Z (03:30 CET) on the switch day", () => {
      const entry = { sessionStartedAt: utc("2025-10-25T12:00:00Z"), lastInteractionAt: null };
      const policy = { mode: "daily", atHour: 4 } as const;
      expect(evaluateFreshness(entry, policy, "Europe/Berlin", utc("2025-10-26T02:30:00Z")).fresh).toBe(true);
      expect(evaluateFreshness(entry, policy, "Europe/Berlin", utc("2025-10-26T03:00:00Z")).fresh).toBe(
        false,
      );
    });
  });
});

describe("idle reset", () => {
  const idle = { mode: "idle", idleMinutes: 120 } as const;

  it("expires idleMinutes after the last interaction", () => {
    const last = utc("2025-01-10T10:00:00Z");
    const entry = { sessionStartedAt: utc("2025-01-09T10:00:00Z"), lastInteractionAt: last };
    expect(evaluateFreshness(entry, idle, "UTC", last + 120 * MIN - 1)).toEqual({
      fresh: true,
      expiresAt: last + 120 * MIN,
    });
    expect(evaluateFreshness(entry, idle, "UTC", last + 120 * MIN).fresh).toBe(false);
  });

  it("counts from the session start when nobody has interacted yet", () => {
    const started = utc("2025-01-10T10:00:00Z");
    expect(sessionExpiry({ sessionStartedAt: started, lastInteractionAt: null }, idle, "UTC")).toBe(
      started + 120 * MIN,
    );
  });

  it("does not apply the daily boundary in idle mode", () => {
    const started = utc("2025-01-10T03:00:00Z");
    const policy = { mode: "idle", atHour: 4, idleMinutes: 600 } as const;
    expect(sessionExpiry({ sessionStartedAt: started, lastInteractionAt: started }, policy, "UTC")).toBe(
      started + 10 * HOUR,
    );
  });
});

describe("daily and idle both set", () => {
  const both = { mode: "daily", atHour: 4, idleMinutes: 60 } as const;

  it("the idle limit wins when it comes first", () => {
    const last = utc("2025-01-10T12:00:00Z");
    const entry = { sessionStartedAt: utc("2025-01-10T08:00:00Z"), lastInteractionAt: last };
    expect(evaluateFreshness(entry, both, "UTC", last + 61 * MIN)).toEqual({
      fresh: false,
      expiresAt: last + 60 * MIN,
    });
  });

  it("the daily boundary wins when it comes first", () => {
    const last = utc("2025-01-11T03:30:00Z");
    const entry = { sessionStartedAt: utc("2025-01-10T08:00:00Z"), lastInteractionAt: last };
    expect(evaluateFreshness(entry, both, "UTC", utc("2025-01-11T04:00:00Z"))).toEqual({
      fresh: false,
      expiresAt: utc("2025-01-11T04:00:00Z"),
    });
    expect(evaluateFreshness(entry, both, "UTC", utc("2025-01-11T03:59:00Z")).fresh).toBe(true);
  });
});

describe("resolveResetPolicy", () => {
  const cfg = session({
    reset: { mode: "daily", atHour: 5 },
    resetByType: {
      direct: { mode: "idle", idleMinutes: 240 },
      group: { mode: "daily", atHour: 6 },
      thread: { mode: "daily", atHour: 7 },
    },
    resetByChannel: { discord: { mode: "idle", idleMinutes: 10080 } },
  });

  it("uses resetByChannel for that channel, over the chat type", () => {
    expect(resolveResetPolicy(cfg, "discord", "direct", false)).toEqual({
      mode: "idle",
      atHour: 4,
      idleMinutes: 10080,
    });
    expect(resolveResetPolicy(cfg, "discord", "group", true)).toEqual({
      mode: "idle",
      atHour: 4,
      idleMinutes: 10080,
    });
  });

  it("treats channels named like Object's own properties as any unconfigured channel", () => {
    for (const channel of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
      expect(resolveResetPolicy(cfg, channel, "direct", false), channel).toEqual({
        mode: "idle",
        atHour: 4,
        idleMinutes: 240,
      });
    }
  });

  it("uses resetByType.direct for direct chats on other channels", () => {
    expect(resolveResetPolicy(cfg, "telegram", "direct", false)).toEqual({
      mode: "idle",
      atHour: 4,
      idleMinutes: 240,
    });
  });

  it("uses resetByType.group for groups and for channels (rooms)", () => {
    expect(resolveResetPolicy(cfg, "telegram", "group", false)).toEqual({ mode: "daily", atHour: 6 });
    expect(resolveResetPolicy(cfg, "slack", "channel", false)).toEqual({ mode: "daily", atHour: 6 });
  });

  it("uses resetByType.thread for any threaded chat, over its chat type", () => {
    expect(resolveResetPolicy(cfg, "slack", "channel", true)).toEqual({ mode: "daily", atHour: 7 });
    expect(resolveResetPolicy(cfg, "telegram", "direct", true)).toEqual({ mode: "daily", atHour: 7 });
  });

  it("falls back to session.reset when no type entry applies", () => {
    const partial = session({
      reset: { mode: "daily", atHour: 5 },
      resetByType: { direct: { mode: "idle", idleMinutes: 30 } },
    });
    expect(resolveResetPolicy(partial, "telegram", "group", false)).toEqual({ mode: "daily", atHour: 5 });
    expect(resolveResetPolicy(partial, "telegram", "group", true)).toEqual({ mode: "daily", atHour: 5 });
    expect(resolveResetPolicy(partial, null, "direct", false)).toEqual({
      mode: "idle",
      atHour: 4,
      idleMinutes: 30,
    });
  });

  it("defaults to daily at 04:00 with an empty config", () => {
    expect(resolveResetPolicy(session({}), "telegram", "direct", false)).toEqual({
      mode: "daily",
      atHour: 4,
    });
  });

  it("applies the legacy session.idleMinutes as idle-only", () => {
    expect(resolveResetPolicy(session({ idleMinutes: 45 }), undefined, "direct", false)).toEqual({
      mode: "idle",
      atHour: 4,
      idleMinutes: 45,
    });
  });
});
