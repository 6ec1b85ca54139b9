import { describe, expect, it } from "vitest";
import { type AgentRef, type Binding, type BindingInput, selectAgentId } from "../../src/keys/agent-binding";
import { canonicalizeSessionKey, fromToolKey, storedKeyForms, toToolKey } from "../../src/keys/canonical-key";
import { normalizeAccountId, normalizeAgentId, normalizeChannel, normalizeId } from "../../src/keys/ids";
import {
  agentIdOfKey,
  agentMainKey,
  chatTypeOfKey,
  cronSessionKey,
  hookSessionKey,
  type InboundKeyInput,
  isReservedKey,
  nodeSessionKey,
  resolveSessionKey,
  type SessionKeyConfig,
  sessionKindOf,
  subagentSessionKey,
} from "../../src/keys/session-key";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function config(overrides: Partial<SessionKeyConfig> = {}): SessionKeyConfig {
  return {
    scope: "per-sender",
    dmScope: "main",
    mainKey: "main",
    identityLinks: {},
    caseSensitiveChannels: ["signal", "matrix"],
    ...overrides,
  };
}

const links = { Alice: ["telegram:123", "Discord:987", "bare-ID"] };

function dm(overrides: Partial<InboundKeyInput> = {}): InboundKeyInput {
  return { agentId: "main", channel: "telegram", chatType: "direct", from: "123", ...overrides };
}

function group(overrides: Partial<InboundKeyInput> = {}): InboundKeyInput {
  return {
    agentId: "main",
    channel: "telegram",
    chatType: "group",
    from: "123",
    groupId: "-100555",
    ...overrides,
  };
}

interface ResolveCase {
  name: string;
  input: InboundKeyInput;
  cfg?: Partial<SessionKeyConfig>;
  key: string;
}

