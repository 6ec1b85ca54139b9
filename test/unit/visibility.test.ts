import { describe, expect, it } from "vitest";
import { type ConfigInput, ConfigSchema } from "../../src/config/schema";
import {
  agentToAgentAllows,
  canSee,
  effectiveVisibility,
  isSandboxed,
  type VisibilityCaller,
  type VisibilityRow,
  type VisibilityScope,
  visibilityScopes,
  visibleAgents,
} from "../../src/policy/visibility";

function config(input: ConfigInput = {}) {
  return ConfigSchema.parse(input);
}

const AGENTS = { list: [{ id: "main" }, { id: "research" }, { id: "ops" }] };

function withVisibility(visibility: "self" | "tree" | "agent" | "all", extra: ConfigInput = {}) {
  return config({ agents: AGENTS, ...extra, tools: { sessions: { visibility }, ...extra.tools } });
}

const caller: VisibilityCaller = { sessionKey: "agent:main:main", agentId: "main" };

function row(key: string, agentId: string, spawnedBy: string | null = null): VisibilityRow {
  return { key, agentId, spawnedBy };
}

const SELF = row("agent:main:main", "main");
const CHILD = row("agent:main:subagent:c1", "main", "agent:main:main");
const SIBLING = row("agent:main:telegram:group:g1", "main");
const SIBLING_CHILD = row("agent:main:subagent:c2", "main", "agent:main:telegram:group:g1");
const OTHER_AGENT = row("agent:research:main", "research");
const OTHER_AGENT_CRON = row("cron:digest", "research");
const OWN_CHILD_OF_OTHER_AGENT = row("agent:research:subagent:c3", "research", "agent:main:main");
const THIRD_AGENT = row("agent:ops:main", "ops");
const ALL_ROWS = [
  SELF,
  CHILD,
  SIBLING,
  SIBLING_CHILD,
  OTHER_AGENT,
  OTHER_AGENT_CRON,
  OWN_CHILD_OF_OTHER_AGENT,
  THIRD_AGENT,
];

function visibleKeys(c: VisibilityCaller, cfg: ReturnType<typeof config>) {
  return ALL_ROWS.filter((r) => canSee(c, r, cfg)).map((r) => r.key);
}

/** What a listing of `scopes` selects from `rows` (the SQL of listSessions, in JS). */
function selectedByScopes(scopes: VisibilityScope[], rows: VisibilityRow[]) {
  return rows
    .filter((r) =>
      scopes.some(
        (s) =>
          (s.keys === undefined || s.keys.includes(r.key)) &&
          (s.spawnedBy === undefined || r.spawnedBy === s.spawnedBy) &&
          (s.agentId === undefined || r.agentId === s.agentId),
      ),
    )
    .map((r) => r.key);
}

describe("effectiveVisibility", () => {
  it("defaults to tree", () => {
    expect(effectiveVisibility(caller, config())).toBe("tree");
  });

  it("is tools.sessions.visibility for a session that is not sandboxed", () => {
    for (const level of ["self", "tree", "agent", "all"] as const) {
      expect(effectiveVisibility(caller, withVisibility(level))).toBe(level);
    }
  });

  it("clamps a sandboxed session to at most tree under sessionToolsVisibility spawned (the default)", () => {
    const sandboxed = (level: "self" | "tree" | "agent" | "all") =>
      config({
        agents: { list: [{ id: "main", sandbox: { mode: "all" } }] },
        tools: { sessions: { visibility: level } },
      });
    expect(effectiveVisibility(caller, sandboxed("all"))).toBe("tree");
    expect(effectiveVisibility(caller, sandboxed("agent"))).toBe("tree");
    expect(effectiveVisibility(caller, sandboxed("tree"))).toBe("tree");
    expect(effectiveVisibility(caller, sandboxed("self"))).toBe("self");
  });

  it("leaves a sandboxed session's visibility alone under sessionToolsVisibility all", () => {
    const cfg = config({
      agents: {
        defaults: { sandbox: { sessionToolsVisibility: "all" } },
        list: [{ id: "main", sandbox: { mode: "all" } }],
      },
      tools: { sessions: { visibility: "all" } },
    });
    expect(isSandboxed(caller, cfg)).toBe(true);
    expect(effectiveVisibility(caller, cfg)).toBe("all");
  });
});

