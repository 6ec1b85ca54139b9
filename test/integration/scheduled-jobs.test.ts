import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { runDueJobs } from "../../src/cron/jobs";
import { runScheduled } from "../../src/cron/scheduled";
import { lastJobRun } from "../../src/db/maintenance";
import { homeDatabase } from "../../src/db/placement";
import { database } from "../../src/db/queries";
import { getRun } from "../../src/db/runs";
import * as schema from "../../src/db/schema";
import { rpcWithConfig } from "./rpc-support";
import { configText, eventually, fakeConnector, waitRun } from "./support";

const MIN = 60_000;
const TEST_CONFIG = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;

type Job = Record<string, unknown> & { id: string };

function configWith(jobs: Job[], extra: object = {}) {
  return { ...TEST_CONFIG, cron: { jobs }, ...extra };
}

/** Invokes the minute trigger `times` times at once, as overlapping invocations would. */
async function trigger(config: object, scheduledTime: number, times = 1) {
  const e = { ...env, SWITCHBOARD_CONFIG: configText(config) };
  await Promise.all(Array.from({ length: times }, () => runScheduled({ scheduledTime }, e)));
}

async function claims(jobId: string) {
  const rows = await database(homeDatabase(env)).select().from(schema.jobRuns).all();
  return rows.filter((r) => r.jobId === jobId).sort((a, b) => a.scheduledFor - b.scheduledFor);
}

let connector: ReturnType<typeof fakeConnector> | undefined;
afterEach(() => {
  connector?.restore();
  connector = undefined;
});