const resolveCases: ResolveCase[] = [
  // dmScope modes
  { name: "direct, dmScope main (default)", input: dm(), key: "agent:main:main" },
  {
    name: "direct, dmScope main with custom mainKey",
    input: dm(),
    cfg: { mainKey: " Home " },
    key: "agent:main:home",
  },
  { name: "direct, per-peer", input: dm(), cfg: { dmScope: "per-peer" }, key: "agent:main:dm:123" },
  {
    name: "direct, per-channel-peer",
    input: dm(),
    cfg: { dmScope: "per-channel-peer" },
    key: "agent:main:telegram:dm:123",
  },
  {
    name: "direct, per-account-channel-peer with accountId",
    input: dm({ accountId: "Bot-2" }),
    cfg: { dmScope: "per-account-channel-peer" },
    key: "agent:main:telegram:bot-2:dm:123",
  },
  {
    name: "direct, per-account-channel-peer defaults accountId to default",
    input: dm(),
    cfg: { dmScope: "per-account-channel-peer" },
    key: "agent:main:telegram:default:dm:123",
  },
  { name: "agentId is normalized", input: dm({ agentId: " Research Bot " }), key: "agent:research-bot:main" },
  { name: "empty agentId falls back to main", input: dm({ agentId: "  " }), key: "agent:main:main" },
  {
    name: "channel is normalized",
    input: dm({ channel: " Telegram " }),
    cfg: { dmScope: "per-channel-peer" },
    key: "agent:main:telegram:dm:123",
  },
  // identityLinks
  {
    name: "identityLinks ignored with dmScope main",
    input: dm(),
    cfg: { identityLinks: links },
    key: "agent:main:main",
  },
  {
    name: "identityLinks per-peer merges channels (telegram)",
    input: dm(),
    cfg: { dmScope: "per-peer", identityLinks: links },
    key: "agent:main:dm:alice",
  },
  {
    name: "identityLinks per-peer merges channels (discord, entry case-insensitive)",
    input: dm({ channel: "discord", from: "987" }),
    cfg: { dmScope: "per-peer", identityLinks: links },
    key: "agent:main:dm:alice",
  },
  {
    name: "identityLinks matches a bare peer id on any channel",
    input: dm({ channel: "slack", from: "Bare-Id" }),
    cfg: { dmScope: "per-peer", identityLinks: links },
    key: "agent:main:dm:alice",
  },
  {
    name: "identityLinks channel-scoped entry does not match another channel",
    input: dm({ channel: "discord", from: "123" }),
    cfg: { dmScope: "per-peer", identityLinks: links },
    key: "agent:main:dm:123",
  },
  {
    name: "identityLinks per-channel-peer keeps the channel",
    input: dm({ channel: "discord", from: "987" }),
    cfg: { dmScope: "per-channel-peer", identityLinks: links },
    key: "agent:main:discord:dm:alice",
  },
  {
    name: "identityLinks per-account-channel-peer keeps channel and account",
    input: dm({ accountId: "work" }),
    cfg: { dmScope: "per-account-channel-peer", identityLinks: links },
    key: "agent:main:telegram:work:dm:alice",
  },
  {
    name: "identityLinks name follows the peer-id rule, lowercased",
    input: dm(),
    cfg: { dmScope: "per-peer", identityLinks: { "Alice Smith!": ["telegram:123"] } },
    key: "agent:main:dm:alice-smith!",
  },
  // groups, channels, legacy group ids
  { name: "group chat", input: group(), key: "agent:main:telegram:group:-100555" },
  {
    name: "room / channel",
    input: group({ channel: "slack", chatType: "channel", groupId: "C0123ABC" }),
    key: "agent:main:slack:channel:c0123abc",
  },
  {
    name: "legacy group:<id>",
    input: group({ groupId: "group:-100555" }),
    key: "agent:main:telegram:group:-100555",
  },
  {
    name: "legacy GROUP:<id> in any case",
    input: group({ channel: "whatsapp", groupId: "GROUP:ABC@g.us" }),
    key: "agent:main:whatsapp:group:abc@g.us",
  },
  {
    name: "group keys ignore dmScope",
    input: group(),
    cfg: { dmScope: "per-account-channel-peer" },
    key: "agent:main:telegram:group:-100555",
  },
  // topics and threads
  {
    name: "forum topic",
    input: group({ threadId: "42", topic: true }),
    key: "agent:main:telegram:group:-100555:topic:42",
  },
  {
    name: "group thread",
    input: group({ threadId: "42" }),
    key: "agent:main:telegram:group:-100555:thread:42",
  },
  {
    name: "channel thread (Slack)",
    input: group({ channel: "slack", chatType: "channel", groupId: "C0123", threadId: "1712345678.123456" }),
    key: "agent:main:slack:channel:c0123:thread:1712345678.123456",
  },
  {
    name: "topic flag on a channel is a thread",
    input: group({ chatType: "channel", threadId: "7", topic: true }),
    key: "agent:main:telegram:channel:-100555:thread:7",
  },
  {
    name: "blank threadId is no thread",
    input: group({ threadId: "  " }),
    key: "agent:main:telegram:group:-100555",
  },
  { name: "direct thread, dmScope main", input: dm({ threadId: "T1" }), key: "agent:main:main:thread:t1" },
  {
    name: "direct thread, per-peer",
    input: dm({ threadId: "T1" }),
    cfg: { dmScope: "per-peer" },
    key: "agent:main:dm:123:thread:t1",
  },
  {
    name: "direct thread, per-channel-peer",
    input: dm({ channel: "discord", threadId: "T1" }),
    cfg: { dmScope: "per-channel-peer" },
    key: "agent:main:discord:dm:123:thread:t1",
  },
  {
    name: "direct thread, per-account-channel-peer",
    input: dm({ threadId: "T1", accountId: "a1" }),
    cfg: { dmScope: "per-account-channel-peer" },
    key: "agent:main:telegram:a1:dm:123:thread:t1",
  },
  {
    name: "direct topic flag is still a thread",
    input: dm({ threadId: "9", topic: true }),
    cfg: { dmScope: "per-channel-peer" },
    key: "agent:main:telegram:dm:123:thread:9",
  },
  // scope global
  { name: "scope global: direct chat", input: dm(), cfg: { scope: "global" }, key: "global" },
  {
    name: "scope global ignores dmScope",
    input: dm(),
    cfg: { scope: "global", dmScope: "per-channel-peer" },
    key: "global",
  },
  {
    name: "scope global: direct thread stays global",
    input: dm({ threadId: "5" }),
    cfg: { scope: "global" },
    key: "global",
  },
  {
    name: "scope global: groups keep their key",
    input: group(),
    cfg: { scope: "global" },
    key: "agent:main:telegram:group:-100555",
  },
  // case rules
  {
    name: "peer ids are lowercased by default",
    input: dm({ channel: "discord", from: "UserABC" }),
    cfg: { dmScope: "per-channel-peer" },
    key: "agent:main:discord:dm:userabc",
  },
  {
    name: "case-sensitive channel keeps peer id case",
    input: dm({ channel: "Signal", from: "AbC+Def=" }),
    cfg: { dmScope: "per-channel-peer" },
    key: "agent:main:signal:dm:AbC+Def=",
  },
  {
    name: "case-sensitive channel keeps peer id case (per-account)",
    input: dm({ channel: "signal", from: "AbC" }),
    cfg: { dmScope: "per-account-channel-peer" },
    key: "agent:main:signal:default:dm:AbC",
  },
  {
    name: "per-peer keeps peer id case on a case-sensitive channel",
    input: dm({ channel: "signal", from: "AbC" }),
    cfg: { dmScope: "per-peer" },
    key: "agent:main:dm:AbC",
  },
  {
    name: "case-sensitive channel keeps group id case",
    input: group({ channel: "signal", groupId: "GrOuP==" }),
    key: "agent:main:signal:group:GrOuP==",
  },
  {
    name: "case-sensitive channel keeps thread id case",
    input: group({ channel: "matrix", chatType: "channel", groupId: "!Room", threadId: "$EvT" }),
    key: "agent:main:matrix:channel:!Room:thread:$EvT",
  },
  {
    name: "caseSensitiveChannels entries compare lowercased",
    input: group({ channel: "imessage", groupId: "Chat1" }),
    cfg: { caseSensitiveChannels: ["iMessage"] },
    key: "agent:main:imessage:group:Chat1",
  },
  {
    name: "other channels lowercase thread ids",
    input: group({ channel: "slack", chatType: "channel", groupId: "C1", threadId: "AbC" }),
    key: "agent:main:slack:channel:c1:thread:abc",
  },
  {
    name: "':' and whitespace in peer ids become '-'",
    input: dm({ channel: "matrix", from: " @Bob:matrix.org " }),
    cfg: { dmScope: "per-channel-peer" },
    key: "agent:main:matrix:dm:@Bob-matrix.org",
  },
  {
    name: "whitespace runs in group ids become '-'",
    input: group({ groupId: "My  Group :: 1" }),
    key: "agent:main:telegram:group:my-group-1",
  },
];