describe("isSandboxed", () => {
  it("is false by default (sandbox.mode off)", () => {
    expect(isSandboxed(caller, config({ agents: AGENTS }))).toBe(false);
    expect(
      isSandboxed({ sessionKey: "agent:ghost:main", agentId: "ghost" }, config({ agents: AGENTS })),
    ).toBe(false);
  });

  it("non-main sandboxes every session of the agent except its main key", () => {
    const cfg = config({
      agents: { list: [{ id: "main", sandbox: { mode: "non-main" } }, { id: "research" }] },
    });
    expect(isSandboxed(caller, cfg)).toBe(false);
    expect(isSandboxed({ sessionKey: "agent:main:telegram:group:g1", agentId: "main" }, cfg)).toBe(true);
    expect(isSandboxed({ sessionKey: "agent:main:subagent:x", agentId: "main" }, cfg)).toBe(true);
    expect(isSandboxed({ sessionKey: "agent:research:telegram:group:g1", agentId: "research" }, cfg)).toBe(
      false,
    );
  });

  it("non-main treats `global` as the main key under scope global", () => {
    const cfg = config({
      session: { scope: "global" },
      agents: { list: [{ id: "main", sandbox: { mode: "non-main" } }] },
    });
    expect(isSandboxed({ sessionKey: "global", agentId: "main" }, cfg)).toBe(false);
    expect(isSandboxed({ sessionKey: "agent:main:main", agentId: "main" }, cfg)).toBe(true);
  });

  it("all sandboxes the main key too", () => {
    const cfg = config({ agents: { list: [{ id: "main", sandbox: { mode: "all" } }] } });
    expect(isSandboxed(caller, cfg)).toBe(true);
  });
});

describe("agentToAgentAllows", () => {
  it("always allows an agent its own sessions", () => {
    expect(agentToAgentAllows("main", "main", config())).toBe(true);
  });

  it("refuses other agents while tools.agentToAgent.enabled is false (the default)", () => {
    expect(agentToAgentAllows("main", "research", config())).toBe(false);
    expect(
      agentToAgentAllows("main", "research", config({ tools: { agentToAgent: { allow: ["*"] } } })),
    ).toBe(false);
  });

  it("allows any pair when enabled with an empty allow list", () => {
    expect(
      agentToAgentAllows("main", "research", config({ tools: { agentToAgent: { enabled: true } } })),
    ).toBe(true);
  });

  it("needs the allow patterns to match both agent ids", () => {
    const cfg = config({ tools: { agentToAgent: { enabled: true, allow: ["main", "res*"] } } });
    expect(agentToAgentAllows("main", "research", cfg)).toBe(true);
    expect(agentToAgentAllows("research", "main", cfg)).toBe(true);
    expect(agentToAgentAllows("main", "ops", cfg)).toBe(false);
    expect(agentToAgentAllows("ops", "main", cfg)).toBe(false);
    expect(agentToAgentAllows("ops", "research", cfg)).toBe(false);
  });

  it("matches whole ids with * and ? globs", () => {
    const cfg = config({ tools: { agentToAgent: { enabled: true, allow: ["team-?", "*-bot"] } } });
    expect(agentToAgentAllows("team-a", "sales-bot", cfg)).toBe(true);
    expect(agentToAgentAllows("team-ab", "sales-bot", cfg)).toBe(false);
    expect(agentToAgentAllows("team-a", "sales-bots", cfg)).toBe(false);
    expect(agentToAgentAllows("team-a", "xteam-b", cfg)).toBe(false);
  });

  it("treats regex characters in patterns literally", () => {
    const cfg = config({ tools: { agentToAgent: { enabled: true, allow: ["a.c", "main"] } } });
    expect(agentToAgentAllows("main", "a.c", cfg)).toBe(true);
    expect(agentToAgentAllows("main", "abc", cfg)).toBe(false);
  });
});

describe("visibleAgents", () => {
  it("is any agent when agentToAgent is enabled with an empty allow list", () => {
    expect(visibleAgents(caller, withVisibility("all", { tools: { agentToAgent: { enabled: true } } }))).toBe(
      "any",
    );
  });

  it("is only the caller's agent while agentToAgent is disabled", () => {
    expect(visibleAgents(caller, withVisibility("all"))).toEqual(["main"]);
  });

  it("is the caller's agent first, then the configured agents the allow patterns admit", () => {
    const cfg = withVisibility("all", { tools: { agentToAgent: { enabled: true, allow: ["main", "r*"] } } });
    expect(visibleAgents(caller, cfg)).toEqual(["main", "research"]);
    expect(visibleAgents({ sessionKey: "agent:ops:main", agentId: "ops" }, cfg)).toEqual(["ops"]);
  });
});

