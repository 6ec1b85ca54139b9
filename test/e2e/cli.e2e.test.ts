/**
 * The `switchboard` CLI end to end: `node bin/switchboard.ts …` as a child process against
 * `wrangler dev` (SWITCHBOARD_URL/SWITCHBOARD_TOKEN in its environment), with the echo model
 * and a fake connector that can be taken down to make a delivery dead.
 */
import { once } from "node:events";
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenOnLoopback } from "../../scripts/lib/local-server.ts";
import { execCli, spawnCli } from "./support/cli.ts";
import { type FakeConnector, startFakeConnector } from "./support/fake-connector.ts";
import {
  CONNECTOR_SECRET,
  connectorConfig,
  directMessage,
  GATEWAY_TOKEN,
  type Gateway,
  startGateway,
  waitFor,
} from "./support/gateway.ts";

let gw: Gateway;
let connector: FakeConnector;
let env: Record<string, string>;

const ALICE = "agent:main:telegram:dm:alice";

beforeAll(async () => {
  connector = await startFakeConnector(CONNECTOR_SECRET);
  gw = await startGateway({
    config: {
      connectors: connectorConfig(connector.url),
      session: { dmScope: "per-channel-peer" },
      delivery: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 100 },
      cron: { jobs: [{ id: "nightly-report", schedule: "0 3 * * *", message: "report" }] },
    },
  });
  env = { SWITCHBOARD_URL: gw.url, SWITCHBOARD_TOKEN: GATEWAY_TOKEN };
  const ack = await gw.inbound(
    "telegram",
    directMessage({ messageId: "cli-1", from: "alice", text: "hello" }),
  );
  expect(ack.body.sessionKey).toBe(ALICE);
  await waitFor(() => connector.deliveriesFor({ sessionKey: ALICE }).length > 0, 30_000, {
    what: "alice's reply delivered",
  });
});

afterAll(async () => {
  await gw?.dispose();
  await connector?.close();
});

const cli = (...args: string[]) => execCli(args, env);

/** The one line a failing command prints. */
function errorLine(stderr: string): string {
  const lines = stderr.split("\n").filter(Boolean);
  expect(lines).toHaveLength(1);
  return lines[0] ?? "";
}

describe("switchboard status, jobs, audit", () => {
  it("status shows the version, a valid config and the connector", async () => {
    const r = await cli("status");
    expect(r).toMatchObject({ code: 0, stderr: "" });
    expect(r.stdout).toMatch(new RegExp(`^gateway +${gw.url}$`, "m"));
    expect(r.stdout).toMatch(/^version +\d+\.\d+\.\d+$/m);
    expect(r.stdout).toMatch(/^config +valid$/m);
    expect(r.stdout).toMatch(/^connectors +telegram \(deliverUrl set, secret set\)$/m);
  });

  it("jobs lists the scheduled job with its next run; --json is the cron.list payload", async () => {
    const r = await cli("jobs");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ID +SCHEDULE +TZ +AGENT/m);
    expect(r.stdout).toMatch(/^nightly-report +0 3 \* \* \* +UTC +main +- +in \d+[smh] +- +-$/m);
    const json = await cli("jobs", "--json");
    expect(JSON.parse(json.stdout)).toEqual(await gw.call("cron.list"));
  });

  it("audit prints the verdict, the warnings and which secrets are set", async () => {
    const r = await cli("audit");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^audit: (ok|NOT OK)/);
    expect(r.stdout).toMatch(/^GATEWAY_TOKEN +yes +yes +operator surfaces/m);
    expect(JSON.parse((await cli("audit", "--json")).stdout)).toMatchObject({ secrets: expect.any(Array) });
  });
});