describe("resolveSessionKey", () => {
  for (const c of resolveCases) {
    it(c.name, () => {
      expect(resolveSessionKey(c.input, config(c.cfg))).toBe(c.key);
    });
  }

  it("every resolved key is already canonical", () => {
    for (const c of resolveCases) {
      const cfg = config(c.cfg);
      const key = resolveSessionKey(c.input, cfg);
      expect(canonicalizeSessionKey(key, cfg), c.name).toBe(key);
    }
  });

  it("refuses a group message without a groupId", () => {
    expect(() => resolveSessionKey(group({ groupId: " " }), config())).toThrow(/groupId/);
    expect(() => resolveSessionKey(group({ groupId: "group:" }), config())).toThrow(/groupId/);
  });

  it("refuses a direct message without a sender when the key needs one", () => {
    expect(() => resolveSessionKey(dm({ from: "" }), config({ dmScope: "per-peer" }))).toThrow(/from/);
    expect(resolveSessionKey(dm({ from: "" }), config())).toBe("agent:main:main");
  });
});

describe("id normalization", () => {
  const cases: [raw: string | undefined | null, fallback: string, expected: string][] = [
    ["main", "main", "main"],
    ["  Research  ", "main", "research"],
    ["Ops_Team-2", "main", "ops_team-2"],
    ["my agent!!", "main", "my-agent"],
    ["a  b//c", "main", "a-b-c"],
    ["--edge--", "main", "edge"],
    ["__under", "main", "__under"],
    ["***", "main", "main"],
    ["", "default", "default"],
    ["   ", "default", "default"],
    [undefined, "main", "main"],
    [null, "main", "main"],
    ["a".repeat(70), "main", "a".repeat(64)],
    [`${"a".repeat(63)}!b`, "main", `${"a".repeat(63)}-`],
    [`x${"-".repeat(70)}y`, "main", `x${"-".repeat(63)}`],
  ];
  for (const [raw, fallback, expected] of cases) {
    it(`normalizeId(${JSON.stringify(raw)}, ${fallback}) -> ${expected}`, () => {
      expect(normalizeId(raw, fallback)).toBe(expected);
    });
  }

  it("uses main, default and unknown as the fallbacks", () => {
    expect(normalizeAgentId()).toBe("main");
    expect(normalizeAgentId("!!")).toBe("main");
    expect(normalizeAccountId(null)).toBe("default");
    expect(normalizeAccountId(" Work ")).toBe("work");
    expect(normalizeChannel(" ")).toBe("unknown");
    expect(normalizeChannel("Telegram")).toBe("telegram");
  });
});

