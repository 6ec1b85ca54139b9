/**
 * Lifecycle and automation end to end against `wrangler dev` (SPEC §10–§13): a scheduled job
 * fired through the cron trigger (miniflare's `/cdn-cgi/local/scheduled`, which takes the
 * trigger's time, unlike wrangler's `/__scheduled`: no test waits for a clock), a `/hooks/agent` run delivered to the fake connector, and the reset
 * sweep closing a due session.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

const HOOKS_TOKEN = "e2e-hooks-token-0123456789";
const MIN = 60_000;

let gw: Gateway;
let connector: FakeConnector;

beforeAll(async () => {
  connector = await startFakeConnector(CONNECTOR_SECRET);
  gw = await startGateway({
    config: {
      connectors: connectorConfig(connector.url),
      session: { dmScope: "per-channel-peer", reset: { mode: "idle", idleMinutes: 5 } },
      hooks: { enabled: true },
      cron: {
        jobs: [
          {
            id: "e2e-tick",
            schedule: "* * * * *",
            message: "tick",
            deliver: { channel: "telegram", to: "ops" },
          },
        ],
      },
    },
    vars: { HOOKS_TOKEN },
  });
});

afterAll(async () => {
  await gw?.dispose();
  await connector?.close();
});

/** Fires the minute trigger as Cloudflare would, for the given instant. */
async function trigger(at: number): Promise<void> {
  const res = await gw.fetch(`/cdn-cgi/local/scheduled?cron=${encodeURIComponent("* * * * *")}&time=${at}`);
  expect(res.status).toBe(200);
  await res.text();
}

async function hook(body: unknown, token = HOOKS_TOKEN) {
  const res = await gw.fetch("/hooks/agent", {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("a scheduled job through the cron trigger", () => {
  it("delivers once per minute, even when the trigger fires three times in that minute, in a new sessionId each run", async () => {
    const ticks = () => connector.deliveriesFor({ sessionKey: "cron:e2e-tick", to: "ops" });
    const before = ticks().length;
    const minute = Math.ceil(Date.now() / MIN) * MIN + 10 * MIN;
    await Promise.all([trigger(minute + 1_000), trigger(minute + 20_000), trigger(minute + 40_000)]);
    await waitFor(() => ticks().length >= before + 1, 10_000, { what: "the first job reply" });
    await trigger(minute + MIN + 5_000);
    await trigger(minute + MIN + 6_000);
    await waitFor(() => ticks().length >= before + 2, 10_000, { what: "the second job reply" });
    // Give a stray third delivery the chance to show up before counting.
    await trigger(minute + MIN + 7_000);
    const mine = ticks().slice(before);
    expect(mine).toHaveLength(2);
    expect(mine.map((d) => [d.body?.kind, d.body?.text])).toEqual([
      ["reply", "echo: tick"],
      ["reply", "echo: tick"],
    ]);
    const { jobs } = await gw.call<{
      jobs: Array<{ id: string; lastRun: { scheduledFor: number; sessionId: string } }>;
    }>("cron.list");
    expect(jobs[0]?.lastRun.scheduledFor).toBe(minute + MIN);
    const runs = await gw.call<{ deliveries: Array<{ runId: string }> }>("deliveries.list", {
      sessionKey: "cron:e2e-tick",
    });
    const sessionIds = new Set<string>();
    for (const d of runs.deliveries.slice(0, 2)) {
      const run = await gw.call<{ sessionId: string }>("runs.get", { runId: d.runId });
      sessionIds.add(run.sessionId);
    }
    expect(sessionIds.size).toBe(2);
  });
});

describe("POST /hooks/agent", () => {
  it("runs in a fresh hook session and delivers its reply to the connector", async () => {
    const res = await hook({
      message: "deploy 42 finished",
      name: "CI",
      channel: "telegram",
      to: "ci-room",
      waitForCompletion: true,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      ok: true,
      sessionKey: expect.stringMatching(/^hook:[0-9a-f-]{36}$/),
      completion: { status: "ok", delivered: true, reply: "echo: deploy 42 finished" },
    });
    const delivered = connector.deliveriesFor({ sessionKey: res.body.sessionKey as string });
    expect(delivered.map((d) => [d.body?.to, d.body?.text, d.signatureCheck])).toEqual([
      ["ci-room", "echo: deploy 42 finished", "ok"],
    ]);
  });

  it("refuses the operator token", async () => {
    expect((await hook({ message: "x" }, GATEWAY_TOKEN)).status).toBe(401);
  });
});

describe("the reset sweep", () => {
  it("closes a session once its idle expiry has passed, without any new message", async () => {
    const ack = await gw.inbound(
      "telegram",
      directMessage({ messageId: "sweep-1", from: "sweeper", text: "hi" }),
    );
    expect(ack.status).toBe(202);
    const key = ack.body.sessionKey as string;
    await waitFor(
      // Not found until recorded (a connector's message reaches D1 with its run's next write).
      async () =>
        (await gw.call<{ status: string }>("runs.get", { runId: ack.body.runId }).catch(() => undefined))
          ?.status === "ok",
      10_000,
    );
    type Row = { key: string; sessionId: string; expired: boolean; expiresAt?: number; expiredAt?: number };
    const row = async () =>
      (await gw.call<{ sessions: Row[] }>("sessions.list", { limit: 200 })).sessions.find(
        (s) => s.key === key,
      );
    const open = await row();
    expect(open).toMatchObject({ expired: false, expiresAt: expect.any(Number) });

    // The trigger after the expiry closes it; the row keeps its sessionId and shows when it expired.
    await trigger((open?.expiresAt as number) + 30_000);
    expect(await row()).toMatchObject({
      sessionId: ack.body.sessionId,
      expired: true,
      expiredAt: open?.expiresAt,
    });
    const status = await gw.call<{ maintenance: { resetSweep: { lastWork: { closed: number } } } }>("status");
    expect(status.maintenance.resetSweep.lastWork.closed).toBeGreaterThanOrEqual(1);
  });
});