describe("scheduled jobs", () => {
  it("a * * * * * job delivers once per minute, never twice for one minute when the trigger runs three times", async () => {
    connector = fakeConnector();
    const job = {
      id: "tick",
      schedule: "* * * * *",
      message: "ping",
      deliver: { channel: "telegram", to: "chat-9" },
    };
    const config = configWith([job]);
    const m1 = Math.floor(Date.now() / MIN) * MIN;

    await trigger(config, m1 + 1_000, 3);
    await trigger(config, m1 + 59_000, 1);
    const first = await claims("tick");
    expect(first).toHaveLength(1);
    expect((await waitRun(first[0]!.runId)).status).toBe("ok");

    await trigger(config, m1 + MIN + 5_000, 3);
    const both = await claims("tick");
    expect(both.map((c) => c.scheduledFor)).toEqual([m1, m1 + MIN]);
    expect((await waitRun(both[1]!.runId)).status).toBe("ok");

    const replies = await eventually(async () => {
      const r = connector!.delivered.filter((d) => d.body.sessionKey === "cron:tick");
      return r.length >= 2 && r;
    });
    expect(replies).toHaveLength(2);
    for (const d of replies) {
      expect(d.body).toMatchObject({
        kind: "reply",
        channel: "telegram",
        to: "chat-9",
        accountId: "default",
      });
      expect(d.body.text).toBe("echo: ping");
    }
    // Isolated (the default): each run has its own sessionId.
    const runs = await Promise.all(both.map((c) => getRun(env, c.runId)));
    expect(runs[0]?.sessionId).not.toBe(runs[1]?.sessionId);
    expect(runs.map((r) => r?.trigger)).toEqual(["cron", "cron"]);
  });

  it("exactly one of several overlapping invocations claims a minute and queues its run", async () => {
    const job = { id: "claimed", schedule: "* * * * *", message: "once" };
    const config = parseConfig(JSON.stringify(configWith([job])));
    const tick = Math.floor(Date.now() / MIN) * MIN + 3_000;
    const results = await Promise.all([1, 2, 3].map(() => runDueJobs(env, config, tick)));
    expect(results.map((r) => r.queued.length).sort()).toEqual([0, 0, 1]);
  });

  it("a job with isolated: false keeps one sessionId across runs", async () => {
    const job = { id: "keeper", schedule: "* * * * *", message: "note", isolated: false };
    const m1 = Math.floor(Date.now() / MIN) * MIN;
    await trigger(configWith([job]), m1);
    await trigger(configWith([job]), m1 + MIN);
    const c = await claims("keeper");
    const runs = await Promise.all(
      c.map(async (x) => {
        await waitRun(x.runId);
        return getRun(env, x.runId);
      }),
    );
    expect(runs[0]?.sessionId).toBe(runs[1]?.sessionId);
  });

  it("makes up a minute missed by downtime once, never for a new job, never after the window", async () => {
    const job = { id: "digest", schedule: "0 8 * * *", timezone: "UTC", message: "digest" };
    const day = Date.UTC(2026, 10, 20, 8, 0);
    // Ran on time on day 1.
    await trigger(configWith([job]), day + 2_000);
    // Day 2: the gateway was down from 07:58 to 08:04; the 08:05 trigger makes 08:00 up, 08:06 does not repeat it.
    await trigger(configWith([job]), day + 24 * 60 * MIN + 5 * MIN);
    await trigger(configWith([job]), day + 24 * 60 * MIN + 6 * MIN);
    // Day 3: down until 09:00, past the catch-up window: skipped.
    await trigger(configWith([job]), day + 48 * 60 * MIN + 60 * MIN);
    const c = await claims("digest");
    expect(c.map((x) => [x.scheduledFor, x.late])).toEqual([
      [day, false],
      [day + 24 * 60 * MIN, true],
    ]);
    // A job added after its minute passed does not run for it.
    const fresh = { id: "fresh", schedule: "0 8 * * *", timezone: "UTC", message: "x" };
    await trigger(configWith([job, fresh]), day + 72 * 60 * MIN + 5 * MIN);
    expect(await claims("fresh")).toEqual([]);
  });

  it("retries a claimed minute whose invocation stopped before its run was queued", async () => {
    const job = { id: "orphan", schedule: "0 3 * * *", timezone: "UTC", message: "orphaned" };
    const runId = crypto.randomUUID();
    await database(homeDatabase(env))
      .insert(schema.jobRuns)
      .values({
        jobId: "orphan",
        scheduledFor: Date.UTC(2026, 10, 20, 3, 0),
        runId,
        sessionKey: "cron:orphan",
        claimedAt: Date.now() - 2 * MIN,
        late: false,
      })
      .run();
    await trigger(configWith([job]), Date.now());
    expect((await waitRun(runId)).status).toBe("ok");
    expect((await lastJobRun(env, "orphan"))?.queuedAt).toEqual(expect.any(Number));
  });

  it("keeps a reply blocked by send policy in the transcript, undelivered", async () => {
    connector = fakeConnector();
    const job = {
      id: "quiet",
      schedule: "* * * * *",
      message: "hush",
      deliver: { channel: "telegram", to: "c1" },
    };
    const config = configWith([job], {
      session: { sendPolicy: { rules: [{ action: "deny", match: { keyPrefix: "cron:" } }] } },
    });
    // The actor reads its own config: the deny rule must reach it too.
    const { withActorConfig } = await import("./rpc-support");
    await withActorConfig("cron:quiet", config);
    await trigger(config, Date.now());
    const [claim] = await claims("quiet");
    expect((await waitRun(claim!.runId)).status).toBe("ok");
    const run = await getRun(env, claim!.runId);
    expect(run?.delivered).toBe(false);
    expect(run?.reply).toBe("echo: hush");
    expect(connector.delivered.filter((d) => d.body.sessionKey === "cron:quiet")).toEqual([]);
  });

  it("cron.list and status show each job with its last and next run", async () => {
    const job = {
      id: "listed",
      schedule: "*/5 * * * *",
      message: "hello",
      deliver: { channel: "slack", to: "c2" },
    };
    const config = configWith([job]);
    const slot = Math.floor(Date.now() / (5 * MIN)) * 5 * MIN;
    await trigger(config, slot);
    const [claim] = await claims("listed");
    await waitRun(claim!.runId);
    const res = await rpcWithConfig<{ jobs: Array<Record<string, unknown>> }>(config, "cron.list");
    expect(res.status).toBe(200);
    expect(res.payload.jobs).toEqual([
      {
        id: "listed",
        schedule: "*/5 * * * *",
        timezone: "UTC",
        agentId: "main",
        isolated: true,
        deliver: { channel: "slack", to: "c2" },
        sessionKey: "cron:listed",
        nextRunAt: expect.any(Number),
        lastRun: expect.objectContaining({
          scheduledFor: slot,
          runId: claim!.runId,
          late: false,
          status: "ok",
          sessionId: expect.any(String),
        }),
      },
    ]);
    const next = res.payload.jobs[0]?.nextRunAt as number;
    expect(next % (5 * MIN)).toBe(0);
    expect(next).toBeGreaterThan(Date.now());
    const status = await rpcWithConfig<{ jobs: unknown[]; maintenance: Record<string, unknown> }>(
      config,
      "status",
    );
    expect(status.payload.jobs).toEqual(
      res.payload.jobs.map((j) => ({ ...j, nextRunAt: expect.any(Number) })),
    );
    expect(status.payload.maintenance.jobs).toMatchObject({ lastRun: { queued: expect.any(Array) } });
  });

  it("cron.list takes no params", async () => {
    const res = await rpcWithConfig(configWith([]), "cron.list", { all: true });
    expect(res.status).toBe(400);
  });
});