describe("other key sources", () => {
  it("cron job -> cron:<id>", () => {
    expect(cronSessionKey("Digest")).toBe("cron:digest");
    expect(() => cronSessionKey(" ")).toThrow(/cron job id/);
  });

  it("webhook -> hook:<uuid>, or the given id", () => {
    const key = hookSessionKey();
    expect(key.startsWith("hook:")).toBe(true);
    expect(key.slice("hook:".length)).toMatch(UUID);
    expect(hookSessionKey()).not.toBe(key);
    expect(hookSessionKey("ABC-1")).toBe("hook:abc-1");
  });

  it("node bridge -> node-<id>", () => {
    expect(nodeSessionKey("Laptop 1")).toBe("node-laptop-1");
    expect(() => nodeSessionKey("")).toThrow(/node id/);
  });

  it("sub-agent -> agent:<agentId>:subagent:<uuid>", () => {
    const key = subagentSessionKey("Research");
    expect(key.startsWith("agent:research:subagent:")).toBe(true);
    expect(key.slice("agent:research:subagent:".length)).toMatch(UUID);
    expect(subagentSessionKey("main", "1234")).toBe("agent:main:subagent:1234");
  });

  it("agent main key, or global under scope global", () => {
    expect(agentMainKey("Main", config())).toBe("agent:main:main");
    expect(agentMainKey("ops", config({ mainKey: "Home" }))).toBe("agent:ops:home");
    expect(agentMainKey("ops", config({ scope: "global" }))).toBe("global");
  });
});