describe("switchboard sessions, history", () => {
  it("sessions list prints a table; --json parses to the sessions.list payload", async () => {
    const table = await cli("sessions", "list");
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^KEY +KIND +CHANNEL +LABEL +MODEL +TOKENS +STATE +UPDATED$/m);
    expect(table.stdout).toMatch(new RegExp(`^${ALICE} +other +telegram +- +echo/echo +\\d+ +idle +`, "m"));
    const json = await cli("sessions", "list", "--json");
    const payload = JSON.parse(json.stdout) as { count: number; sessions: Array<{ key: string }> };
    expect(payload.sessions.map((s) => s.key)).toContain(ALICE);
    expect(payload.count).toBe(payload.sessions.length);
    const internal = JSON.parse((await cli("sessions", "list", "--channel", "internal", "--json")).stdout);
    expect(internal.sessions.map((s: { key: string }) => s.key)).not.toContain(ALICE);
  });

  it("sessions show prints the entry", async () => {
    const r = await cli("sessions", "show", ALICE);
    expect(r.code).toBe(0);
    const { sessionId } = await gw.call<{ sessionId: string }>("sessions.resolve", { key: ALICE });
    expect(r.stdout).toMatch(new RegExp(`^key +${ALICE}$`, "m"));
    expect(r.stdout).toMatch(new RegExp(`^sessionId +${sessionId}$`, "m"));
    expect(r.stdout).toMatch(/^channel +telegram$/m);
    expect(r.stdout).toMatch(/^lastTo +telegram:alice$/m);
  });

  it("history prints the transcript oldest first", async () => {
    const r = await cli("history", ALICE);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines.slice(0, 2)).toEqual([
      expect.stringMatching(/^\S+Z {2}user {7}hello$/),
      expect.stringMatching(/^\S+Z {2}assistant {2}echo: hello$/),
    ]);
    const json = JSON.parse((await cli("history", ALICE, "--json")).stdout);
    expect(json).toMatchObject({ sessionKey: ALICE, hasMore: false });
  });

  it("search prints the hits as a table and --json; a hit reopens with history --session-id --around", async () => {
    const r = await cli("search", "hello");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^SESSION +SEQ +ROLE +WHEN +EXCERPT$/m);
    expect(r.stdout).toMatch(new RegExp(`^${ALICE} +1 +user +\\S.*\\S +\\*\\*hello\\*\\*$`, "m"));
    const json = JSON.parse((await cli("search", "hello", "--json")).stdout) as {
      results: Array<{ sessionKey: string; sessionId: string; seq: number; excerpt: string }>;
    };
    const hit = json.results.find((h) => h.sessionKey === ALICE && h.seq === 1);
    expect(hit?.excerpt).toBe("**hello**");
    const around = await cli(
      "history",
      ALICE,
      "--session-id",
      hit?.sessionId ?? "",
      "--around",
      "1",
      "--limit",
      "2",
    );
    expect(around.code).toBe(0);
    expect(around.stdout.split("\n")[0]).toMatch(/user {7}hello$/);
    const none = await cli("search", '"NEAR(');
    expect(none.code).toBe(0);
  });

  it("usage prints what model calls cost by the chosen group, with the total, and --json", async () => {
    const r = await cli("usage", "--by", "agent");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/, by agent$/m);
    expect(r.stdout).toMatch(/^AGENT +RUNS +CALLS +IN +OUT +CACHED +COST +UNPRICED$/m);
    // The echo model is priced, at nothing.
    expect(r.stdout).toMatch(/^main +\d+ +\d+ +[\d,]+ +[\d,]+ +0 +\$0\.00 +0$/m);
    expect(r.stdout).toMatch(/^TOTAL +\d+ /m);
    const json = JSON.parse((await cli("usage", "--by", "session", "--json")).stdout) as {
      groupBy: string;
      rows: Array<{ group: string; runs: number }>;
      total: { runs: number };
    };
    expect(json.groupBy).toBe("session");
    expect(json.rows.some((row) => row.group === ALICE && row.runs >= 1)).toBe(true);
    expect(json.total.runs).toBe(json.rows.reduce((n, row) => n + row.runs, 0));
    const bad = await cli("usage", "--by", "week");
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("must be one of day, agent, model, channel, session");
  });

  it("an unknown session is exit 4 with one line", async () => {
    const r = await cli("history", "agent:main:telegram:dm:nobody");
    expect(r.code).toBe(4);
    expect(errorLine(r.stderr)).toBe(
      "switchboard: 404 NOT_FOUND session not found: agent:main:telegram:dm:nobody",
    );
    expect(r.stdout).toBe("");
  });
});

describe("switchboard send, tail, reset", () => {
  it("send --wait prints the reply", async () => {
    const r = await cli("send", "agent:main:main", "ping", "from", "the", "cli", "--wait", "--timeout", "60");
    expect(r).toEqual({ code: 0, stdout: "echo: ping from the cli\n", stderr: "" });
  });

  it("tail prints each new message as it arrives and exits 0 on Ctrl-C", async () => {
    const tail = spawnCli(["tail", "agent:main:main", "-n", "1", "--interval", "0.2"], env);
    try {
      // The newest message first, then the ones sent while it follows.
      await waitFor(() => tail.output().stdout.includes("echo: ping from the cli"), 20_000, {
        what: "tail's first line",
      });
      const sent = await cli("send", "agent:main:main", "tailed");
      expect(sent.code).toBe(0);
      await waitFor(() => tail.output().stdout.includes("echo: tailed"), 20_000, {
        what: "the tailed reply",
      });
      const lines = tail.output().stdout.trimEnd().split("\n");
      expect(lines.map((l) => l.replace(/^\S+ +\S+ +/, ""))).toEqual([
        "echo: ping from the cli",
        "tailed",
        "echo: tailed",
      ]);
    } finally {
      tail.child.kill("SIGINT");
    }
    expect(await tail.exited).toEqual({ code: 0, signal: null });
    expect(tail.output().stderr).toBe("");
  });

  it("reset starts a new sessionId under the key", async () => {
    const before = await gw.call<{ sessionId: string }>("sessions.resolve", { key: "agent:main:main" });
    const r = await cli("reset", "agent:main:main");
    expect(r.code).toBe(0);
    const after = await gw.call<{ sessionId: string }>("sessions.resolve", { key: "agent:main:main" });
    expect(after.sessionId).not.toBe(before.sessionId);
    expect(r.stdout).toBe(`reset agent:main:main: new sessionId ${after.sessionId}\n`);
  });
});

