import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { ENDPOINTS } from "../../src/http/surface";
import { securityAudit } from "../../src/policy/audit/report";
import { auditFacts } from "../../src/rpc/gateway";

const STRONG = "s3cr3t-value-long-enough-for-prod-0001";
const STRONG_HOOKS = "s3cr3t-value-long-enough-for-hooks-002";

function audit(config: object, env: Record<string, string | undefined> = {}) {
  const parsed = parseConfig(JSON.stringify(config));
  return securityAudit(parsed, env, auditFacts(parsed));
}

function ids(report: ReturnType<typeof audit>) {
  return report.warnings.map((w) => `${w.severity}:${w.id}`);
}

describe("security.audit", () => {
  it("lists secrets by name with whether they are set and needed", () => {
    const report = audit(
      {
        connectors: { telegram: { deliverUrl: "https://b.example/d", secretEnv: "TG_SECRET" } },
        agents: { list: [{ id: "main", model: "openai/gpt-4.1-mini" }] },
        hooks: { enabled: true },
      },
      { GATEWAY_TOKEN: STRONG, TG_SECRET: "x".repeat(40) },
    );
    expect(report.secrets).toEqual([
      { name: "GATEWAY_TOKEN", purpose: expect.any(String), set: true, required: true },
      { name: "HOOKS_TOKEN", purpose: expect.any(String), set: false, required: true },
      { name: "TG_SECRET", purpose: expect.any(String), set: true, required: true },
      { name: "OPENAI_API_KEY", purpose: 'model provider "openai"', set: false, required: true },
    ]);
    expect(report.providers).toContainEqual({
      name: "openai",
      api: "openai",
      apiKeyEnv: "OPENAI_API_KEY",
      keySet: false,
      usedBy: ["agents.list[0].model (main)"],
    });
    expect(ids(report)).toEqual(
      expect.arrayContaining(["high:provider-key-missing", "medium:hooks-token-missing"]),
    );
    expect(report.ok).toBe(false);
  });

  it("says which endpoints are open and why the others are not", () => {
    const report = audit(
      { connectors: { slack: { secretEnv: "SLACK_SECRET" } } },
      { GATEWAY_TOKEN: STRONG, HOOKS_TOKEN: STRONG_HOOKS },
    );
    const by = Object.fromEntries(report.endpoints.map((e) => [e.path, e]));
    expect(by["/rpc/:method"]).toMatchObject({ enabled: true, auth: "GATEWAY_TOKEN" });
    expect(by["/hooks/agent"]).toMatchObject({ enabled: false, reason: "hooks.enabled is false" });
    expect(by["/hooks/inbound/slack"]).toMatchObject({ enabled: false, reason: "SLACK_SECRET is not set" });
    expect(by["/healthz"]).toMatchObject({ enabled: true, auth: "none" });
    expect(by["/ui/*"]).toMatchObject({ enabled: true, auth: "GATEWAY_TOKEN (login form, signed cookie)" });
    for (const path of ["/tools/invoke", "/mcp", "/v1/chat/completions", "/v1/models"]) {
      expect(by[path], path).toMatchObject({ enabled: true, auth: "GATEWAY_TOKEN" });
    }
    expect(ids(report)).toEqual(
      expect.arrayContaining([
        "medium:connector-secret-missing",
        "low:connector-no-deliver-url",
        "info:hooks-token-unused",
      ]),
    );
  });

  it.each([
    [
      { hooks: { enabled: true, allowRequestSessionKey: true, allowedSessionKeyPrefixes: [] } },
      "high:hooks-any-session-key",
    ],
    [
      { hooks: { enabled: true, allowRequestSessionKey: true, allowedSessionKeyPrefixes: ["agent:"] } },
      "medium:hooks-chat-session-keys",
    ],
    [{ gateway: { tools: { allow: ["sessions_send"] } } }, "medium:http-session-tool"],
    [
      { tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } } },
      "medium:visibility-everything",
    ],
    [
      {
        agents: {
          defaults: { sandbox: { sessionToolsVisibility: "all" } },
          list: [{ id: "main", sandbox: { mode: "all" } }],
        },
      },
      "low:sandbox-sees-all",
    ],
    [{}, "info:send-policy-open"],
    [{}, "info:no-command-owners"],
  ])("flags a risky setting: %j → %s", (config, expected) => {
    expect(ids(audit(config, { GATEWAY_TOKEN: STRONG, HOOKS_TOKEN: STRONG_HOOKS }))).toContain(expected);
  });

  it("lists the endpoints of the route table, a connector's webhook once per connector", () => {
    const report = audit(
      {
        connectors: {
          slack: { secretEnv: "SLACK_SECRET" },
          tg: { type: "telegram", botTokenEnv: "TG_TOKEN", webhookSecretEnv: "TG_HOOK" },
        },
      },
      { GATEWAY_TOKEN: STRONG, TG_TOKEN: STRONG, TG_HOOK: STRONG },
    );
    const routes = ENDPOINTS.filter((e) => e.auth !== "connector").map((e) => e.path);
    expect(report.endpoints.map((e) => e.path)).toEqual([
      ...routes,
      "/hooks/inbound/slack",
      "/connectors/tg",
    ]);
    expect(report.endpoints.at(-1)).toEqual({
      method: "GET, POST",
      path: "/connectors/tg",
      auth: "telegram verification",
      enabled: true,
    });
    expect(report.connectors.map((c) => c.webhook)).toEqual(["/hooks/inbound/slack", "/connectors/tg"]);
  });

  it("decides from the facts it is given (pure: no I/O)", () => {
    const config = parseConfig(JSON.stringify({ agents: { defaults: { model: "acme/m1" } } }));
    const report = securityAudit(
      config,
      { GATEWAY_TOKEN: STRONG, ACME_KEY: STRONG },
      {
        providerOf: () => ({ name: "acme", api: "openai", apiKeyEnv: "ACME_KEY" }),
        secretNamesOf: () => [],
        endpoints: [{ method: "POST", path: "/only", auth: "operator" }],
      },
    );
    expect(report.providers).toEqual([
      { name: "acme", api: "openai", apiKeyEnv: "ACME_KEY", keySet: true, usedBy: ["agents.defaults.model"] },
    ]);
    expect(report.endpoints).toEqual([
      { method: "POST", path: "/only", auth: "GATEWAY_TOKEN", enabled: true },
    ]);
    const unknown = securityAudit(
      config,
      {},
      {
        providerOf: () => {
          throw new Error('unknown model "acme/m1"');
        },
        secretNamesOf: () => [],
        endpoints: [],
      },
    );
    expect(unknown.warnings).toContainEqual({
      id: "model-unknown",
      severity: "high",
      setting: "agents.defaults.model",
      message: 'unknown model "acme/m1"; runs using it fail',
    });
  });

  it("flags weak, development and shared tokens, and keeps hooks closed when they share one", () => {
    const shared = audit({ hooks: { enabled: true } }, { GATEWAY_TOKEN: STRONG, HOOKS_TOKEN: STRONG });
    expect(ids(shared)).toContain("high:hooks-token-is-operator-token");
    expect(shared.endpoints.find((e) => e.path === "/hooks/agent")).toMatchObject({
      enabled: false,
      reason: "HOOKS_TOKEN equals GATEWAY_TOKEN",
    });
    expect(ids(audit({}, { GATEWAY_TOKEN: "dev-token" }))).toContain("high:secret-dev-value");
    expect(ids(audit({}, { GATEWAY_TOKEN: "short" }))).toContain("medium:secret-short");
    expect(ids(audit({}, {}))).toContain("medium:gateway-token-missing");
  });

  it("sorts warnings most severe first and counts them", () => {
    const report = audit(
      { hooks: { enabled: true, allowRequestSessionKey: true, allowedSessionKeyPrefixes: [] } },
      {},
    );
    const order = report.warnings.map((w) => ["high", "medium", "low", "info"].indexOf(w.severity));
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(report.summary.high).toBe(report.warnings.filter((w) => w.severity === "high").length);
  });

  it("never reveals a secret value or any part of one", () => {
    const values = {
      GATEWAY_TOKEN: "op-9f8e7d6c5b4a39281706f5e4d3c2b1a0",
      HOOKS_TOKEN: "hk-0a1b2c3d4e5f60718293a4b5c6d7e8f9",
      TG_SECRET: "tg-aaaabbbbccccddddeeeeffff00001111",
      SLACK_SECRET: "sl-short",
      OPENAI_API_KEY: "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    };
    const report = audit(
      {
        connectors: {
          telegram: { deliverUrl: "https://b.example/d", secretEnv: "TG_SECRET" },
          slack: { deliverUrl: "https://b.example/s", secretEnv: "SLACK_SECRET" },
        },
        agents: { defaults: { model: "openai/gpt-4.1" } },
        hooks: { enabled: true },
      },
      values,
    );
    const text = JSON.stringify(report);
    for (const v of Object.values(values)) {
      expect(text).not.toContain(v);
      expect(text).not.toContain(v.slice(0, 8));
    }
    expect(text).toContain("SLACK_SECRET");
  });
});