describe("canonicalizeSessionKey", () => {
  const cases: [name: string, raw: string, expected: string, cfg?: Partial<SessionKeyConfig>][] = [
    ["lowercases an agent key", "Agent:Main:Telegram:Group:ABC", "agent:main:telegram:group:abc"],
    ["trims the key and its segments", "  agent: main :main  ", "agent:main:main"],
    ["normalizes the agent id", "agent:My Bot:main", "agent:my-bot:main"],
    [":direct: -> :dm: (per-channel-peer)", "agent:main:telegram:direct:123", "agent:main:telegram:dm:123"],
    [":direct: -> :dm: (per-peer)", "agent:main:DIRECT:Alice", "agent:main:dm:Alice"],
    [
      ":direct: -> :dm: (per-account-channel-peer)",
      "agent:main:telegram:Work:direct:1",
      "agent:main:telegram:work:dm:1",
    ],
    [
      "a peer id named direct is not a marker",
      "agent:main:telegram:dm:direct",
      "agent:main:telegram:dm:direct",
    ],
    [
      "keeps peer id case on a case-sensitive channel",
      "AGENT:MAIN:SIGNAL:DM:AbC",
      "agent:main:signal:dm:AbC",
    ],
    [
      "keeps group and thread id case on a case-sensitive channel",
      "agent:main:Matrix:Channel:!Room:Thread:$EvT",
      "agent:main:matrix:channel:!Room:thread:$EvT",
    ],
    [
      "keeps peer id case under per-account-channel-peer",
      "agent:main:signal:A1:direct:XyZ:THREAD:Q",
      "agent:main:signal:a1:dm:XyZ:thread:Q",
    ],
    ["keeps per-peer id case (no channel segment)", "agent:main:dm:AbC", "agent:main:dm:AbC"],
    [
      "lowercases per-peer ids when no channel keeps case",
      "agent:main:dm:AbC",
      "agent:main:dm:abc",
      { caseSensitiveChannels: [] },
    ],
    [
      "lowercases topic ids",
      "agent:main:telegram:group:-1:TOPIC:Ab",
      "agent:main:telegram:group:-1:topic:ab",
    ],
    [
      "whitespace inside an id becomes '-'",
      "agent:main:discord:dm:John Smith",
      "agent:main:discord:dm:john-smith",
    ],
    ["sub-agent keys", "agent:main:SubAgent:ABCD-1", "agent:main:subagent:abcd-1"],
    ["main-key thread", "agent:main:main:Thread:T1", "agent:main:main:thread:T1"],
    ["reserved global", "GLOBAL", "global"],
    ["reserved unknown", "Unknown", "unknown"],
    ["cron keys stay agent-less", "Cron:Digest", "cron:digest"],
    ["hook keys stay agent-less", "hook:ABC:def", "hook:abc:def"],
    ["node keys stay agent-less", "Node-Laptop", "node-laptop"],
    ["unrecognized legacy keys stay agent-less, lowercased", "Legacy:Thing", "legacy:thing"],
    ["legacy <channel>:group:<id>", "telegram:group:-100", "agent:main:telegram:group:-100"],
    ["legacy <channel>:direct:<id>", "Discord:Direct:987", "agent:main:discord:dm:987"],
    ["legacy dm:<id>", "dm:alice", "agent:main:dm:alice"],
    ["legacy subagent:<id>", "subagent:x1", "agent:main:subagent:x1"],
    ["legacy key keeps case on a case-sensitive channel", "signal:group:AbC", "agent:main:signal:group:AbC"],
    ["literal main -> main key", "MAIN", "agent:main:main"],
    ["literal main under scope global -> global", "main", "global", { scope: "global" }],
  ];
  for (const [name, raw, expected, cfg] of cases) {
    it(name, () => {
      expect(canonicalizeSessionKey(raw, config(cfg))).toBe(expected);
    });
  }

  it("scopes legacy keys and main to the given agent", () => {
    expect(canonicalizeSessionKey("telegram:group:1", config(), "Ops")).toBe("agent:ops:telegram:group:1");
    expect(canonicalizeSessionKey("main", config(), "ops")).toBe("agent:ops:main");
    expect(canonicalizeSessionKey("agent:main:main", config(), "ops")).toBe("agent:main:main");
  });

  it("is idempotent", () => {
    for (const [, raw, , cfg] of cases) {
      const once = canonicalizeSessionKey(raw, config(cfg));
      expect(canonicalizeSessionKey(once, config(cfg))).toBe(once);
    }
  });

  it.each([
    ["", /empty/],
    ["   ", /empty/],
    ["agent::main", /empty segment/],
    ["agent:main:", /empty segment/],
    [":main", /empty segment/],
    ["agent:main", /agent:<agentId>:<rest>/],
  ])("refuses %j", (raw, message) => {
    expect(() => canonicalizeSessionKey(raw, config())).toThrow(message);
  });
});

