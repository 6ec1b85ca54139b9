import { describe, expect, it } from "vitest";
import { accessOf, streamingOf } from "../../src/config/connectors";
import { ConfigError, loadConfig, parseConfig } from "../../src/config/load";
import { ignoredSettings } from "../../src/config/notices";
import { type Config, ConfigSchema } from "../../src/config/schema";

/** The problems a config text is rejected with; fails the test when it is accepted. */
function problemsOf(text: string): readonly string[] {
  try {
    parseConfig(text);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error(`config was accepted: ${text}`);
}

const DEFAULTS: Config = {
  session: {
    scope: "per-sender",
    dmScope: "main",
    mainKey: "main",
    timezone: "UTC",
    identityLinks: {},
    caseSensitiveChannels: ["signal", "matrix"],
    reset: { mode: "daily", atHour: 4 },
    resetByType: {},
    resetByChannel: {},
    resetTriggers: ["/new", "/reset"],
    sendPolicy: { rules: [], default: "allow" },
    agentToAgent: { maxPingPongTurns: 5, maxHops: 12 },
    queue: { mode: "followup", cap: 50 },
    retention: {},
    writeBehind: true,
  },
  agents: {
    defaults: {
      model: "echo/echo",
      maxSteps: 16,
      contextMessages: 200,
      subagents: { archiveAfterMinutes: 60, maxConcurrent: 8 },
      sandbox: { sessionToolsVisibility: "spawned" },
      contextPruning: { keepToolResults: 3 },
      compaction: { threshold: 0.8, memoryFlush: true },
    },
    list: [],
  },
  bindings: [],
  tools: {
    deny: [],
    sessions: { visibility: "tree" },
    agentToAgent: { enabled: false, allow: [] },
    subagents: { tools: { deny: [] } },
  },
  models: {
    providers: {},
    aliases: {},
    catalog: {},
    pricing: {},
    retry: { attempts: 3, baseDelayMs: 500 },
    contextWindow: 128_000,
  },
  connectors: {},
  hooks: { enabled: false, allowRequestSessionKey: false, allowedSessionKeyPrefixes: ["hook:"] },
  gateway: { tools: { allow: [] } },
  commands: { owners: [] },
  cron: { jobs: [] },
  delivery: { maxAttempts: 8, baseDelayMs: 1000, maxDelayMs: 600_000 },
  storage: { d1: ["DB"] },
  media: { maxBytes: 20 * 1024 * 1024 },
  observability: {},
};

const SPEC_EXAMPLE = `{
  session: {
    scope: "per-sender", dmScope: "per-channel-peer", mainKey: "main", timezone: "Europe/Berlin",
    identityLinks: { alice: ["telegram:123456789", "discord:987654321012345678"] },
    reset: { mode: "daily", atHour: 4, idleMinutes: 120 },
    resetByType: { thread: { mode: "daily", atHour: 4 }, direct: { mode: "idle", idleMinutes: 240 } },
    resetByChannel: { discord: { mode: "idle", idleMinutes: 10080 } },
    resetTriggers: ["/new", "/reset"],
    sendPolicy: { rules: [{ action: "deny", match: { channel: "discord", chatType: "group" } }], default: "allow" },
    agentToAgent: { maxPingPongTurns: 5, maxHops: 12 },
    queue: { mode: "followup", cap: 50 },
  },
  agents: {
    defaults: { model: "echo/echo", maxSteps: 16, subagents: { archiveAfterMinutes: 60 },
                sandbox: { sessionToolsVisibility: "spawned" } },
    list: [{ id: "main", default: true, name: "Main", systemPrompt: "…",
             subagents: { allowAgents: ["research"] } },
           { id: "research", model: "openai/gpt-4.1-mini", sandbox: { mode: "all" } }],
  },
  bindings: [{ agentId: "research", match: { channel: "slack", peer: { kind: "channel", id: "c0123" } } }],
  tools: { sessions: { visibility: "tree" }, agentToAgent: { enabled: false, allow: [] } },
  models: { providers: { openai: { api: "openai", apiKeyEnv: "OPENAI_API_KEY" },
                         local: { api: "openai-compatible", baseUrl: "http://127.0.0.1:11434/v1" } },
            aliases: { fast: "openai/gpt-4.1-mini" } },
  connectors: { telegram: { deliverUrl: "https://bridge.example/deliver", secretEnv: "TELEGRAM_CONNECTOR_SECRET" } },
  hooks: { enabled: true, allowRequestSessionKey: false, allowedSessionKeyPrefixes: ["hook:"] },
  gateway: { tools: { allow: [] } },
  commands: { owners: ["telegram:123456789"] },
  cron: { jobs: [{ id: "digest", schedule: "0 8 * * *", message: "Morning digest", deliver: { channel: "telegram", to: "123456789" } }] },
}`;

describe("parseConfig", () => {
  it("gives every default for an empty config", () => {
    expect(parseConfig(undefined)).toEqual(DEFAULTS);
    expect(ConfigSchema.parse({})).toEqual(DEFAULTS);
  });

  it("treats empty, whitespace-only and comment-only text as {}", () => {
    expect(parseConfig("")).toEqual(DEFAULTS);
    expect(parseConfig("  \n\t ")).toEqual(DEFAULTS);
    expect(parseConfig("// nothing set yet\n/* really */\n")).toEqual(DEFAULTS);
    expect(parseConfig("{}")).toEqual(DEFAULTS);
  });

  it("accepts JSON5: comments, trailing commas, unquoted keys, single quotes", () => {
    const config = parseConfig(`{
      // the operator's choices
      session: { dmScope: 'per-peer', queue: { cap: 10, }, },
      /* block comment */ hooks: { enabled: true, },
    }`);
    expect(config.session.dmScope).toBe("per-peer");
    expect(config.session.queue).toEqual({ mode: "followup", cap: 10 });
    expect(config.hooks.enabled).toBe(true);
  });

  it("accepts the SPEC §15 example", () => {
    const config = parseConfig(SPEC_EXAMPLE);
    expect(config.session.dmScope).toBe("per-channel-peer");
    expect(config.session.timezone).toBe("Europe/Berlin");
    expect(config.session.reset).toEqual({ mode: "daily", atHour: 4, idleMinutes: 120 });
    expect(config.session.resetByType).toEqual({
      thread: { mode: "daily", atHour: 4 },
      direct: { mode: "idle", atHour: 4, idleMinutes: 240 },
    });
    expect(config.session.sendPolicy.rules).toEqual([
      { action: "deny", match: { channel: "discord", chatType: "group" } },
    ]);
    expect(config.agents.defaults.subagents).toEqual({ archiveAfterMinutes: 60, maxConcurrent: 8 });
    expect(config.agents.list).toEqual([
      {
        id: "main",
        default: true,
        name: "Main",
        systemPrompt: "…",
        workspace: { writable: true },
        tools: { deny: [] },
        subagents: { allowAgents: ["research"] },
        sandbox: { mode: "off" },
      },
      {
        id: "research",
        default: false,
        model: "openai/gpt-4.1-mini",
        workspace: { writable: true },
        tools: { deny: [] },
        subagents: { allowAgents: [] },
        sandbox: { mode: "all" },
      },
    ]);
    expect(config.bindings).toEqual([
      { agentId: "research", match: { channel: "slack", peer: { kind: "channel", id: "c0123" } } },
    ]);
    expect(config.models.providers.local).toEqual({
      api: "openai-compatible",
      baseUrl: "http://127.0.0.1:11434/v1",
    });
    // A connector without a type is the signed bridge, as before platforms existed.
    expect(config.connectors.telegram).toEqual({
      type: "webhook",
      deliverUrl: "https://bridge.example/deliver",
      secretEnv: "TELEGRAM_CONNECTOR_SECRET",
      allowFrom: [],
      groups: { policy: "open", allow: [] },
    });
    expect(config.cron.jobs).toEqual([
      {
        id: "digest",
        schedule: "0 8 * * *",
        message: "Morning digest",
        isolated: true,
        deliver: { channel: "telegram", to: "123456789" },
      },
    ]);
    expect(config.delivery).toEqual(DEFAULTS.delivery);
  });

  it("reports JSON5 syntax errors with line and column", () => {
    expect(problemsOf("{\n  session: { dmScope: 'main' \n  hooks: {} }")).toEqual([
      "config: invalid JSON5 at line 3, column 3: invalid character 'h'",
    ]);
    expect(problemsOf("{ session: ")).toEqual([
      "config: invalid JSON5 at line 1, column 12: invalid end of input",
    ]);
  });

  it("requires the document to be an object", () => {
    expect(problemsOf("[]")).toEqual(["config: must be an object (got an array)"]);
    expect(problemsOf('"hi"')).toEqual(['config: must be an object (got "hi")']);
  });
});

describe("storage", () => {
  it("defaults to the one database DB and takes a list of D1 bindings", () => {
    expect(parseConfig("{}").storage).toEqual({ d1: ["DB"] });
    expect(parseConfig('{ storage: { d1: ["DB", "DB_1", "SHARD_2"] } }').storage.d1).toEqual([
      "DB",
      "DB_1",
      "SHARD_2",
    ]);
  });

  it("refuses an empty list, a repeated binding and a name wrangler cannot bind", () => {
    expect(problemsOf("{ storage: { d1: [] } }")).toEqual(["config.storage.d1: must have at least 1 entry"]);
    expect(problemsOf('{ storage: { d1: ["DB", "DB_1", "DB"] } }')).toEqual([
      'config.storage.d1[2]: duplicate binding "DB" (already storage.d1[0])',
    ]);
    expect(problemsOf('{ storage: { d1: ["1DB"] } }')).toEqual([
      "config.storage.d1[0]: must be a binding name (letters, digits, _; not starting with a digit)",
    ]);
  });
});

describe("config errors", () => {
  it("names unknown keys at every depth with the allowed keys", () => {
    expect(problemsOf("{ sesion: {} }")).toEqual([
      "config.sesion: unknown key (allowed: session, agents, bindings, tools, models, connectors, hooks, gateway, commands, cron, delivery, storage, media, observability)",
    ]);
    expect(problemsOf("{ session: { bogusKey: 1 } }")).toEqual([
      "config.session.bogusKey: unknown key (allowed: scope, dmScope, mainKey, timezone, identityLinks, caseSensitiveChannels, reset, idleMinutes, resetByType, resetByChannel, resetTriggers, sendPolicy, agentToAgent, queue, retention, writeBehind, store)",
    ]);
    expect(
      problemsOf("{ session: { resetByType: { direct: { mode: 'idle', idleMinutes: 5, hour: 3 } } } }"),
    ).toEqual(["config.session.resetByType.direct.hour: unknown key (allowed: mode, atHour, idleMinutes)"]);
    expect(
      problemsOf("{ agents: { list: [{ id: 'main' }, { id: 'b', tools: { alow: [], dney: [] } }] } }"),
    ).toEqual([
      "config.agents.list[1].tools.alow: unknown key (allowed: allow, deny)",
      "config.agents.list[1].tools.dney: unknown key (allowed: allow, deny)",
    ]);
    expect(problemsOf("{ models: { providers: { 'my-llm': { api: 'echo', url: 'x' } } } }")).toEqual([
      'config.models.providers["my-llm"].url: unknown key (allowed: api, baseUrl, apiKeyEnv, contextWindow, vision, headers)',
    ]);
  });

  it("names the allowed values of an enum", () => {
    expect(problemsOf("{ session: { dmScope: 'bogus' } }")).toEqual([
      'config.session.dmScope: must be one of "main", "per-peer", "per-channel-peer", "per-account-channel-peer" (got "bogus")',
    ]);
    expect(problemsOf("{ tools: { sessions: { visibility: 3 } } }")).toEqual([
      'config.tools.sessions.visibility: must be one of "self", "tree", "agent", "all" (got 3)',
    ]);
    expect(problemsOf("{ models: { providers: { x: {} } } }")).toEqual([
      'config.models.providers.x.api: is required (allowed: "openai", "anthropic", "openai-compatible", "workers-ai", "echo")',
    ]);
  });

  it("reports wrong types and missing required keys", () => {
    expect(problemsOf("{ session: [] }")).toEqual(["config.session: must be an object (got an array)"]);
    expect(problemsOf("{ session: { mainKey: 5, resetTriggers: '/new' } }")).toEqual([
      "config.session.mainKey: must be a string (got 5)",
      'config.session.resetTriggers: must be an array (got "/new")',
    ]);
    expect(problemsOf("{ hooks: { enabled: 'yes' } }")).toEqual([
      'config.hooks.enabled: must be true or false (got "yes")',
    ]);
    expect(problemsOf("{ agents: { list: [{ name: 'x' }] } }")).toEqual([
      "config.agents.list[0].id: is required",
    ]);
  });

  it("checks numeric ranges", () => {
    expect(problemsOf("{ session: { reset: { atHour: 24 } } }")).toEqual([
      "config.session.reset.atHour: must be an integer between 0 and 23 (got 24)",
    ]);
    expect(problemsOf("{ agents: { defaults: { maxSteps: 0 } } }")).toEqual([
      "config.agents.defaults.maxSteps: must be an integer between 1 and 100 (got 0)",
    ]);
    expect(
      problemsOf("{ session: { agentToAgent: { maxPingPongTurns: 6, maxHops: 0 }, queue: { cap: 2.5 } } }"),
    ).toEqual([
      "config.session.agentToAgent.maxPingPongTurns: must be an integer between 0 and 5 (got 6)",
      "config.session.agentToAgent.maxHops: must be >= 1 (got 0)",
      "config.session.queue.cap: must be an integer (got 2.5)",
    ]);
    expect(problemsOf("{ agents: { defaults: { compaction: { threshold: 0 } } } }")).toEqual([
      "config.agents.defaults.compaction.threshold: must be greater than 0 and at most 1 (got 0)",
    ]);
    expect(problemsOf("{ agents: { defaults: { compaction: { threshold: 1.5 } } } }")).toEqual([
      "config.agents.defaults.compaction.threshold: must be greater than 0 and at most 1 (got 1.5)",
    ]);
    expect(problemsOf("{ models: { retry: { attempts: 11 } }, delivery: { maxAttempts: 51 } }")).toEqual([
      "config.models.retry.attempts: must be an integer between 1 and 10 (got 11)",
      "config.delivery.maxAttempts: must be an integer between 1 and 50 (got 51)",
    ]);
    expect(problemsOf("{ delivery: { baseDelayMs: 5000, maxDelayMs: 1000 } }")).toEqual([
      "config.delivery.maxDelayMs: must be at least baseDelayMs (5000) (got 1000)",
    ]);
  });

  it("rejects an unknown time zone", () => {
    expect(problemsOf("{ session: { timezone: 'Mars/Olympus_Mons' } }")).toEqual([
      'config.session.timezone: must be an IANA time zone name such as "UTC" or "Europe/Berlin" (got "Mars/Olympus_Mons")',
    ]);
    expect(parseConfig("{ session: { timezone: 'America/New_York' } }").session.timezone).toBe(
      "America/New_York",
    );
  });

  it("rejects bad cron expressions, saying what is wrong", () => {
    const job = (schedule: string, extra = "") =>
      `{ cron: { jobs: [{ id: 'j', schedule: '${schedule}', message: 'm'${extra} }] } }`;
    expect(problemsOf(job("61 * * * *"))).toEqual([
      'config.cron.jobs[0].schedule: is not a valid cron expression: Invalid value for minute: 61 (got "61 * * * *")',
    ]);
    expect(problemsOf(job("0 0 8 * * *"))).toEqual([
      'config.cron.jobs[0].schedule: must be a cron expression with 5 fields "minute hour day-of-month month day-of-week" or a nickname like "@daily" (got "0 0 8 * * *", 6 fields)',
    ]);
    expect(problemsOf(job("0 8 * * *", ", timezone: 'Nowhere/Special'"))).toEqual([
      'config.cron.jobs[0].timezone: must be an IANA time zone name such as "UTC" or "Europe/Berlin" (got "Nowhere/Special")',
    ]);
    expect(parseConfig(job("@daily")).cron.jobs[0]?.schedule).toBe("@daily");
    expect(parseConfig(job("*/15 9-17 * * MON-FRI")).cron.jobs[0]?.schedule).toBe("*/15 9-17 * * MON-FRI");
  });

  it("rejects duplicate cron job ids", () => {
    expect(
      problemsOf(
        "{ cron: { jobs: [{ id: 'a', schedule: '@daily', message: 'm' }, { id: 'a', schedule: '@hourly', message: 'n' }] } }",
      ),
    ).toEqual(['config.cron.jobs[1].id: duplicate job id "a" (already used by cron.jobs[0])']);
  });

  it("rejects duplicate agent ids and more than one default agent", () => {
    expect(problemsOf("{ agents: { list: [{ id: 'main' }, { id: 'research' }, { id: 'main' }] } }")).toEqual([
      'config.agents.list[2].id: duplicate agent id "main" (already used by agents.list[0])',
    ]);
    expect(
      problemsOf("{ agents: { list: [{ id: 'a', default: true }, { id: 'b', default: true }] } }"),
    ).toEqual([
      "config.agents.list[1].default: only one agent may be the default (agents.list[0] already is)",
    ]);
  });

  it("requires canonical lowercase ids", () => {
    expect(problemsOf("{ agents: { list: [{ id: 'Main' }] } }")).toEqual([
      'config.agents.list[0].id: must be a lowercase id (a-z, 0-9, "_", "-"; starting with a letter or digit; at most 64 characters) (got "Main")',
    ]);
    expect(problemsOf("{ connectors: { Telegram: { secretEnv: 'TG_SECRET' } } }")).toEqual([
      'config.connectors.Telegram: invalid name: must be a lowercase id (a-z, 0-9, "_", "-"; starting with a letter or digit; at most 64 characters) (got "Telegram")',
    ]);
  });

  it("accepts any identityLinks name that has non-blank text", () => {
    const names = ["Zoë", "José", "eve.x", "@frank", "李雷", "!!!", "Alice Smith", "a:b"];
    const links = Object.fromEntries(names.map((name, i) => [name, [`telegram:${i}`]]));
    expect(
      Object.keys(parseConfig(JSON.stringify({ session: { identityLinks: links } })).session.identityLinks),
    ).toEqual(names);
  });

  it.each([
    [
      "{ session: { identityLinks: { '  ': ['telegram:1'] } } }",
      'config.session.identityLinks["  "]: invalid name: must contain more than whitespace: it becomes the peer id in the person\'s DM session keys (got "  ")',
    ],
    [
      "{ session: { identityLinks: { '': ['telegram:1'] } } }",
      'config.session.identityLinks[""]: invalid name: must contain more than whitespace: it becomes the peer id in the person\'s DM session keys (got "")',
    ],
    [
      "{ session: { identityLinks: { Alice: ['telegram:1'], ' alice ': ['discord:2'] } } }",
      'config.session.identityLinks[" alice "]: becomes the same peer id "alice" as the name "Alice": put both lists under one name',
    ],
    [
      "{ session: { identityLinks: { 'Ann Lee': ['telegram:1'], 'ann:lee': ['discord:2'] } } }",
      'config.session.identityLinks["ann:lee"]: becomes the same peer id "ann-lee" as the name "Ann Lee": put both lists under one name',
    ],
  ])("refuses the identityLinks name in %s", (text, problem) => {
    expect(problemsOf(text)).toEqual([problem]);
  });

  it("rejects a binding to an agent missing from agents.list", () => {
    expect(
      problemsOf(
        "{ agents: { list: [{ id: 'main' }, { id: 'research' }] }, bindings: [{ agentId: 'ops', match: { channel: 'slack' } }] }",
      ),
    ).toEqual(['config.bindings[0].agentId: unknown agent "ops" (agents.list has: main, research)']);
    // With no agents configured, any id goes (the implicit agent is `main`).
    expect(parseConfig("{ bindings: [{ agentId: 'ops' }] }").bindings).toEqual([
      { agentId: "ops", match: {} },
    ]);
  });

  it("rejects a cron job for an agent missing from agents.list", () => {
    expect(
      problemsOf(
        "{ agents: { list: [{ id: 'main' }] }, cron: { jobs: [{ id: 'j', schedule: '@daily', message: 'm', agentId: 'ops' }] } }",
      ),
    ).toEqual(['config.cron.jobs[0].agentId: unknown agent "ops" (agents.list has: main)']);
  });

  it("requires baseUrl for openai-compatible providers, and http(s) URLs", () => {
    expect(problemsOf("{ models: { providers: { local: { api: 'openai-compatible' } } } }")).toEqual([
      'config.models.providers.local.baseUrl: is required when api is "openai-compatible"',
    ]);
    expect(
      problemsOf("{ models: { providers: { local: { api: 'openai-compatible', baseUrl: 'ftp://x/v1' } } } }"),
    ).toEqual([
      'config.models.providers.local.baseUrl: must be an http:// or https:// URL (got "ftp://x/v1")',
    ]);
    expect(problemsOf("{ models: { aliases: { fast: 'gpt-4' } } }")).toEqual([
      'config.models.aliases.fast: must be a "provider/model" reference (got "gpt-4")',
    ]);
  });

  it("validates connectors", () => {
    expect(problemsOf("{ connectors: { telegram: { deliverUrl: 'https://b.example/d' } } }")).toEqual([
      "config.connectors.telegram.secretEnv: is required",
    ]);
    expect(
      problemsOf("{ connectors: { telegram: { secretEnv: 'tg-secret', deliverUrl: 'not a url' } } }"),
    ).toEqual([
      'config.connectors.telegram.deliverUrl: must be an http:// or https:// URL (got "not a url")',
      'config.connectors.telegram.secretEnv: must be the name of a Worker secret or variable, like "TELEGRAM_CONNECTOR_SECRET" (got "tg-secret")',
    ]);
  });

  it("lists every problem in the error message", () => {
    let error: unknown;
    try {
      parseConfig("{ session: { dmScope: 'x', queue: { cap: 0 } }, hooks: { enable: true } }");
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toBe(
      [
        "invalid SWITCHBOARD_CONFIG (3 problems):",
        '  - config.session.dmScope: must be one of "main", "per-peer", "per-channel-peer", "per-account-channel-peer" (got "x")',
        "  - config.session.queue.cap: must be >= 1 (got 0)",
        "  - config.hooks.enable: unknown key (allowed: enabled, allowRequestSessionKey, allowedSessionKeyPrefixes)",
      ].join("\n"),
    );
  });
});

describe("effective reset policy", () => {
  it("is daily at 04:00 by default", () => {
    expect(parseConfig("{}").session.reset).toEqual({ mode: "daily", atHour: 4 });
  });

  it("applies the legacy rule: idleMinutes alone means idle-only", () => {
    const session = parseConfig("{ session: { idleMinutes: 30 } }").session;
    expect(session.reset).toEqual({ mode: "idle", atHour: 4, idleMinutes: 30 });
    expect(session.idleMinutes).toBe(30);
  });

  it("does not apply the legacy rule when reset is set; idleMinutes fills reset.idleMinutes", () => {
    expect(parseConfig("{ session: { idleMinutes: 30, reset: { atHour: 6 } } }").session.reset).toEqual({
      mode: "daily",
      atHour: 6,
      idleMinutes: 30,
    });
    expect(parseConfig("{ session: { idleMinutes: 30, reset: { mode: 'idle' } } }").session.reset).toEqual({
      mode: "idle",
      atHour: 4,
      idleMinutes: 30,
    });
    expect(
      parseConfig("{ session: { idleMinutes: 30, reset: { mode: 'idle', idleMinutes: 90 } } }").session.reset,
    ).toEqual({ mode: "idle", atHour: 4, idleMinutes: 90 });
  });

  it("does not apply the legacy rule when resetByType is set", () => {
    const session = parseConfig(
      "{ session: { idleMinutes: 30, resetByType: { group: { atHour: 2 } } } }",
    ).session;
    expect(session.reset).toEqual({ mode: "daily", atHour: 4, idleMinutes: 30 });
    expect(session.resetByType).toEqual({ group: { mode: "daily", atHour: 2 } });
  });

  it("requires idleMinutes for idle mode", () => {
    expect(problemsOf("{ session: { reset: { mode: 'idle' } } }")).toEqual([
      'config.session.reset.idleMinutes: is required when mode is "idle" (or set the legacy session.idleMinutes)',
    ]);
    expect(problemsOf("{ session: { resetByChannel: { discord: { mode: 'idle' } } } }")).toEqual([
      'config.session.resetByChannel.discord.idleMinutes: is required when mode is "idle"',
    ]);
  });
});

describe("loadConfig", () => {
  it("returns the same frozen object for the same text", () => {
    const text = "{ session: { queue: { cap: 7 } } }";
    const first = loadConfig({ SWITCHBOARD_CONFIG: text });
    expect(first.session.queue.cap).toBe(7);
    expect(loadConfig({ SWITCHBOARD_CONFIG: text })).toBe(first);
    expect(loadConfig({ SWITCHBOARD_CONFIG: `${text} ` })).not.toBe(first);
    expect(Object.isFrozen(first.session.queue)).toBe(true);
    expect(() => {
      (first.session.queue as { cap: number }).cap = 1;
    }).toThrow(TypeError);
  });

  it("treats a missing variable as an empty config", () => {
    const missing = loadConfig({});
    expect(missing).toEqual(DEFAULTS);
    expect(loadConfig({ SWITCHBOARD_CONFIG: "" })).toBe(missing);
  });

  it("rethrows the same ConfigError for the same bad text", () => {
    const env = { SWITCHBOARD_CONFIG: "{ session: { dmScope: 'nope' } }" };
    let first: unknown;
    try {
      loadConfig(env);
    } catch (err) {
      first = err;
    }
    expect(first).toBeInstanceOf(ConfigError);
    expect(() => loadConfig(env)).toThrow(first as Error);
    try {
      loadConfig(env);
    } catch (err) {
      expect(err).toBe(first);
    }
  });

  it("keeps parseConfig results independent and mutable", () => {
    const a = parseConfig("{}");
    const b = parseConfig("{}");
    expect(a).not.toBe(b);
    a.session.resetTriggers.push("/fresh");
    expect(b.session.resetTriggers).toEqual(["/new", "/reset"]);
    expect(parseConfig("{}").session.caseSensitiveChannels).toEqual(["signal", "matrix"]);
  });
});

describe("an OpenClaw config's settings", () => {
  it("accepts session.store and says it is ignored", () => {
    const config = parseConfig(
      "{ session: { store: '~/.openclaw/agents/{agentId}/sessions/sessions.json' } }",
    );
    expect(ignoredSettings(config)).toEqual([expect.stringMatching(/^config\.session\.store: ignored/)]);
    expect(ignoredSettings(parseConfig("{}"))).toEqual([]);
  });

  it("reads sendPolicy.rules[].match.provider as channel", () => {
    const config = parseConfig(
      "{ session: { sendPolicy: { rules: [{ action: 'deny', match: { provider: 'discord', chatType: 'group' } }] } } }",
    );
    expect(config.session.sendPolicy.rules).toEqual([
      { action: "deny", match: { channel: "discord", chatType: "group" } },
    ]);
    expect(
      parseConfig(
        "{ session: { sendPolicy: { rules: [{ action: 'deny', match: { channel: 'a', provider: 'a' } }] } } }",
      ).session.sendPolicy.rules[0]?.match,
    ).toEqual({ channel: "a" });
  });

  it("refuses a provider that disagrees with channel, naming both", () => {
    expect(
      problemsOf(
        "{ session: { sendPolicy: { rules: [{ action: 'deny', match: { channel: 'a', provider: 'b' } }] } } }",
      ),
    ).toEqual([
      'config.session.sendPolicy.rules[0].match.provider: is the older name of `channel`; give one of them (got channel "a" and provider "b")',
    ]);
  });
});

describe("platform connectors' config", () => {
  it("takes a platform by type with its defaults: the API's base URL, the default account, pairing", () => {
    const config = parseConfig(
      "{ connectors: { tg: { type: 'telegram', botTokenEnv: 'TG_TOKEN', webhookSecretEnv: 'TG_SECRET', botUsername: '@helper_bot' } } }",
    );
    expect(config.connectors.tg).toMatchObject({
      type: "telegram",
      botUsername: "helper_bot",
      apiBaseUrl: "https://api.telegram.org",
      accountId: "default",
      accounts: {},
    });
    expect(accessOf(config.connectors.tg!)).toEqual({
      dmPolicy: "pairing",
      allowFrom: [],
      groups: { policy: "open", allow: [], requireMention: true },
    });
  });

  it("names what is wrong: an unknown type, a missing secret name, a bad public key", () => {
    expect(problemsOf("{ connectors: { x: { type: 'irc', secretEnv: 'X' } } }")[0]).toMatch(
      /^config\.connectors\.x\.type: must be one of "webhook", "telegram", "slack", "discord", "whatsapp"/,
    );
    expect(problemsOf("{ connectors: { s: { type: 'slack', botTokenEnv: 'B' } } }")).toEqual([
      "config.connectors.s.signingSecretEnv: is required",
    ]);
    expect(
      problemsOf(
        "{ connectors: { d: { type: 'discord', publicKey: 'nothex', applicationId: '123456' } } }",
      )[0],
    ).toMatch(/^config\.connectors\.d\.publicKey: must be the application's Ed25519 public key/);
  });

  it("streaming (SPEC §22): partial by default on Telegram, Slack and Discord, off on WhatsApp and the bridge, never under a platform's floor", () => {
    const config = parseConfig(`{ connectors: {
      tg: { type: 'telegram', botTokenEnv: 'T', webhookSecretEnv: 'W' },
      sl: { type: 'slack', signingSecretEnv: 'S', botTokenEnv: 'B', streaming: { mode: 'progress', minIntervalMs: 300 } },
      wa: { type: 'whatsapp', appSecretEnv: 'A', verifyTokenEnv: 'V', accessTokenEnv: 'X', phoneNumberId: '123456' },
      br: { deliverUrl: 'https://bridge.example/deliver', secretEnv: 'BR' },
      bs: { deliverUrl: 'https://bridge.example/deliver', secretEnv: 'BR', streaming: { mode: 'partial', minIntervalMs: 500 } },
    } }`);
    const c = config.connectors;
    expect(streamingOf(c.tg!)).toEqual({ mode: "partial", minIntervalMs: 1_000 });
    expect(streamingOf(c.sl!)).toEqual({ mode: "progress", minIntervalMs: 1_200 });
    expect(streamingOf(c.wa!)).toEqual({ mode: "off", minIntervalMs: 1_000 });
    expect(streamingOf(c.br!)).toMatchObject({ mode: "off" });
    expect(streamingOf(c.bs!)).toEqual({ mode: "partial", minIntervalMs: 500 });
    // WhatsApp cannot edit a message; the bridge has no progress to show.
    expect(
      problemsOf(
        "{ connectors: { wa: { type: 'whatsapp', appSecretEnv: 'A', verifyTokenEnv: 'V', accessTokenEnv: 'X', phoneNumberId: '123456', streaming: { mode: 'partial' } } } }",
      )[0],
    ).toMatch(/^config\.connectors\.wa\.streaming\.mode: /);
    expect(
      problemsOf("{ connectors: { b: { secretEnv: 'B', streaming: { mode: 'progress' } } } }")[0],
    ).toMatch(/^config\.connectors\.b\.streaming\.mode: /);
    expect(
      problemsOf(
        "{ connectors: { b: { secretEnv: 'B', streaming: { mode: 'partial', minIntervalMs: 10 } } } }",
      )[0],
    ).toMatch(/^config\.connectors\.b\.streaming\.minIntervalMs: /);
  });
});
