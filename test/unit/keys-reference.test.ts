/**
 * Tables for the key rules where Switchboard was checked against OpenClaw's routing functions
 * (SPEC §2, §17 "Keys, more."): identityLinks names, the id rule, leading "_", the case of peer,
 * group, thread and topic ids, threads in direct chats, and the `global` alias for tools. Every
 * resolved key is also checked to come back unchanged from canonicalization and the tool alias.
 */
import { describe, expect, it } from "vitest";
import { canonicalizeSessionKey, fromToolKey, toToolKey } from "../../src/keys/canonical-key";
import {
  normalizeAccountId,
  normalizeAgentId,
  normalizeChannel,
  normalizeId,
  normalizeMainKey,
} from "../../src/keys/ids";
import { type InboundKeyInput, resolveSessionKey, type SessionKeyConfig } from "../../src/keys/session-key";

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

function dm(overrides: Partial<InboundKeyInput> = {}): InboundKeyInput {
  return { agentId: "main", channel: "telegram", chatType: "direct", from: "123", ...overrides };
}

function group(overrides: Partial<InboundKeyInput> = {}): InboundKeyInput {
  return {
    agentId: "main",
    channel: "telegram",
    chatType: "group",
    from: "123",
    groupId: "G1",
    ...overrides,
  };
}

type Row = [name: string, input: InboundKeyInput, cfg: Partial<SessionKeyConfig>, key: string];

const a63 = "a".repeat(63);

// ─── 1. identityLinks names are peer ids ──────────────────────────────────────────────────────

const linkRows: Row[] = [
  ...(
    [
      ["Zoë", "zoë"],
      ["José", "josé"],
      ["eve.x", "eve.x"],
      ["@frank", "@frank"],
      ["李雷", "李雷"],
      ["!!!", "!!!"],
      ["ÉMILE", "émile"],
      ["  Bob  ", "bob"],
      ["Alice Smith!", "alice-smith!"],
      ["ann:lee", "ann-lee"],
    ] as const
  ).map(
    ([name, peerId]): Row => [
      `per-peer: name ${JSON.stringify(name)} -> ${peerId}`,
      dm(),
      { dmScope: "per-peer", identityLinks: { [name]: ["telegram:123"] } },
      `agent:main:dm:${peerId}`,
    ],
  ),
  [
    "per-peer: 李雷 on another channel shares the key",
    dm({ channel: "discord", from: "987" }),
    { dmScope: "per-peer", identityLinks: { 李雷: ["telegram:123", "discord:987"] } },
    "agent:main:dm:李雷",
  ],
  [
    "per-peer: a name of punctuation only is not skipped",
    dm({ channel: "discord", from: "987" }),
    { dmScope: "per-peer", identityLinks: { "!!!": ["telegram:123", "discord:987"] } },
    "agent:main:dm:!!!",
  ],
  [
    "per-channel-peer: the name is lowercase even on a case-sensitive channel",
    dm({ channel: "signal", from: "+4915" }),
    { dmScope: "per-channel-peer", identityLinks: { Zoë: ["signal:+4915"] } },
    "agent:main:signal:dm:zoë",
  ],
  [
    "per-account-channel-peer: the name keeps channel and account",
    dm({ accountId: "Work" }),
    { dmScope: "per-account-channel-peer", identityLinks: { José: ["telegram:123"] } },
    "agent:main:telegram:work:dm:josé",
  ],
  [
    "a later name matches when an earlier one does not",
    dm({ from: "5" }),
    { dmScope: "per-peer", identityLinks: { "@frank": ["telegram:1"], "eve.x": ["telegram:5"] } },
    "agent:main:dm:eve.x",
  ],
];

// ─── 2. and 3. the id rule: clean, strip "-", then cut to 64; a leading "_" stays ──────────────