describe("key properties", () => {
  it("agentIdOfKey", () => {
    expect(agentIdOfKey("agent:research:telegram:group:1")).toBe("research");
    expect(agentIdOfKey("Agent:Ops:main")).toBe("ops");
    expect(agentIdOfKey("cron:digest")).toBeUndefined();
    expect(agentIdOfKey("global")).toBeUndefined();
    expect(agentIdOfKey("agent:main")).toBeUndefined();
  });

  const kinds: [key: string, kind: string, cfg?: Partial<SessionKeyConfig>][] = [
    ["agent:main:main", "main"],
    ["agent:ops:main", "main"],
    ["agent:main:home", "main", { mainKey: "home" }],
    ["agent:main:main", "other", { mainKey: "home" }],
    ["global", "main"],
    ["agent:main:telegram:group:1", "group"],
    ["agent:main:telegram:group:1:topic:2", "group"],
    ["agent:main:slack:channel:c1", "group"],
    ["agent:main:slack:channel:c1:thread:9", "group"],
    ["cron:digest", "cron"],
    ["hook:abc", "hook"],
    ["node-laptop", "node"],
    ["agent:main:dm:alice", "other"],
    ["agent:main:telegram:dm:123", "other"],
    ["agent:main:telegram:default:dm:123", "other"],
    ["agent:main:main:thread:1", "other"],
    ["agent:main:subagent:1234", "other"],
    ["agent:main:telegram:dm:group", "other"],
    ["unknown", "other"],
  ];
  for (const [key, kind, cfg] of kinds) {
    it(`kind of ${key}${cfg ? ` (${JSON.stringify(cfg)})` : ""} is ${kind}`, () => {
      expect(sessionKindOf(key, config(cfg))).toBe(kind);
    });
  }

  const chatTypes: [key: string, hasThreadId: boolean, chatType: string, thread: boolean][] = [
    ["agent:main:main", false, "direct", false],
    ["agent:main:main:thread:1", false, "direct", true],
    ["agent:main:dm:alice", false, "direct", false],
    ["agent:main:dm:alice:thread:1", false, "direct", true],
    ["agent:main:telegram:dm:thread", false, "direct", false],
    ["agent:main:telegram:default:dm:1", true, "direct", true],
    ["global", false, "direct", false],
    ["agent:main:telegram:group:1", false, "group", false],
    ["agent:main:telegram:group:1", true, "group", true],
    ["agent:main:telegram:group:1:topic:2", false, "group", true],
    ["agent:main:slack:channel:c1", false, "channel", false],
    ["agent:main:slack:channel:c1:thread:9", false, "channel", true],
  ];
  for (const [key, hasThreadId, chatType, thread] of chatTypes) {
    it(`chat type of ${key}${hasThreadId ? " with a thread id" : ""} is ${chatType}${thread ? " + thread" : ""}`, () => {
      expect(chatTypeOfKey(key, hasThreadId)).toEqual({ chatType, thread });
    });
  }

  it("global and unknown are reserved, nothing else", () => {
    expect(isReservedKey("global")).toBe(true);
    expect(isReservedKey(" Unknown ")).toBe(true);
    expect(isReservedKey("agent:main:main")).toBe(false);
    expect(isReservedKey("global:thread:1")).toBe(false);
  });
});

describe("main alias for tools", () => {
  it("shows the caller's own main key as main", () => {
    expect(toToolKey("agent:ops:main", "ops", config())).toBe("main");
    expect(toToolKey("agent:main:main", "ops", config())).toBe("agent:main:main");
    expect(toToolKey("agent:ops:telegram:group:1", "ops", config())).toBe("agent:ops:telegram:group:1");
  });

  it("shows global as main under scope global", () => {
    expect(toToolKey("global", "ops", config({ scope: "global" }))).toBe("main");
    // Not the caller's main session under scope global, so no alias.
    expect(toToolKey("agent:ops:main", "ops", config({ scope: "global" }))).toBe("agent:ops:main");
  });

  it("reads main and global as the caller's main key", () => {
    expect(fromToolKey("main", "ops", config())).toBe("agent:ops:main");
    expect(fromToolKey(" MAIN ", "ops", config({ mainKey: "home" }))).toBe("agent:ops:home");
    expect(fromToolKey("global", "ops", config())).toBe("agent:ops:main");
    expect(fromToolKey("main", "ops", config({ scope: "global" }))).toBe("global");
    expect(fromToolKey("global", "ops", config({ scope: "global" }))).toBe("global");
  });

  it("canonicalizes any other key, scoping legacy keys to the caller", () => {
    expect(fromToolKey("Agent:Main:Telegram:Direct:1", "ops", config())).toBe("agent:main:telegram:dm:1");
    expect(fromToolKey("discord:group:9", "ops", config())).toBe("agent:ops:discord:group:9");
    expect(() => fromToolKey("  ", "ops", config())).toThrow(/empty/);
  });

  it("round-trips the main key both ways", () => {
    for (const cfg of [config(), config({ scope: "global" }), config({ mainKey: "home" })]) {
      const stored = agentMainKey("ops", cfg);
      expect(fromToolKey(toToolKey(stored, "ops", cfg), "ops", cfg)).toBe(stored);
    }
  });
});

