import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/http/app";

describe("HTTP surface", () => {
  it("answers /healthz without auth", async () => {
    const res = await exports.default.fetch("http://gw.test/healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, version: expect.stringMatching(/^\d+\.\d+\.\d+$/) });
  });

  it("answers a known path with the wrong method with 405 and the allowed method", async () => {
    const res = await exports.default.fetch("http://gw.test/rpc/status");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect(await res.json()).toEqual({
      ok: false,
      error: { code: "METHOD_NOT_ALLOWED", message: "GET is not allowed on /rpc/status; use POST" },
    });
  });

  it("answers an unknown route with the JSON 404 shape", async () => {
    const res = await exports.default.fetch("http://gw.test/nope", { method: "POST" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      ok: false,
      error: { code: "NOT_FOUND", message: "no route for POST /nope" },
    });
  });

  it("fails every request with a 500 naming the bad path when the config is invalid", async () => {
    const bad = { ...env, SWITCHBOARD_CONFIG: '{ session: { dmScope: "sideways" } }' };
    for (const [path, init] of [
      ["/healthz", {}],
      ["/rpc/status", { method: "POST", headers: { authorization: "Bearer test-token" }, body: "{}" }],
    ] as const) {
      const res = await app.fetch(new Request(`http://gw.test${path}`, init), bad, createExecutionContext());
      expect(res.status).toBe(500);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("INTERNAL");
      expect(body.error.message).toContain("config.session.dmScope");
      expect(body.error.message).toContain('"per-channel-peer"');
    }
  });

  it("closes the operator surface with 503 naming the secret when GATEWAY_TOKEN is unset", async () => {
    const { GATEWAY_TOKEN: _unset, ...rest } = env;
    const res = await app.fetch(
      new Request("http://gw.test/rpc/status", { method: "POST", body: "{}" }),
      rest as unknown as Env,
      createExecutionContext(),
    );
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("GATEWAY_TOKEN");
  });
});
