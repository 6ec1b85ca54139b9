/**
 * Names a request supplies (an RPC method, an inbound channel, a hook's channel, a model
 * reference, a tool) are looked up among the configured entries only: the names every object
 * inherits (`constructor`, `__proto__`, `toString`…) are unknown like any other, and get the
 * documented 404/400, never a 500 or a 503 about a secret that does not exist.
 */
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/http/app";
import { rpcWithConfig, withActorConfig } from "./rpc-support";
import { configText, dm, inbound, rpc, TOKEN, waitRun } from "./support";

const NAMES = ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"];
const TEST_CONFIG = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;

interface ErrorAnswer {
  ok: boolean;
  error: { code?: string; type?: string; message: string };
}

async function post(path: string, body: unknown, headers: Record<string, string>, config?: unknown) {
  const res = await app.fetch(
    new Request(`http://gw.test${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    }),
    config === undefined ? env : { ...env, SWITCHBOARD_CONFIG: configText(config) },
    createExecutionContext(),
  );
  return { status: res.status, body: (await res.json()) as ErrorAnswer };
}

describe("names every object inherits", () => {
  for (const name of NAMES) {
    describe(name, () => {
      it("is an unknown RPC method (404)", async () => {
        const res = await rpc(name, {});
        expect({ status: res.status, code: res.error?.code }).toEqual({ status: 404, code: "NOT_FOUND" });
        expect(res.error?.message).toContain(`unknown method "${name}"`);
      });

      it("is an unknown inbound channel (404), and nothing is written", async () => {
        const before = await rpc<{ count: number }>("sessions.list", {});
        const res = await inbound(name, dm("hello"));
        expect(res.status).toBe(404);
        const body = (await res.json()) as ErrorAnswer;
        expect(body.error.code).toBe("NOT_FOUND");
        expect(body.error.message).toContain(`unknown channel "${name.toLowerCase()}"`);
        const sessions = await rpc<{ count: number }>("sessions.list", {});
        expect(sessions.payload.count).toBe(before.payload.count);
      });

      it("is not a connector a hook can deliver to (400)", async () => {
        const res = await post(
          "/hooks/agent",
          { message: "hi", channel: name, to: "someone" },
          { authorization: "Bearer test-hooks-token" },
          { ...TEST_CONFIG, hooks: { enabled: true } },
        );
        expect({ status: res.status, code: res.body.error.code }).toEqual({
          status: 400,
          code: "INVALID_REQUEST",
        });
        expect(res.body.error.message).toContain("has no connector");
      });

      it("is an unknown tool over /tools/invoke (404 not_found)", async () => {
        const res = await post("/tools/invoke", { tool: name }, { authorization: `Bearer ${TOKEN}` });
        expect({ status: res.status, type: res.body.error.type }).toEqual({ status: 404, type: "not_found" });
      });

      it("is an unknown model reference or alias in sessions.patch (400 naming model)", async () => {
        const main = await rpc<{ sessionKey: string; runId: string }>("agent", { message: "hi" });
        expect(main.status).toBe(200);
        for (const model of [name, `${name}/x`]) {
          const res = await rpc("sessions.patch", { key: main.payload.sessionKey, model });
          expect({ status: res.status, code: res.error?.code }).toEqual({
            status: 400,
            code: "INVALID_REQUEST",
          });
          expect(res.error?.message).toMatch(/^`model`: /);
        }
      });
    });
  }

  it("runs an agent whose model is an alias named toString, and fails cleanly without the alias", async () => {
    const cases: Array<[Record<string, string>, string, "ok" | "error"]> = [
      [{ toString: "echo/echo" }, "agent:main:alias-set", "ok"],
      [{}, "agent:main:alias-unset", "error"],
    ];
    for (const [aliases, key, expected] of cases) {
      const config = { ...TEST_CONFIG, models: { aliases }, agents: { defaults: { model: "toString" } } };
      await withActorConfig(key, config);
      const sent = await rpcWithConfig<{ runId: string }>(config, "agent", {
        message: "hi",
        sessionKey: key,
      });
      expect(sent.status).toBe(200);
      const run = await waitRun(sent.payload.runId);
      expect(run.status).toBe(expected);
      if (expected === "error") expect(run.error).toMatch(/toString/);
      else
        expect((await rpc<{ reply: string }>("runs.get", { runId: sent.payload.runId })).payload.reply).toBe(
          "echo: hi",
        );
    }
  });

  it("still finds configured entries that carry such names", async () => {
    const main = await rpc<{ sessionKey: string }>("agent", { message: "hi" });
    const config = {
      ...TEST_CONFIG,
      hooks: { enabled: true },
      connectors: {
        constructor: { deliverUrl: "https://connector.test/c", secretEnv: "DEV_CONNECTOR_SECRET" },
      },
      models: { aliases: { toString: "echo/echo" } },
    };
    const patched = await post(
      "/rpc/sessions.patch",
      { key: main.payload.sessionKey, model: "toString" },
      { authorization: `Bearer ${TOKEN}` },
      config,
    );
    expect(patched.status).toBe(200);
    expect((patched.body as unknown as { payload: { modelOverride: string } }).payload.modelOverride).toBe(
      "echo/echo",
    );
    const hooked = await post(
      "/hooks/agent",
      { message: "hi", channel: "constructor", to: "someone", deliver: false },
      { authorization: "Bearer test-hooks-token" },
      config,
    );
    expect(hooked.status).toBe(200);
  });
});