describe("canSee", () => {
  it("self: only the caller's own key", () => {
    expect(visibleKeys(caller, withVisibility("self"))).toEqual([SELF.key]);
  });

  it("tree: the caller and the sessions it spawned, of any agent", () => {
    expect(visibleKeys(caller, withVisibility("tree"))).toEqual([
      SELF.key,
      CHILD.key,
      OWN_CHILD_OF_OTHER_AGENT.key,
    ]);
  });

  it("agent: every session of the caller's agent, plus its own children", () => {
    expect(visibleKeys(caller, withVisibility("agent"))).toEqual([
      SELF.key,
      CHILD.key,
      SIBLING.key,
      SIBLING_CHILD.key,
      OWN_CHILD_OF_OTHER_AGENT.key,
    ]);
  });

  it("all without agentToAgent: other agents' sessions stay hidden", () => {
    expect(visibleKeys(caller, withVisibility("all"))).toEqual(visibleKeys(caller, withVisibility("agent")));
  });

  it("all with agentToAgent enabled and no allow list: every session", () => {
    const cfg = withVisibility("all", { tools: { agentToAgent: { enabled: true } } });
    expect(visibleKeys(caller, cfg)).toEqual(ALL_ROWS.map((r) => r.key));
  });

  it("all with allow patterns: only agents matched along with the caller's", () => {
    const cfg = withVisibility("all", {
      tools: { agentToAgent: { enabled: true, allow: ["main", "research"] } },
    });
    expect(visibleKeys(caller, cfg)).toEqual(ALL_ROWS.filter((r) => r !== THIRD_AGENT).map((r) => r.key));
    // ops is not in the list, so from ops nothing of main or research is visible.
    const ops: VisibilityCaller = { sessionKey: "agent:ops:main", agentId: "ops" };
    expect(visibleKeys(ops, cfg)).toEqual([THIRD_AGENT.key]);
  });

  it("a sandboxed caller under spawned sees only its tree even with visibility all", () => {
    const cfg = config({
      agents: { list: [{ id: "main", sandbox: { mode: "all" } }, { id: "research" }, { id: "ops" }] },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    });
    expect(visibleKeys(caller, cfg)).toEqual([SELF.key, CHILD.key, OWN_CHILD_OF_OTHER_AGENT.key]);
  });

  it("a sandboxed caller under sessionToolsVisibility all sees what visibility all allows", () => {
    const cfg = config({
      agents: {
        defaults: { sandbox: { sessionToolsVisibility: "all" } },
        list: [{ id: "main", sandbox: { mode: "all" } }, { id: "research" }, { id: "ops" }],
      },
      tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
    });
    expect(visibleKeys(caller, cfg)).toEqual(ALL_ROWS.map((r) => r.key));
  });

  it("never shows the reserved key unknown", () => {
    const cfg = withVisibility("all", { tools: { agentToAgent: { enabled: true } } });
    expect(canSee(caller, row("unknown", "main"), cfg)).toBe(false);
    expect(canSee({ sessionKey: "unknown", agentId: "main" }, row("unknown", "main"), cfg)).toBe(false);
  });
});

describe("visibilityScopes", () => {
  it("are index-bound slices: the caller's key, its children, and whole agents (which hold the caller's key)", () => {
    expect(visibilityScopes(caller, withVisibility("self"))).toEqual([{ keys: ["agent:main:main"] }]);
    expect(visibilityScopes(caller, withVisibility("tree"))).toEqual([
      { keys: ["agent:main:main"] },
      { spawnedBy: "agent:main:main" },
    ]);
    expect(visibilityScopes(caller, withVisibility("agent"))).toEqual([
      { spawnedBy: "agent:main:main" },
      { agentId: "main" },
    ]);
    expect(
      visibilityScopes(caller, withVisibility("all", { tools: { agentToAgent: { enabled: true } } })),
    ).toEqual([{}]);
    expect(
      visibilityScopes(
        caller,
        withVisibility("all", { tools: { agentToAgent: { enabled: true, allow: ["main", "research"] } } }),
      ),
    ).toEqual([{ spawnedBy: "agent:main:main" }, { agentId: "main" }, { agentId: "research" }]);
  });

  it("select exactly the rows canSee admits, for every level and caller", () => {
    const configs = [
      withVisibility("self"),
      withVisibility("tree"),
      withVisibility("agent"),
      withVisibility("all"),
      withVisibility("all", { tools: { agentToAgent: { enabled: true } } }),
      withVisibility("all", { tools: { agentToAgent: { enabled: true, allow: ["main", "ops"] } } }),
      withVisibility("all", { tools: { agentToAgent: { enabled: true, allow: ["r*"] } } }),
      config({
        agents: { list: [{ id: "main", sandbox: { mode: "non-main" } }, { id: "research" }, { id: "ops" }] },
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      }),
    ];
    const callers: VisibilityCaller[] = [
      caller,
      { sessionKey: SIBLING.key, agentId: "main" },
      { sessionKey: OTHER_AGENT.key, agentId: "research" },
      { sessionKey: "agent:ops:main", agentId: "ops" },
    ];
    for (const cfg of configs) {
      for (const c of callers) {
        expect(selectedByScopes(visibilityScopes(c, cfg), ALL_ROWS)).toEqual(visibleKeys(c, cfg));
      }
    }
  });
});
