/**
 * The CLI in process, against a fake gateway (test/e2e/support/cli.ts): where the URL and token
 * come from, how options become RPC params, how every failure becomes one stderr line and an
 * exit code, `send --wait`, and `tail`'s poll loop with its interval injected.
 */
import { describe, expect, it } from "vitest";
import type { HistoryMessage } from "../../cli/format.ts";
import { FAKE_URL, fail, ok, type RpcRequest, runCli } from "./support/cli.ts";

const SESSION = {
  key: "agent:main:main",
  kind: "main",
  channel: "unknown",
  updatedAt: Date.now(),
  sessionId: "s-1",
};

function oneLine(stderr: string): string {
  const lines = stderr.split("\n").filter(Boolean);
  expect(lines).toHaveLength(1);
  return lines[0] ?? "";
}

describe("gateway URL and token", () => {
  it("come from SWITCHBOARD_URL and SWITCHBOARD_TOKEN", async () => {
    const r = await runCli(["jobs", "--json"], () => ok({ jobs: [] }));
    expect(r.code).toBe(0);
    expect(r.requests).toEqual([
      { url: `${FAKE_URL}/rpc/cron.list`, method: "cron.list", params: {}, authorization: "Bearer t0ken" },
    ]);
  });

  it("--url and --token win over the environment, before or after the command", async () => {
    const r = await runCli(["--url", "http://other.test/", "jobs", "--token", "flag-token"], () =>
      ok({ jobs: [] }),
    );
    expect(r.code).toBe(0);
    expect(r.requests[0]).toMatchObject({
      url: "http://other.test/rpc/cron.list",
      authorization: "Bearer flag-token",
    });
  });

  it("a missing URL or token is one line naming the variable and the flag, exit 2", async () => {
    const noUrl = await runCli(["status"], () => ok({}), { env: { SWITCHBOARD_TOKEN: "t" } });
    expect(noUrl.code).toBe(2);
    expect(oneLine(noUrl.stderr)).toBe(
      "switchboard: no gateway URL: set SWITCHBOARD_URL or pass --url <url>",
    );
    const noToken = await runCli(["status"], () => ok({}), { env: { SWITCHBOARD_URL: FAKE_URL } });
    expect(noToken.code).toBe(2);
    expect(oneLine(noToken.stderr)).toBe(
      "switchboard: no operator token: set SWITCHBOARD_TOKEN or pass --token <token>",
    );
    expect([...noUrl.requests, ...noToken.requests]).toEqual([]);
  });

  it("a URL that is not http(s) is a usage error", async () => {
    const r = await runCli(["status", "--url", "ftp://x"], () => ok({}));
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toBe("switchboard: --url must be an http:// or https:// URL (got ftp:)");
  });
});

describe("usage errors (exit 2, one line)", () => {
  it.each([
    [
      ["sessions", "list", "--limit", "abc"],
      "option '--limit <n>' argument 'abc' is invalid. must be a positive integer",
    ],
    [["sessions", "list", "--bogus"], "unknown option '--bogus'"],
    [["history"], "missing required argument 'key'"],
    [["send", "main", "hi", "--wait", "--timeout", "0"], "must be a number of seconds greater than 0"],
    [["tail", "main", "--interval", "soon"], "must be a number of seconds greater than 0"],
  ])("%j", async (argv, message) => {
    const r = await runCli(argv, () => ok({}));
    expect(r.code).toBe(2);
    expect(oneLine(r.stderr)).toContain(message);
    expect(r.stderr.startsWith("switchboard: ")).toBe(true);
    expect(r.requests).toEqual([]);
  });

  it("--help and --version exit 0", async () => {
    const help = await runCli(["--help"], () => ok({}));
    expect(help.code).toBe(0);
    expect(help.stdout).toContain(
      "Exit codes: 0 ok, 1 gateway error, 2 usage, 3 auth, 4 not found, 5 cannot connect, 6 unavailable.",
    );
    const version = await runCli(["--version"], () => ok({}));
    expect(version.code).toBe(0);
  });
});