describe("switchboard deliveries", () => {
  it("lists a dead delivery, and retry delivers it once the connector is back", async () => {
    const bob = "agent:main:telegram:dm:bob";
    connector.down();
    let deliveryId: string;
    try {
      const ack = await gw.inbound(
        "telegram",
        directMessage({ messageId: "cli-2", from: "bob", text: "anyone?" }),
      );
      deliveryId = `${ack.body.runId}:reply`;
      await waitFor(
        async () => {
          const { deliveries } = await gw.call<{ deliveries: Array<{ deliveryId: string }> }>(
            "deliveries.list",
            {
              status: "dead",
              sessionKey: bob,
            },
          );
          return deliveries.some((d) => d.deliveryId === deliveryId);
        },
        30_000,
        { intervalMs: 100, what: "bob's delivery dead" },
      );
    } finally {
      connector.up();
    }
    const table = await cli("deliveries", "--status", "dead");
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^ID +STATUS +TRIES +KIND +SESSION +TO +CREATED +NEXT\/DONE +LAST ERROR$/m);
    expect(table.stdout).toMatch(
      new RegExp(`^${deliveryId} +dead +2 +reply +${bob} +telegram:bob +.+connector answered 503`, "m"),
    );
    const json = JSON.parse((await cli("deliveries", "--session", bob, "--json")).stdout);
    expect(json.deliveries).toEqual([expect.objectContaining({ deliveryId, status: "dead", attempts: 2 })]);

    const retried = await cli("deliveries", "retry", deliveryId);
    expect(retried).toEqual({
      code: 0,
      stdout: `queued delivery ${deliveryId} again (pending)\n`,
      stderr: "",
    });
    await waitFor(() => connector.deliveriesFor({ sessionKey: bob }).length === 1, 30_000, {
      what: "bob's reply delivered after the retry",
    });
    const again = await cli("deliveries", "retry", deliveryId);
    expect(again.code).toBe(1);
    expect(errorLine(again.stderr)).toMatch(/^switchboard: 409 CONFLICT /);
    const unknown = await cli("deliveries", "retry", "no-such-delivery");
    expect(unknown.code).toBe(4);
  });
});

describe("switchboard failures", () => {
  it("a wrong token prints one line and exits 3", async () => {
    const r = await execCli(["status"], { ...env, SWITCHBOARD_TOKEN: "not-the-token" });
    expect(r).toEqual({
      code: 3,
      stdout: "",
      stderr: "switchboard: 401 UNAUTHORIZED invalid bearer token\n",
    });
  });

  it("--token wins over SWITCHBOARD_TOKEN", async () => {
    const r = await execCli(["status", "--token", GATEWAY_TOKEN], {
      ...env,
      SWITCHBOARD_TOKEN: "not-the-token",
    });
    expect(r.code).toBe(0);
  });

  it("no URL is a usage error (exit 2) naming SWITCHBOARD_URL and --url", async () => {
    const r = await execCli(["status"], { SWITCHBOARD_TOKEN: GATEWAY_TOKEN });
    expect(r).toEqual({
      code: 2,
      stdout: "",
      stderr: "switchboard: no gateway URL: set SWITCHBOARD_URL or pass --url <url>\n",
    });
  });

  it("a gateway that is not there is exit 5", async () => {
    // A port that was free a moment ago: nothing listens on it.
    const probe = createServer();
    const port = await listenOnLoopback(probe);
    probe.close();
    await once(probe, "close");
    const r = await execCli(["status"], { ...env, SWITCHBOARD_URL: `http://127.0.0.1:${port}` });
    expect(r).toEqual({
      code: 5,
      stdout: "",
      stderr: `switchboard: cannot connect to http://127.0.0.1:${port}: ECONNREFUSED\n`,
    });
  });
});
