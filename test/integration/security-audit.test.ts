import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { rpcRaw, rpcWithConfig } from "./rpc-support";
import { rpc, TOKEN } from "./support";

/** Every secret value the test Worker is configured with (vitest.config.ts). */
const SECRET_VALUES = [TOKEN, env.HOOKS_TOKEN, env.DEV_CONNECTOR_SECRET].filter((v): v is string => !!v);

describe("security.audit", () => {
  it("answers the report to the operator, naming secrets without any of their values", async () => {
    const res = await exports.default.fetch("http://gw.test/rpc/security.audit", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(SECRET_VALUES.length).toBe(3);
    for (const value of SECRET_VALUES) expect(text).not.toContain(value);
    const { payload } = JSON.parse(text) as { payload: { secrets: Array<{ name: string; set: boolean }> } };
    expect(payload.secrets).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "GATEWAY_TOKEN", set: true }),
        expect.objectContaining({ name: "HOOKS_TOKEN", set: true }),
        expect.objectContaining({ name: "DEV_CONNECTOR_SECRET", set: true }),
      ]),
    );
  });

  it("lists a missing secret by name", async () => {
    const res = await rpcWithConfig<{
      secrets: Array<{ name: string; set: boolean }>;
      warnings: Array<{ id: string }>;
    }>(
      { connectors: { discord: { secretEnv: "DISCORD_SECRET", deliverUrl: "https://d.example/x" } } },
      "security.audit",
    );
    expect(res.payload.secrets).toContainEqual(
      expect.objectContaining({ name: "DISCORD_SECRET", set: false }),
    );
    expect(res.payload.warnings.map((w) => w.id)).toContain("connector-secret-missing");
  });

  it("takes no params and needs the operator token", async () => {
    expect((await rpc("security.audit", { verbose: true })).status).toBe(400);
    expect((await rpcRaw("security.audit", {})).status).toBe(401);
  });
});