describe("gateway errors", () => {
  it.each([
    [400, "INVALID_REQUEST", "`limit` must be a number", 2],
    [401, "UNAUTHORIZED", "invalid bearer token", 3],
    [403, "FORBIDDEN", "send blocked by session policy", 3],
    [503, "UNAVAILABLE", "this endpoint is disabled until the secret GATEWAY_TOKEN is set", 3],
    [
      503,
      "UNAVAILABLE",
      'storage.d1 is ["DB", "DB_1"] but the data was placed with ["DB"]: run `switchboard storage rebalance`',
      6,
    ],
    [503, "UNAVAILABLE", "run r-1 is not recorded yet (D1 refused its record); try again", 6],
    [404, "NOT_FOUND", "session not found: nope", 4],
    [409, "CONFLICT", "delivery d-1 was delivered", 1],
    [500, "INTERNAL", "internal error; see the gateway logs", 1],
  ])("%i %s is one line and exit %i", async (status, code, message, exit) => {
    const r = await runCli(["history", "nope"], () => fail(status, code, message));
    expect(r.code).toBe(exit);
    expect(oneLine(r.stderr)).toBe(`switchboard: ${status} ${code} ${message}`);
    expect(r.stdout).toBe("");
  });

  it("an answer that is not the gateway's JSON is exit 1, naming the endpoint", async () => {
    const r = await runCli(["status"], () => ({ status: 502, body: "<html>Bad gateway</html>" }));
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toBe(
      `switchboard: 502 from ${FAKE_URL}/rpc/status is not a Switchboard RPC answer: <html>Bad gateway</html>`,
    );
  });

  it("no answer at all is exit 5 with the system error", async () => {
    const refused = Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNREFUSED" } });
    const r = await runCli(["status"], () => {
      throw refused;
    });
    expect(r.code).toBe(5);
    expect(oneLine(r.stderr)).toBe(`switchboard: cannot connect to ${FAKE_URL}: ECONNREFUSED`);
  });
});

describe("sessions list", () => {
  it("turns the filters into sessions.list params and --json prints the payload", async () => {
    const payload = { count: 1, sessions: [SESSION] };
    const r = await runCli(
      [
        "sessions",
        "list",
        "--kind",
        "main,group",
        "--kind",
        "cron",
        "--agent",
        "ops",
        "--label",
        "standup",
      ].concat(["--active", "30", "--archived", "--limit", "5", "--json"]),
      () => ok(payload),
    );
    expect(r.code).toBe(0);
    expect(r.requests.map((q) => q.params)).toEqual([
      {
        kinds: ["main", "group", "cron"],
        agentId: "ops",
        label: "standup",
        activeMinutes: 30,
        archived: "all",
        limit: 5,
      },
    ]);
    expect(JSON.parse(r.stdout)).toEqual(payload);
  });

  it("pages past the RPC's 200 rows to reach --limit, and prints the cursor to continue", async () => {
    const rows = (n: number, from: number) =>
      Array.from({ length: n }, (_, i) => ({ ...SESSION, key: `agent:main:k${from + i}` }));
    const r = await runCli(["sessions", "list", "--limit", "250"], (q) =>
      q.params.cursor
        ? ok({ count: 50, sessions: rows(50, 200), nextCursor: "c2" })
        : ok({ count: 200, sessions: rows(200, 0), nextCursor: "c1" }),
    );
    expect(r.code).toBe(0);
    expect(r.requests.map((q) => q.params)).toEqual([{ limit: 200 }, { limit: 50, cursor: "c1" }]);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^KEY +KIND +CHANNEL +LABEL +MODEL +TOKENS +STATE +UPDATED$/);
    expect(lines.filter((l) => l.startsWith("agent:main:k"))).toHaveLength(250);
    expect(lines.at(-1)).toBe("more: switchboard sessions list --cursor c2");
  });

  it("--channel is passed to the RPC's channel filter", async () => {
    const r = await runCli(["sessions", "list", "--channel", "telegram", "--limit", "2", "--json"], () =>
      ok({ count: 1, sessions: [{ ...SESSION, key: "a", channel: "telegram" }] }),
    );
    expect(r.code).toBe(0);
    expect(r.requests.map((q) => q.params)).toEqual([{ channel: "telegram", limit: 2 }]);
    expect(JSON.parse(r.stdout)).toEqual({ count: 1, sessions: [expect.objectContaining({ key: "a" })] });
  });
});

describe("sessions show", () => {
  it("prints the entry sessions.get returns", async () => {
    const r = await runCli(["sessions", "show", "main"], () =>
      ok({ ...SESSION, model: "echo/echo", totalTokens: 12 }),
    );
    expect(r.code).toBe(0);
    expect(r.requests.map((q) => [q.method, q.params])).toEqual([["sessions.get", { key: "main" }]]);
    expect(r.stdout).toMatch(/^key +agent:main:main$/m);
    expect(r.stdout).toMatch(/^model +echo\/echo$/m);
  });
});