const idCases: [raw: string, expected: string][] = [
  [`${a63}!b`, `${a63}-`],
  [`${a63} b`, `${a63}-`],
  [`${"a".repeat(64)}!`, "a".repeat(64)],
  [`-${"a".repeat(70)}`, "a".repeat(64)],
  [`--${"a".repeat(62)}!!b`, `${"a".repeat(62)}-b`],
  [`x${"-".repeat(70)}y`, `x${"-".repeat(63)}`],
  ["_ops", "_ops"],
  ["__under", "__under"],
  ["_", "_"],
  ["-_x", "_x"],
  [" _Bot! ", "_bot"],
  ["_Work Account", "_work-account"],
  [`_${"a".repeat(62)}!b`, `_${"a".repeat(62)}-`],
  ["___", "___"],
];

const idRows: Row[] = [
  [
    "accountId whose 64th character is a separator",
    dm({ accountId: `${a63} b` }),
    { dmScope: "per-account-channel-peer" },
    `agent:main:telegram:${a63}-:dm:123`,
  ],
  ["agentId whose 64th character is a separator", dm({ agentId: `${a63}!!y` }), {}, `agent:${a63}-:main`],
  [
    "channel whose 64th character is a separator",
    dm({ channel: `${"c".repeat(63)}.z` }),
    { dmScope: "per-channel-peer" },
    `agent:main:${"c".repeat(63)}-:dm:123`,
  ],
  [
    "mainKey whose 64th character is a separator",
    dm(),
    { mainKey: `${"m".repeat(63)}/n` },
    `agent:main:${"m".repeat(63)}-`,
  ],
  ["agentId with a leading _", dm({ agentId: "_Ops" }), {}, "agent:_ops:main"],
  [
    "accountId with a leading _",
    dm({ accountId: "_prod" }),
    { dmScope: "per-account-channel-peer" },
    "agent:main:telegram:_prod:dm:123",
  ],
  [
    "accountId with a leading _ cut to 64 on a separator",
    dm({ accountId: `_${"a".repeat(62)}!b` }),
    { dmScope: "per-account-channel-peer" },
    `agent:main:telegram:_${"a".repeat(62)}-:dm:123`,
  ],
  [
    "group chat for an agent with a leading _",
    group({ agentId: "__team" }),
    {},
    "agent:__team:telegram:group:g1",
  ],
];

// ─── 4. case: caseSensitiveChannels keep peer, group, thread and topic ids; others lowercase ──

const scopes = ["main", "per-peer", "per-channel-peer", "per-account-channel-peer"] as const;

function directKey(scope: (typeof scopes)[number], channel: string, peer: string): string {
  switch (scope) {
    case "main":
      return "agent:main:main";
    case "per-peer":
      return `agent:main:dm:${peer}`;
    case "per-channel-peer":
      return `agent:main:${channel}:dm:${peer}`;
    case "per-account-channel-peer":
      return `agent:main:${channel}:default:dm:${peer}`;
  }
}

