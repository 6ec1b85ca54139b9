import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import type { SendPolicyConfig } from "../../src/config/session";
import { evaluateSendPolicy, type SendPolicySubject, sessionChannel } from "../../src/policy/send-policy";
import { entryExpiry, newSessionRow } from "../../src/session/entry/rules";

type Rule = SendPolicyConfig["rules"][number];

function policy(rules: Rule[], fallback: "allow" | "deny" = "allow"): SendPolicyConfig {
  return { rules, default: fallback };
}

const discordGroup: SendPolicySubject = {
  key: "agent:main:discord:group:g1",
  channel: "discord",
  chatType: "group",
  thread: false,
};
const telegramDm: SendPolicySubject = {
  key: "agent:main:main",
  channel: "telegram",
  chatType: "direct",
  thread: false,
};
const cronJob: SendPolicySubject = { key: "cron:digest", channel: null, chatType: "direct", thread: false };

const denyDiscordGroups: Rule = { action: "deny", match: { channel: "discord", chatType: "group" } };

describe("send policy: per-session override", () => {
  it("an allow override wins over a matching deny rule", () => {
    expect(evaluateSendPolicy({ ...discordGroup, override: "allow" }, policy([denyDiscordGroups]))).toBe(
      "allow",
    );
  });

  it("a deny override wins over a default allow and matching allow rules", () => {
    const p = policy([{ action: "allow", match: { channel: "telegram" } }], "allow");
    expect(evaluateSendPolicy({ ...telegramDm, override: "deny" }, p)).toBe("deny");
  });

  it("a null override (inherit) falls through to the rules", () => {
    expect(evaluateSendPolicy({ ...discordGroup, override: null }, policy([denyDiscordGroups]))).toBe("deny");
  });
});

describe("send policy: rules", () => {
  it("a matching deny rule denies", () => {
    expect(evaluateSendPolicy(discordGroup, policy([denyDiscordGroups]))).toBe("deny");
  });

  it("a deny rule whose fields do not all hold does not apply", () => {
    const discordDm = { ...discordGroup, key: "agent:main:discord:dm:u1", chatType: "direct" as const };
    expect(evaluateSendPolicy(discordDm, policy([denyDiscordGroups]))).toBe("allow");
    expect(evaluateSendPolicy({ ...discordGroup, channel: "slack" }, policy([denyDiscordGroups]))).toBe(
      "allow",
    );
  });

  it("a matching deny beats a matching allow listed before it", () => {
    const p = policy([{ action: "allow", match: { channel: "discord" } }, denyDiscordGroups]);
    expect(evaluateSendPolicy(discordGroup, p)).toBe("deny");
  });

  it("a matching allow rule allows over a deny default", () => {
    const p = policy([{ action: "allow", match: { channel: "telegram" } }], "deny");
    expect(evaluateSendPolicy(telegramDm, p)).toBe("allow");
    expect(evaluateSendPolicy(discordGroup, p)).toBe("deny");
  });

  it("falls back to the default when no rule matches", () => {
    expect(evaluateSendPolicy(telegramDm, policy([denyDiscordGroups], "allow"))).toBe("allow");
    expect(evaluateSendPolicy(telegramDm, policy([denyDiscordGroups], "deny"))).toBe("deny");
    expect(evaluateSendPolicy(telegramDm, policy([], "deny"))).toBe("deny");
  });

  it("an empty match matches every session", () => {
    expect(evaluateSendPolicy(cronJob, policy([{ action: "deny", match: {} }]))).toBe("deny");
  });
});

describe("send policy: keyPrefix and rawKeyPrefix", () => {
  it("keyPrefix matches the key with its agent:<id>: prefix removed", () => {
    const p = policy([{ action: "deny", match: { keyPrefix: "discord:group:" } }]);
    expect(evaluateSendPolicy(discordGroup, p)).toBe("deny");
    expect(evaluateSendPolicy({ ...discordGroup, key: "agent:ops:discord:group:g2" }, p)).toBe("deny");
    expect(evaluateSendPolicy(telegramDm, p)).toBe("allow");
  });

  it("keyPrefix cron: matches agent-less cron keys", () => {
    const p = policy([{ action: "deny", match: { keyPrefix: "cron:" } }]);
    expect(evaluateSendPolicy(cronJob, p)).toBe("deny");
    expect(evaluateSendPolicy(telegramDm, p)).toBe("allow");
  });

  it("keyPrefix never sees the agent: prefix", () => {
    const p = policy([{ action: "deny", match: { keyPrefix: "agent:" } }]);
    expect(evaluateSendPolicy(discordGroup, p)).toBe("allow");
  });

  it("rawKeyPrefix matches the full key", () => {
    const p = policy([{ action: "deny", match: { rawKeyPrefix: "agent:ops:" } }]);
    expect(evaluateSendPolicy({ ...telegramDm, key: "agent:ops:main" }, p)).toBe("deny");
    expect(evaluateSendPolicy(telegramDm, p)).toBe("allow");
  });

  it("rawKeyPrefix does not strip the agent prefix", () => {
    const p = policy([{ action: "deny", match: { rawKeyPrefix: "discord:" } }]);
    expect(evaluateSendPolicy(discordGroup, p)).toBe("allow");
  });
});