describe("send", () => {
  const reply = (runId: string): HistoryMessage => ({
    role: "assistant",
    runId,
    timestamp: 1,
    content: [{ type: "text", text: "echo: hi" }],
  });

  it("queues with `agent` and prints the run without --wait", async () => {
    const r = await runCli(["send", "main", "hello", "there", "--deliver"], () =>
      ok({ runId: "r-1", sessionKey: "agent:main:main", sessionId: "s-1", status: "queued" }),
    );
    expect(r.code).toBe(0);
    expect(r.requests.map((q) => [q.method, q.params])).toEqual([
      ["agent", { sessionKey: "main", message: "hello there", deliver: true }],
    ]);
    expect(r.stdout).toBe("queued run r-1 in agent:main:main\n");
  });

  it("--wait calls agent.wait until the run ends, then prints its reply", async () => {
    let waits = 0;
    const r = await runCli(["send", "main", "hi", "--wait"], (q: RpcRequest) => {
      if (q.method === "agent") return ok({ runId: "r-1", sessionKey: "agent:main:main", sessionId: "s-1" });
      if (q.method === "agent.wait") {
        waits++;
        return ok(
          waits === 1
            ? { runId: "r-1", status: "timeout", runStatus: "running" }
            : { runId: "r-1", status: "ok", runStatus: "ok" },
        );
      }
      return ok({ messages: [reply("r-0"), reply("r-1")] });
    });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("echo: hi\n");
    expect(r.requests.map((q) => q.method)).toEqual(["agent", "agent.wait", "agent.wait", "chat.history"]);
    expect(r.requests[1]?.params).toEqual({ runId: "r-1", timeoutMs: 30_000 });
  });

  it("--wait exits 1 naming the run when it ends in error", async () => {
    const r = await runCli(["send", "main", "hi", "--wait"], (q) => {
      if (q.method === "agent") return ok({ runId: "r-1", sessionKey: "agent:main:main", sessionId: "s-1" });
      if (q.method === "agent.wait")
        return ok({ runId: "r-1", status: "error", runStatus: "error", error: "model down" });
      return ok({ messages: [] });
    });
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toBe("switchboard: run r-1 ended error: model down");
  });

  it("--wait gives up after --timeout and says the run goes on", async () => {
    let clock = 0;
    const r = await runCli(
      ["send", "main", "hi", "--wait", "--timeout", "45"],
      (q) => {
        if (q.method === "agent")
          return ok({ runId: "r-1", sessionKey: "agent:main:main", sessionId: "s-1" });
        clock += Number(q.params.timeoutMs);
        return ok({ runId: "r-1", status: "timeout", runStatus: "running" });
      },
      { now: () => clock },
    );
    expect(r.code).toBe(1);
    expect(r.requests.slice(1).map((q) => q.params.timeoutMs)).toEqual([30_000, 15_000]);
    expect(oneLine(r.stderr)).toContain("run r-1 is still running after 45s");
  });
});

describe("tail", () => {
  /** A transcript the test appends to, served with chat.history's `limit`/`before` semantics. */
  function transcript() {
    const state = { sessionId: "s-1", messages: [] as HistoryMessage[] };
    const add = (text: string, role = "user") => {
      const seq = (state.messages.at(-1)?.seq ?? 0) + 1;
      state.messages.push({ seq, role, timestamp: Date.UTC(2025, 0, 1), content: [{ type: "text", text }] });
    };
    const handler = (q: RpcRequest) => {
      const before = q.params.before as number | undefined;
      const limit = q.params.limit as number;
      const older = state.messages.filter((m) => before === undefined || (m.seq ?? 0) < before);
      const page = older.slice(-limit);
      const hasMore = older.length > page.length;
      return ok({
        sessionKey: "agent:main:main",
        sessionId: state.sessionId,
        messages: page,
        hasMore,
        ...(hasMore ? { nextBefore: page[0]?.seq } : {}),
      });
    };
    return { state, add, handler };
  }

  function texts(stdout: string): string[] {
    return stdout
      .trimEnd()
      .split("\n")
      .filter(Boolean)
      .map((l) => l.replace(/^\S+ +\S+ +/, ""));
  }

  it("prints the newest lines, then each new message once, in order, until Ctrl-C (exit 0)", async () => {
    const t = transcript();
    for (let i = 1; i <= 5; i++) t.add(`old ${i}`);
    let polls = 0;
    const r = await runCli(
      ["tail", "main", "-n", "2", "--interval", "0.25"],
      (q) => {
        polls++;
        // New messages land between polls: one, then none, then a burst of 450 (three pages).
        if (polls === 2) t.add("new 1");
        if (polls === 4) for (let i = 2; i <= 451; i++) t.add(`new ${i}`);
        return t.handler(q);
      },
      { interruptAtSleep: 5 },
    );
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.sleeps).toEqual([250, 250, 250, 250, 250]);
    expect(texts(r.stdout)).toEqual([
      "old 4",
      "old 5",
      ...Array.from({ length: 451 }, (_, i) => `new ${i + 1}`),
    ]);
  });

  it("after a reset, prints the new transcript from its start and says so on stderr", async () => {
    const t = transcript();
    t.add("before reset");
    let polls = 0;
    const r = await runCli(
      ["tail", "main", "--json"],
      (q) => {
        polls++;
        if (polls === 2) {
          t.state.sessionId = "s-2";
          t.state.messages = [];
          t.add("after reset");
        }
        return t.handler(q);
      },
      { interruptAtSleep: 3 },
    );
    expect(r.code).toBe(0);
    expect(
      r.stdout
        .trimEnd()
        .split("\n")
        .map((l) => (JSON.parse(l) as HistoryMessage).content[0]?.text),
    ).toEqual(["before reset", "after reset"]);
    expect(oneLine(r.stderr)).toBe("switchboard: main was reset: new sessionId s-2");
  });

  it("a session that does not exist is exit 4 before any polling", async () => {
    const r = await runCli(["tail", "agent:main:nobody"], () =>
      fail(404, "NOT_FOUND", "session not found: agent:main:nobody"),
    );
    expect(r.code).toBe(4);
    expect(r.sleeps).toEqual([]);
  });
});