const caseRows: Row[] = [
  ...scopes.flatMap((dmScope): Row[] => [
    [
      `${dmScope}: signal keeps the peer id`,
      dm({ channel: "signal", from: "AbC" }),
      { dmScope },
      directKey(dmScope, "signal", "AbC"),
    ],
    [
      `${dmScope}: signal keeps the thread id`,
      dm({ channel: "signal", from: "AbC", threadId: "ThR" }),
      { dmScope },
      `${directKey(dmScope, "signal", "AbC")}:thread:ThR`,
    ],
    [
      `${dmScope}: telegram lowercases peer and thread ids`,
      dm({ from: "AbC", threadId: "ThR" }),
      { dmScope },
      `${directKey(dmScope, "telegram", "abc")}:thread:thr`,
    ],
    [
      `${dmScope}: signal lowercases when it is not listed`,
      dm({ channel: "signal", from: "AbC", threadId: "ThR" }),
      { dmScope, caseSensitiveChannels: ["matrix"] },
      `${directKey(dmScope, "signal", "abc")}:thread:thr`,
    ],
    [
      `${dmScope}: signal keeps the group id`,
      group({ channel: "signal", groupId: "GrP=" }),
      { dmScope },
      "agent:main:signal:group:GrP=",
    ],
    [
      `${dmScope}: signal keeps the topic id`,
      group({ channel: "signal", groupId: "GrP=", threadId: "ToP", topic: true }),
      { dmScope },
      "agent:main:signal:group:GrP=:topic:ToP",
    ],
    [
      `${dmScope}: matrix keeps room and thread ids`,
      group({ channel: "matrix", chatType: "channel", groupId: "!Room", threadId: "$EvT" }),
      { dmScope },
      "agent:main:matrix:channel:!Room:thread:$EvT",
    ],
    [
      `${dmScope}: telegram lowercases group and topic ids`,
      group({ groupId: "GrP", threadId: "ToP", topic: true }),
      { dmScope },
      "agent:main:telegram:group:grp:topic:top",
    ],
    [
      `${dmScope}: slack lowercases channel and thread ids`,
      group({ channel: "slack", chatType: "channel", groupId: "C0AB", threadId: "ThR" }),
      { dmScope },
      "agent:main:slack:channel:c0ab:thread:thr",
    ],
  ]),
  [
    "per-peer: two signal peers that differ in case get two keys (upper)",
    dm({ channel: "signal", from: "ABC" }),
    { dmScope: "per-peer" },
    "agent:main:dm:ABC",
  ],
  [
    "per-peer: two signal peers that differ in case get two keys (lower)",
    dm({ channel: "signal", from: "abc" }),
    { dmScope: "per-peer" },
    "agent:main:dm:abc",
  ],
  [
    "per-peer: no channel keeps case",
    dm({ channel: "signal", from: "AbC", threadId: "ThR" }),
    { dmScope: "per-peer", caseSensitiveChannels: [] },
    "agent:main:dm:abc:thread:thr",
  ],
];

// ─── 5. a direct chat in a thread is the dmScope key plus :thread:<id> ─────────────────────────

const threadRows: Row[] = [
  ...scopes.flatMap((dmScope): Row[] => [
    [
      `${dmScope}: thread`,
      dm({ threadId: "T1" }),
      { dmScope },
      `${directKey(dmScope, "telegram", "123")}:thread:t1`,
    ],
    [
      `${dmScope}: thread with a linked peer`,
      dm({ threadId: "T1" }),
      { dmScope, identityLinks: { Alice: ["telegram:123"] } },
      `${dmScope === "main" ? "agent:main:main" : directKey(dmScope, "telegram", "alice")}:thread:t1`,
    ],
    [
      `${dmScope}: matrix thread keeps its case`,
      dm({ channel: "matrix", from: "@Bob:hs.org", threadId: "$EvT" }),
      { dmScope },
      `${directKey(dmScope, "matrix", "@Bob-hs.org")}:thread:$EvT`,
    ],
    [
      `${dmScope}: topic flag on a direct chat is a thread`,
      dm({ threadId: "9", topic: true }),
      { dmScope },
      `${directKey(dmScope, "telegram", "123")}:thread:9`,
    ],
    [
      `${dmScope}: scope global keeps the thread in global`,
      dm({ threadId: "T1" }),
      { dmScope, scope: "global" },
      "global",
    ],
  ]),
];

const tables: [title: string, rows: Row[]][] = [
  ["identityLinks names are peer ids", linkRows],
  ["ids are cleaned, then cut to 64; a leading _ stays", idRows],
  ["caseSensitiveChannels keep peer, group, thread and topic ids", caseRows],
  ["a direct chat in a thread is the dmScope key plus :thread:<id>", threadRows],
];