describe("selectAgentId", () => {
  const agents: AgentRef[] = [{ id: "main" }, { id: "Support", default: true }, { id: "research" }];
  const bindings: Binding[] = [
    { agentId: "research", match: { channel: "slack", peer: { kind: "channel", id: "C0123" } } },
    { agentId: "ops", match: { channel: "Telegram", accountId: "Work" } },
    { agentId: "main", match: { channel: "telegram", peer: { kind: "group", id: "group:-100" } } },
    { agentId: "sales", match: { channel: "telegram" } },
    { agentId: "never", match: { channel: "slack", peer: { kind: "channel", id: "c0123" } } },
  ];
  const input = (overrides: Partial<BindingInput>): BindingInput => ({
    channel: "telegram",
    accountId: "default",
    peer: { kind: "direct", id: "1" },
    ...overrides,
  });

  const cases: [
    name: string,
    input: BindingInput,
    bindings: Binding[],
    agents: AgentRef[],
    expected: string,
  ][] = [
    [
      "channel + peer match, ids compared case-insensitively",
      input({ channel: "Slack", peer: { kind: "channel", id: "c0123" } }),
      bindings,
      agents,
      "research",
    ],
    ["accountId match", input({ accountId: " WORK " }), bindings, agents, "ops"],
    [
      "legacy group: prefix matches the bare id",
      input({ peer: { kind: "group", id: "-100" } }),
      bindings,
      agents,
      "main",
    ],
    ["first fitting binding wins over later ones", input({}), bindings, agents, "sales"],
    [
      "peer kind must match too",
      input({ channel: "slack", peer: { kind: "group", id: "C0123" } }),
      bindings,
      agents,
      "support",
    ],
    ["no binding fits -> default agent", input({ channel: "discord" }), bindings, agents, "support"],
    [
      "no default -> first agent",
      input({ channel: "discord" }),
      bindings,
      [{ id: "Alpha" }, { id: "beta" }],
      "alpha",
    ],
    ["no agents -> main", input({ channel: "discord" }), bindings, [], "main"],
    [
      "an empty match fits everything",
      input({ channel: "x" }),
      [{ agentId: "Catch All", match: {} }],
      agents,
      "catch-all",
    ],
  ];
  for (const [name, i, b, a, expected] of cases) {
    it(name, () => {
      expect(selectAgentId(i, b, a)).toBe(expected);
    });
  }
});

describe("storedKeyForms", () => {
  it("looks for a key as given, then lowercased, when they differ", () => {
    expect(storedKeyForms("agent:main:dm:ERIN")).toEqual(["agent:main:dm:ERIN", "agent:main:dm:erin"]);
    expect(storedKeyForms("agent:main:dm:erin")).toEqual(["agent:main:dm:erin"]);
  });

  it("finds a lowercase session typed in capitals while some channel keeps case", () => {
    const cfg = config({ caseSensitiveChannels: ["signal"] });
    const typed = canonicalizeSessionKey("AGENT:MAIN:DM:ERIN", cfg);
    expect(storedKeyForms(typed)).toContain("agent:main:dm:erin");
  });
});