describe("connectors and pairing", () => {
  const report = (ok: boolean, detail: string) => ({
    channel: "telegram",
    type: "telegram",
    accountId: "default",
    ok,
    detail,
  });

  it("connectors setup registers the gateway's own --url, or the public [base] given", async () => {
    const r = await runCli(["connectors", "setup", "telegram", "--url", "https://bot.example.com"], () =>
      ok({
        ok: true,
        reports: [
          report(
            true,
            "setWebhook: Telegram now posts updates to https://bot.example.com/connectors/telegram",
          ),
        ],
      }),
    );
    expect(r.code).toBe(0);
    expect(r.requests[0]).toMatchObject({
      url: "https://bot.example.com/rpc/connectors.setup",
      method: "connectors.setup",
      params: { channel: "telegram", url: "https://bot.example.com" },
    });
    expect(r.stdout).toContain("ok   telegram (telegram): setWebhook");
    const tunnel = await runCli(["connectors", "setup", "telegram", "https://tunnel.example.com"], () =>
      ok({ ok: true, reports: [] }),
    );
    expect(tunnel.requests[0]).toMatchObject({
      url: `${FAKE_URL}/rpc/connectors.setup`,
      params: { url: "https://tunnel.example.com" },
    });
  });

  it("a platform that says no prints its reports and exits 1", async () => {
    const r = await runCli(["connectors", "check"], () =>
      ok({ ok: false, reports: [report(false, "getMe: unreachable")] }),
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("FAIL telegram (telegram): getMe: unreachable");
    expect(oneLine(r.stderr)).toBe("switchboard: 1 of 1 failed");
  });

  it("pairing approve and revoke call their RPC methods; list prints both tables", async () => {
    const approve = await runCli(["pairing", "approve", "telegram", "K7QH3M2P"], () =>
      ok({ channel: "telegram", peerId: "42" }),
    );
    expect(approve.requests[0]).toMatchObject({
      method: "pairing.approve",
      params: { channel: "telegram", code: "K7QH3M2P" },
    });
    expect(approve.stdout).toContain("approved 42 on telegram");
    const revoke = await runCli(["pairing", "revoke", "telegram", "42"], () => ok({ revoked: true }));
    expect(revoke.requests[0]).toMatchObject({
      method: "pairing.revoke",
      params: { channel: "telegram", peerId: "42" },
    });
    const list = await runCli(["pairing", "list", "--channel", "telegram"], () =>
      ok({
        pending: [
          {
            channel: "telegram",
            code: "K7QH3M2P",
            accountId: "default",
            peerId: "42",
            createdAt: Date.now(),
            expiresAt: Date.now() + 3_600_000,
          },
        ],
        approved: [],
      }),
    );
    expect(list.requests[0]).toMatchObject({ method: "pairing.list", params: { channel: "telegram" } });
    expect(list.stdout).toContain("K7QH3M2P");
    expect(list.stdout).toContain("no approved senders");
  });
});
