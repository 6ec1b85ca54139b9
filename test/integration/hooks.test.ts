import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { getSession } from "../../src/db/queries";
import { getRun } from "../../src/db/runs";
import { app } from "../../src/http/app";
import { configText, dm, fakeConnector, inbound, rpc, TOKEN, waitRun } from "./support";

const HOOKS_TOKEN = "test-hooks-token";
const TEST_CONFIG = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;
const ENABLED = { ...TEST_CONFIG, hooks: { enabled: true } };

interface HookAnswer {
  ok: boolean;
  runId?: string;
  sessionKey?: string;
  completion?: { status: string; runStatus: string; delivered: boolean; delivery: string; reply?: string };
  error?: { code: string; message: string };
}

async function hook(
  path: "agent" | "wake",
  body: unknown,
  opts: { token?: string | null; config?: unknown; env?: Partial<Env> } = {},
) {
  const token = opts.token === undefined ? HOOKS_TOKEN : opts.token;
  const res = await app.fetch(
    new Request(`http://gw.test/hooks/${path}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      },
      body: typeof body === "string" ? body : JSON.stringify(body),
    }),
    { ...env, SWITCHBOARD_CONFIG: configText(opts.config ?? ENABLED), ...opts.env },
    createExecutionContext(),
  );
  return { status: res.status, body: (await res.json()) as HookAnswer };
}

async function sessionCount() {
  const res = await rpc<{ count: number }>("sessions.list", { limit: 200, kinds: ["hook", "main", "other"] });
  return res.payload.count;
}

let connector: ReturnType<typeof fakeConnector> | undefined;
afterEach(() => {
  connector?.restore();
  connector = undefined;
});

describe("POST /hooks/agent", () => {
  it("answers 200 at once with a fresh hook:<uuid> session, and the run happens there", async () => {
    const res = await hook("agent", { message: "build 812 failed", name: "CI" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      ok: true,
      runId: expect.any(String),
      sessionKey: expect.stringMatching(/^hook:[0-9a-f-]{36}$/),
    });
    expect(res.body.completion).toBeUndefined();
    expect((await waitRun(res.body.runId!)).status).toBe("ok");
    const run = await getRun(env, res.body.runId!);
    expect(run).toMatchObject({
      trigger: "hook",
      sessionKey: res.body.sessionKey,
      reply: "echo: build 812 failed",
    });
    const entry = await getSession(env, res.body.sessionKey!);
    expect(entry).toMatchObject({ kind: "hook", displayName: "CI", lastInteractionAt: null });
    // A second call without a key gets another fresh session.
    const again = await hook("agent", { message: "build 813 passed" });
    expect(again.body.sessionKey).not.toBe(res.body.sessionKey);
  });

  it("with waitForCompletion answers with completion once the run settles", async () => {
    const res = await hook("agent", { message: "status?", waitForCompletion: true });
    expect(res.status).toBe(200);
    expect(res.body.completion).toEqual({
      status: "ok",
      runStatus: "ok",
      delivered: false,
      delivery: "none",
      reply: "echo: status?",
    });
  });

  it("delivers the reply to channel/to and says so in completion", async () => {
    connector = fakeConnector();
    const res = await hook("agent", {
      message: "deploy done",
      channel: "telegram",
      to: "ops-room",
      waitForCompletion: true,
    });
    expect(res.body.completion).toMatchObject({ status: "ok", delivered: true, delivery: "delivered" });
    const sent = connector.delivered.filter((d) => d.body.sessionKey === res.body.sessionKey);
    expect(sent.map((d) => d.body)).toEqual([
      expect.objectContaining({
        kind: "reply",
        channel: "telegram",
        to: "ops-room",
        text: "echo: deploy done",
      }),
    ]);
  });

  it("returns the same run for the same idempotencyKey, scoped to this surface", async () => {
    const first = await hook("agent", { message: "once", idempotencyKey: "mail-77" });
    const second = await hook("agent", {
      message: "once",
      idempotencyKey: "mail-77",
      waitForCompletion: true,
    });
    expect(second.body.runId).toBe(first.body.runId);
    expect(second.body.sessionKey).toBe(first.body.sessionKey);
    expect(second.body.completion?.status).toBe("ok");
    const other = await hook("agent", { message: "once", idempotencyKey: "mail-78" });
    expect(other.body.runId).not.toBe(first.body.runId);
    // The operator surface with the same key gets its own run.
    const viaRpc = await rpc<{ runId: string }>("agent", { message: "once", idempotencyKey: "mail-77" });
    expect(viaRpc.payload.runId).not.toBe(first.body.runId);
    expect((await getRun(env, first.body.runId!))?.idempotencyKey).toBe("hook:mail-77");
  });

  it("keeps operator RPC keys apart from hook keys, whatever the RPC key looks like", async () => {
    const viaHook = await hook("agent", { message: "once", idempotencyKey: "mail-91" });
    // An RPC caller whose key happens to spell this surface's stored key gets its own run.
    const viaRpc = await rpc<{ runId: string }>("agent", { message: "once", idempotencyKey: "hook:mail-91" });
    expect(viaRpc.status).toBe(200);
    expect(viaRpc.payload.runId).not.toBe(viaHook.body.runId);
    expect((await getRun(env, viaRpc.payload.runId))?.idempotencyKey).toBe("rpc:hook:mail-91");
    await waitRun(viaRpc.payload.runId);
    await waitRun(viaHook.body.runId!);
  });

  describe("auth", () => {
    it("refuses a missing token, a wrong one and the operator token with 401", async () => {
      expect((await hook("agent", { message: "x" }, { token: null })).status).toBe(401);
      expect((await hook("agent", { message: "x" }, { token: "nope" })).status).toBe(401);
      const operator = await hook("agent", { message: "x" }, { token: TOKEN });
      expect(operator.status).toBe(401);
      expect(operator.body.error?.code).toBe("UNAUTHORIZED");
    });

    it("answers 503 naming HOOKS_TOKEN when it is unset", async () => {
      const res = await hook("agent", { message: "x" }, { env: { HOOKS_TOKEN: undefined } as Partial<Env> });
      expect(res.status).toBe(503);
      expect(res.body.error?.message).toContain("HOOKS_TOKEN");
    });

    it("answers 503 naming hooks.enabled while hooks are disabled", async () => {
      const res = await hook("agent", { message: "x" }, { config: TEST_CONFIG });
      expect(res.status).toBe(503);
      expect(res.body.error?.message).toContain("hooks.enabled");
      expect((await hook("wake", { text: "x" }, { config: TEST_CONFIG })).status).toBe(503);
    });

    it("stays closed while HOOKS_TOKEN equals GATEWAY_TOKEN", async () => {
      const res = await hook(
        "agent",
        { message: "x" },
        { token: TOKEN, env: { HOOKS_TOKEN: TOKEN } as Partial<Env> },
      );
      expect(res.status).toBe(503);
      expect(res.body.error?.message).toMatch(/HOOKS_TOKEN equals GATEWAY_TOKEN/);
    });
  });

  describe("a caller-chosen sessionKey", () => {
    it("is refused (403 naming hooks.allowRequestSessionKey) by default, and nothing runs", async () => {
      const before = await sessionCount();
      const res = await hook("agent", { message: "x", sessionKey: "hook:ci" });
      expect(res.status).toBe(403);
      expect(res.body.error?.message).toContain("hooks.allowRequestSessionKey");
      expect(await getSession(env, "hook:ci")).toBeUndefined();
      expect(await sessionCount()).toBe(before);
    });

    it("outside hooks.allowedSessionKeyPrefixes is refused (403 naming it), and nothing runs", async () => {
      const config = { ...TEST_CONFIG, hooks: { enabled: true, allowRequestSessionKey: true } };
      const key = "agent:main:telegram:group:not-for-hooks";
      const res = await hook("agent", { message: "take over", sessionKey: key }, { config });
      expect(res.status).toBe(403);
      expect(res.body.error?.message).toContain("hooks.allowedSessionKeyPrefixes");
      expect(await getSession(env, key)).toBeUndefined();
    });

    it("when allowed, is canonicalized and reused across calls", async () => {
      const config = { ...TEST_CONFIG, hooks: { enabled: true, allowRequestSessionKey: true } };
      const a = await hook(
        "agent",
        { message: "first", sessionKey: "HOOK:CI-Builds", waitForCompletion: true },
        { config },
      );
      expect(a.status).toBe(200);
      expect(a.body.sessionKey).toBe("hook:ci-builds");
      const b = await hook(
        "agent",
        { message: "second", sessionKey: "hook:ci-builds", waitForCompletion: true },
        { config },
      );
      expect(b.body.sessionKey).toBe("hook:ci-builds");
      const [ra, rb] = await Promise.all([getRun(env, a.body.runId!), getRun(env, b.body.runId!)]);
      expect(rb?.sessionId).toBe(ra?.sessionId);
    });

    it("delivers to the session's own route with deliver: true, and refuses when it has none", async () => {
      connector = fakeConnector();
      const config = {
        ...TEST_CONFIG,
        hooks: { enabled: true, allowRequestSessionKey: true, allowedSessionKeyPrefixes: ["agent:main:"] },
      };
      const none = await hook(
        "agent",
        { message: "x", sessionKey: "agent:main:telegram:group:no-route", deliver: true },
        { config },
      );
      expect(none.status).toBe(400);
      expect(none.body.error?.message).toMatch(/`deliver` needs `channel` and `to`/);
      const ack = (await (
        await inbound("telegram", { ...dm("hello"), chatType: "group", groupId: "routed" })
      ).json()) as {
        runId: string;
        sessionKey: string;
      };
      await waitRun(ack.runId);
      const res = await hook(
        "agent",
        { message: "ping the room", sessionKey: ack.sessionKey, deliver: true, waitForCompletion: true },
        { config },
      );
      expect(res.body.completion).toMatchObject({ delivered: true });
      expect(connector.delivered.map((d) => d.body.text)).toContain("echo: ping the room");
    });
  });

  describe("validation", () => {
    it("names the field: a missing message, an unknown field, to without channel, an unknown channel", async () => {
      const missing = await hook("agent", {});
      expect(missing.status).toBe(400);
      expect(missing.body.error?.message).toContain("`message`");
      const unknown = await hook("agent", { message: "x", colour: "red" });
      expect(unknown.status).toBe(400);
      expect(unknown.body.error?.message).toContain("`colour`");
      const half = await hook("agent", { message: "x", to: "room" });
      expect(half.status).toBe(400);
      expect(half.body.error?.message).toContain("`channel` and `to` go together");
      const channel = await hook("agent", { message: "x", channel: "fax", to: "1" });
      expect(channel.status).toBe(400);
      expect(channel.body.error?.message).toContain("configured: telegram, slack");
      const agent = await hook(
        "agent",
        { message: "x", agentId: "ghost" },
        { config: { ...ENABLED, agents: { list: [{ id: "main" }] } } },
      );
      expect(agent.status).toBe(400);
      expect(agent.body.error?.message).toContain("`agentId`");
    });

    it("answers 413 for a body over 1 MB and 400 for malformed JSON", async () => {
      expect((await hook("agent", JSON.stringify({ message: "x".repeat(1_100_000) }))).status).toBe(413);
      expect((await hook("agent", "{not json")).status).toBe(400);
    });

    it("answers 405 for GET", async () => {
      const res = await app.fetch(
        new Request("http://gw.test/hooks/agent"),
        { ...env, SWITCHBOARD_CONFIG: configText(ENABLED) },
        createExecutionContext(),
      );
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
    });
  });
});

describe("POST /hooks/wake", () => {
  it("queues a system event into the agent's main session without refreshing its idle freshness", async () => {
    connector = fakeConnector();
    const first = (await (await inbound("telegram", dm("hi", { from: "wake-user" }))).json()) as {
      runId: string;
      sessionKey: string;
    };
    await waitRun(first.runId);
    const before = await getSession(env, first.sessionKey);
    const res = await hook("wake", { text: "the nightly report is ready" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, runId: expect.any(String), sessionKey: "agent:main:main" });
    expect((await waitRun(res.body.runId!)).status).toBe("ok");
    const after = await getSession(env, first.sessionKey);
    expect(after?.lastInteractionAt).toBe(before?.lastInteractionAt);
    expect(after?.sessionId).toBe(before?.sessionId);
    expect((await getRun(env, res.body.runId!))?.trigger).toBe("hook");
    // The reply goes to the main session's chat route.
    expect(connector.delivered.map((d) => d.body.text)).toContain("echo: the nightly report is ready");
  });

  it("validates its body", async () => {
    const res = await hook("wake", { message: "wrong field" });
    expect(res.status).toBe(400);
    expect(res.body.error?.message).toMatch(/`text`|`message`/);
  });
});
