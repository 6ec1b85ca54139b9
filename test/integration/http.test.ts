import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { SIGNATURE_HEADER, signBody } from "../../src/auth/signature";
import { app } from "../../src/http/app";
import { ENDPOINTS, pathOf, SURFACE } from "../../src/http/surface";
import { VERSION } from "../../src/version";
import { configText, SECRET, TOKEN } from "./support";

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

  // The dashboard answers every path under its prefix itself (its own 404 page).
  const routed = ENDPOINTS.filter((e) => e !== SURFACE.dashboard);
  const samplePath = (e: (typeof ENDPOINTS)[number]) =>
    pathOf(e, {
      method: "status",
      model: "switchboard/main",
      file: "s-1.jsonl",
      channel: "telegram",
      mediaId: "s-1.0123456789abcdef01234567",
    });

  it.each(routed.map((e) => [e.path, e] as const))(
    "answers %s with a method the route table does not give it with 405 and its methods",
    async (_path, endpoint) => {
      const path = samplePath(endpoint);
      const res = await exports.default.fetch(`http://gw.test${path}`, { method: "DELETE" });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe(endpoint.methods.join(", "));
      expect(await res.json()).toEqual({
        ok: false,
        error: {
          code: "METHOD_NOT_ALLOWED",
          message: `DELETE is not allowed on ${path}; use ${endpoint.methods.join(", ")}`,
        },
      });
    },
  );

  it("serves each route of the table with the methods the table gives it, and no other route", () => {
    const served = new Set(
      app.routes
        .filter((r) => r.method !== "ALL" && !r.path.startsWith("/ui"))
        .map((r) => `${r.method} ${r.path}`),
    );
    const table = routed.flatMap((e) => e.methods.map((m) => `${m} ${e.path}`));
    expect([...served].sort()).toEqual([...table].sort());
  });

  it("answers an unknown route with the JSON 404 shape", async () => {
    const res = await exports.default.fetch("http://gw.test/nope", { method: "POST" });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({
      ok: false,
      error: { code: "NOT_FOUND", message: "no route for POST /nope" },
    });
  });

  describe("with an invalid config", () => {
    const GENERIC =
      "the gateway's configuration is invalid; an operator can see why in the status RPC and the logs";
    // A text of its own: the config is validated (and logged) once per distinct text and isolate.
    const badEnv = (tag: string) => ({
      ...env,
      SWITCHBOARD_CONFIG: `{ session: { dmScope: "sideways" }, commands: { owners: ["${tag}"] } }`,
    });
    const send = (e: Env, path: string, init: RequestInit = {}) =>
      app.fetch(new Request(`http://gw.test${path}`, init), e, createExecutionContext());
    const signed = async (e: Env, channel: string) => {
      const raw = JSON.stringify({ messageId: "m1", chatType: "direct", from: "a", text: "hi" });
      return send(e, `/hooks/inbound/${channel}`, {
        method: "POST",
        headers: { [SIGNATURE_HEADER]: await signBody(SECRET, raw) },
        body: raw,
      });
    };

    it("answers unauthenticated requests 500 with a generic message that discloses nothing", async () => {
      const bad = badEnv("generic");
      const answers = [
        await send(bad, "/healthz"),
        await signed(bad, "telegram"),
        await send(bad, "/hooks/inbound/telegram", { method: "POST", body: "{}" }),
        await send(bad, "/hooks/agent", {
          method: "POST",
          headers: { authorization: "Bearer test-hooks-token" },
          body: '{"message":"hi"}',
        }),
      ];
      for (const res of answers) {
        expect(res.status).toBe(500);
        expect(await res.json()).toEqual({ ok: false, error: { code: "INTERNAL", message: GENERIC } });
      }
    });

    it("logs the validation messages once per config text", async () => {
      const bad = badEnv("logged");
      const logged = vi.spyOn(console, "error").mockImplementation(() => {});
      try {
        await send(bad, "/healthz");
        await send(bad, "/healthz");
        await signed(bad, "telegram");
        const lines = logged.mock.calls.map((call) => call.map(String).join(" "));
        expect(lines.filter((l) => l.includes("config.session.dmScope"))).toHaveLength(1);
        expect(lines.join("\n")).toContain('"per-channel-peer"');
      } finally {
        logged.mockRestore();
      }
    });

    it("shows the operator the validation messages in the status RPC", async () => {
      const res = await send(badEnv("status"), "/rpc/status", {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}` },
        body: "{}",
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { ok: boolean; payload: Record<string, unknown> };
      expect(body).toEqual({
        ok: true,
        payload: {
          version: VERSION,
          now: expect.any(Number),
          config: { valid: false, problems: [expect.stringContaining("config.session.dmScope")] },
        },
      });
      const problems = (body.payload.config as { problems: string[] }).problems;
      expect(problems[0]).toContain('"per-channel-peer"');
    });

    it("answers other operator RPC methods 500 with the messages, and unauthenticated ones 401", async () => {
      const bad = badEnv("rpc");
      const operator = await send(bad, "/rpc/sessions.list", {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}` },
        body: "{}",
      });
      expect(operator.status).toBe(500);
      const body = (await operator.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("INTERNAL");
      expect(body.error.message).toContain("config.session.dmScope");
      const stranger = await send(bad, "/rpc/status", { method: "POST", body: "{}" });
      expect(stranger.status).toBe(401);
      expect(JSON.stringify(await stranger.json())).not.toContain("config.");
    });

    it("shows the messages to the operator on /tools/invoke", async () => {
      const res = await send(badEnv("tools"), "/tools/invoke", {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}` },
        body: '{"tool":"sessions_list"}',
      });
      expect(res.status).toBe(500);
      const body = (await res.json()) as { error: { type: string; message: string } };
      expect(body.error.type).toBe("internal");
      expect(body.error.message).toContain("config.session.dmScope");
    });
  });

  describe("before a connector's signature is checked", () => {
    it("answers an unknown channel 404 without listing the configured connectors", async () => {
      const res = await exports.default.fetch("http://gw.test/hooks/inbound/nosuch", {
        method: "POST",
        body: "{}",
      });
      expect(res.status).toBe(404);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("NOT_FOUND");
      expect(body.error.message).toContain('unknown channel "nosuch"');
      expect(body.error.message).not.toMatch(/telegram|slack/);
    });

    it("answers a connector without its secret 503 without naming the secret", async () => {
      const config = { connectors: { discord: { secretEnv: "DISCORD_WEBHOOK_SECRET" } } };
      const res = await app.fetch(
        new Request("http://gw.test/hooks/inbound/discord", { method: "POST", body: "{}" }),
        { ...env, SWITCHBOARD_CONFIG: configText(config) },
        createExecutionContext(),
      );
      expect(res.status).toBe(503);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("UNAVAILABLE");
      expect(body.error.message).toContain('connector "discord"');
      expect(body.error.message).not.toContain("DISCORD_WEBHOOK_SECRET");
    });
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