for (const [title, rows] of tables) {
  describe(title, () => {
    it.each(rows)("%s", (_name, input, cfg, key) => {
      expect(resolveSessionKey(input, config(cfg))).toBe(key);
    });

    it.each(rows)("%s: the stored key round-trips", (_name, input, overrides) => {
      const cfg = config(overrides);
      const key = resolveSessionKey(input, cfg);
      expect(canonicalizeSessionKey(key, cfg)).toBe(key);
      expect(canonicalizeSessionKey(key, cfg, "other")).toBe(key);
      expect(fromToolKey(toToolKey(key, "main", cfg), "main", cfg)).toBe(key);
      expect(fromToolKey(toToolKey(key, "other", cfg), "other", cfg)).toBe(key);
    });
  });
}

describe("the id rule", () => {
  it.each(idCases)("normalizeId(%j) -> %j", (raw, expected) => {
    expect(normalizeId(raw, "main")).toBe(expected);
  });

  it.each(idCases)(
    "%j is normalized for agent, account, channel and mainKey alike, and stays put",
    (raw, expected) => {
      for (const normalize of [normalizeAgentId, normalizeAccountId, normalizeChannel, normalizeMainKey]) {
        expect(normalize(raw)).toBe(expected);
        expect(normalize(expected)).toBe(expected);
      }
    },
  );
});

describe("canonicalizing keys without a channel segment", () => {
  const cases: [raw: string, expected: string, cfg?: Partial<SessionKeyConfig>][] = [
    ["agent:main:dm:AbC", "agent:main:dm:AbC"],
    ["Agent:Main:DM:AbC:Thread:ThR", "agent:main:dm:AbC:thread:ThR"],
    ["AGENT:MAIN:DIRECT:AbC", "agent:main:dm:AbC"],
    ["AGENT:MAIN:MAIN:THREAD:ThR", "agent:main:main:thread:ThR"],
    ["agent:ops:home:Thread:$EvT", "agent:ops:home:thread:$EvT", { mainKey: "home" }],
    ["dm:AbC", "agent:main:dm:AbC"],
    ["agent:main:dm:AbC:thread:ThR", "agent:main:dm:abc:thread:thr", { caseSensitiveChannels: [] }],
    ["agent:main:main:thread:ThR", "agent:main:main:thread:thr", { caseSensitiveChannels: [] }],
    ["agent:main:SubAgent:AbC", "agent:main:subagent:abc"],
  ];
  it.each(cases)("%s -> %s", (raw, expected, cfg) => {
    expect(canonicalizeSessionKey(raw, config(cfg))).toBe(expected);
  });
});

// ─── 6. scope "global": tools show `main` and read `main` back as `global` ─────────────────────

describe("the global alias for tools", () => {
  const global = config({ scope: "global" });

  const shown: [key: string, caller: string, cfg: SessionKeyConfig, display: string][] = [
    ["global", "main", global, "main"],
    ["global", "ops", global, "main"],
    [" Global ", "ops", global, "main"],
    ["global", "ops", config({ scope: "global", mainKey: "home" }), "main"],
    ["agent:ops:main", "ops", global, "agent:ops:main"],
    ["agent:ops:telegram:group:1", "ops", global, "agent:ops:telegram:group:1"],
    ["agent:ops:main", "ops", config(), "main"],
  ];
  it.each(shown)("toToolKey(%j) for %s -> %j", (key, caller, cfg, display) => {
    expect(toToolKey(key, caller, cfg)).toBe(display);
  });

  const read: [arg: string, caller: string, cfg: SessionKeyConfig, stored: string][] = [
    ["main", "main", global, "global"],
    ["main", "ops", global, "global"],
    [" MAIN ", "ops", global, "global"],
    ["global", "ops", global, "global"],
    ["GLOBAL", "ops", global, "global"],
    ["main", "ops", config({ scope: "global", mainKey: "home" }), "global"],
    ["agent:ops:main", "ops", global, "agent:ops:main"],
    ["main", "ops", config(), "agent:ops:main"],
  ];
  it.each(read)("fromToolKey(%j) for %s -> %j", (arg, caller, cfg, stored) => {
    expect(fromToolKey(arg, caller, cfg)).toBe(stored);
  });
});