describe("send policy: chat type", () => {
  const threaded: SendPolicySubject = {
    key: "agent:main:slack:channel:c1:thread:t1",
    channel: "slack",
    chatType: "channel",
    thread: true,
  };

  it("chatType thread matches threaded sessions only", () => {
    const p = policy([{ action: "deny", match: { chatType: "thread" } }]);
    expect(evaluateSendPolicy(threaded, p)).toBe("deny");
    expect(evaluateSendPolicy({ ...threaded, key: "agent:main:slack:channel:c1", thread: false }, p)).toBe(
      "allow",
    );
  });

  it("a thread still matches its base chat type", () => {
    const p = policy([{ action: "deny", match: { chatType: "channel" } }]);
    expect(evaluateSendPolicy(threaded, p)).toBe("deny");
  });

  it("chatType direct does not match groups", () => {
    const p = policy([{ action: "deny", match: { chatType: "direct" } }]);
    expect(evaluateSendPolicy(discordGroup, p)).toBe("allow");
    expect(evaluateSendPolicy(telegramDm, p)).toBe("deny");
  });
});

describe("send policy: case-insensitive matching", () => {
  it("matches channel regardless of case", () => {
    const p = policy([{ action: "deny", match: { channel: "Discord" } }]);
    expect(evaluateSendPolicy({ ...discordGroup, channel: "DISCORD" }, p)).toBe("deny");
  });

  it("matches keyPrefix and rawKeyPrefix regardless of case", () => {
    expect(evaluateSendPolicy(cronJob, policy([{ action: "deny", match: { keyPrefix: "CRON:" } }]))).toBe(
      "deny",
    );
    expect(
      evaluateSendPolicy(
        { ...discordGroup, key: "Agent:Main:Discord:Group:G1" },
        policy([{ action: "deny", match: { keyPrefix: "discord:group:g1" } }]),
      ),
    ).toBe("deny");
    expect(
      evaluateSendPolicy(telegramDm, policy([{ action: "deny", match: { rawKeyPrefix: "AGENT:MAIN:" } }])),
    ).toBe("deny");
  });
});

describe("send policy: the channel a session talks on", () => {
  it("a direct chat is judged by its last channel, a group by its own", () => {
    expect(sessionChannel({ chatType: "direct", channel: "telegram", lastChannel: "signal" })).toBe("signal");
    expect(sessionChannel({ chatType: "direct", channel: "telegram", lastChannel: null })).toBe("telegram");
    expect(sessionChannel({ chatType: "group", channel: "slack", lastChannel: "discord" })).toBe("slack");
    expect(sessionChannel({ chatType: "channel", channel: null, lastChannel: "discord" })).toBe("discord");
    expect(sessionChannel({ chatType: null, channel: null, lastChannel: "telegram" })).toBe("telegram");
  });
});

describe("resetByChannel: the channel a session talks on", () => {
  const config = parseConfig(
    JSON.stringify({ session: { resetByChannel: { signal: { mode: "idle", idleMinutes: 10 } } } }),
  );
  const entry = {
    ...newSessionRow(
      "agent:main:dm:erin",
      { agentId: "main", kind: "other", chatType: "direct", channel: "telegram" },
      Date.UTC(2026, 0, 1, 12),
      "s-1",
    ),
    lastInteractionAt: Date.UTC(2026, 0, 1, 12),
  };

  it("a direct chat now on signal follows signal's policy, not the one it was created on", () => {
    expect(entryExpiry({ ...entry, lastChannel: "signal" }, config)).toBe(Date.UTC(2026, 0, 1, 12, 10));
    // Still on telegram: the default daily reset at 4.
    expect(entryExpiry({ ...entry, lastChannel: "telegram" }, config)).toBe(Date.UTC(2026, 0, 2, 4));
  });
});
