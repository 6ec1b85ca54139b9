import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { parseConfig } from "../../src/config/load";
import { sweepExpiredSessions } from "../../src/cron/reset-sweep";
import { runScheduled } from "../../src/cron/scheduled";
import { applyExpiryChanges, dueSessions, dueSessionsQuery } from "../../src/db/maintenance";
import { homeDatabase } from "../../src/db/placement";
import { getSession } from "../../src/db/queries";
import { SCRIPTED_MODEL_CONFIG, scriptedWorld } from "./model-support";
import { exportTranscript, jsonLines, seedSessions, sessionRow, withActorConfig } from "./rpc-support";
import { actor, configText, dm, inbound, rpc, waitRun } from "./support";

const MIN = 60_000;
/** The config every test Worker and actor runs with (vitest.config.ts). */
const TEST_CONFIG = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;
const IDLE = { session: { reset: { mode: "idle" as const, idleMinutes: 5 } } };

/** The test config plus `extra`, as the Worker and the scheduled handler would read it. */
function envWith(extra: object): Env {
  return { ...env, SWITCHBOARD_CONFIG: configText({ ...TEST_CONFIG, ...extra }) };
}

interface Row {
  key: string;
  sessionId: string;
  expired: boolean;
  expiredAt?: number;
  expiresAt?: number;
}

async function listed(key: string): Promise<Row | undefined> {
  const res = await rpc<{ sessions: Row[] }>("sessions.list", { limit: 200 });
  return res.payload.sessions.find((s) => s.key === key);
}

afterEach(() => {
  vi.useRealTimers();
});

describe("the reset sweep", () => {
  it("closes an idle session within a minute of its expiry, with no new message; the next message starts a new sessionId with no old context", async () => {
    // A clock in the recent past, so the actor's alarms (set at "now") still fire at once.
    const t0 = Date.now() - 60 * MIN;
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(t0);
    const world = scriptedWorld((req) => ({ text: `seen: ${req.messages.map((m) => m.role).join(",")}` }));
    const config = { ...TEST_CONFIG, ...SCRIPTED_MODEL_CONFIG, ...IDLE };
    const from = "sweep-idle";
    const key = `agent:main:main`;
    await withActorConfig(key, config);

    const first = (await (await inbound("telegram", dm("remember the word tangerine", { from }))).json()) as {
      sessionId: string;
      runId: string;
    };
    expect((await waitRun(first.runId)).status).toBe("ok");
    expect(await listed(key)).toMatchObject({
      sessionId: first.sessionId,
      expired: false,
      expiresAt: t0 + 5 * MIN,
    });

    // 40 s after the expiry, the minute trigger runs; nobody has written since.
    vi.setSystemTime(t0 + 5 * MIN + 40_000);
    await runScheduled({ scheduledTime: Date.now() }, envWith({ ...SCRIPTED_MODEL_CONFIG, ...IDLE }));
    const closed = await getSession(env, key);
    expect(closed?.expiredAt).toBe(t0 + 5 * MIN);
    expect(await listed(key)).toMatchObject({
      sessionId: first.sessionId,
      expired: true,
      expiredAt: t0 + 5 * MIN,
    });
    const status = await rpc<{ maintenance: Record<string, { lastRun: Record<string, unknown> }> }>("status");
    expect(status.payload.maintenance.resetSweep?.lastRun).toMatchObject({ closed: 1, worked: true });

    // The old transcript stays exportable by its sessionId.
    const old = await jsonLines(await exportTranscript(`${first.sessionId}.jsonl`));
    expect(JSON.stringify(old)).toContain("tangerine");

    // The next message starts a new sessionId whose first turn sees only itself.
    const seen = world.requests.length;
    const second = (await (await inbound("telegram", dm("what was the word?", { from }))).json()) as {
      sessionId: string;
      runId: string;
    };
    expect(second.sessionId).not.toBe(first.sessionId);
    expect((await waitRun(second.runId)).status).toBe("ok");
    const turn = world.requests.slice(seen);
    expect(turn).toHaveLength(1);
    expect(JSON.stringify(turn[0]?.messages)).not.toContain("tangerine");
    expect(turn[0]?.messages.filter((m) => m.role === "user")).toHaveLength(1);
    expect(await listed(key)).toMatchObject({ sessionId: second.sessionId, expired: false });
    world.restore();
  });

  it("finds due sessions through the partial index sessions_due, never a scan of all sessions", async () => {
    const q = dueSessionsQuery(env, Date.now(), 100);
    const plan = await homeDatabase(env)
      .prepare(`EXPLAIN QUERY PLAN ${q.sql}`)
      .bind(...q.params)
      .all<{ detail: string }>();
    const details = plan.results.map((r) => r.detail).join("\n");
    expect(details).toMatch(/USING INDEX sessions_due/);
    expect(details).not.toMatch(/SCAN sessions(?! USING)/);
  });

  it("closes each due session once when two sweeps overlap", async () => {
    const now = Date.now();
    const config = parseConfig(JSON.stringify(IDLE));
    const rows = await seedSessions(
      Array.from({ length: 30 }, (_, i) =>
        sessionRow({
          key: `agent:overlap:dm:p${i}`,
          agentId: "overlap",
          lastInteractionAt: now - 20 * MIN,
          sessionStartedAt: now - 30 * MIN,
          expiresAt: now - 15 * MIN,
        }),
      ),
    );
    // Every due row (others in this file's storage included) is closed by exactly one of the two.
    const due = (await dueSessions(env, now, 1000)).length;
    expect(due).toBeGreaterThanOrEqual(30);
    const [a, b] = await Promise.all([
      sweepExpiredSessions(env, config, now, { chunk: 7, maxChunks: 10 }),
      sweepExpiredSessions(env, config, now, { chunk: 7, maxChunks: 10 }),
    ]);
    expect(a.closed + b.closed).toBe(due);
    for (const r of rows) expect((await getSession(env, r.key))?.expiredAt).toBe(now - 15 * MIN);
    // Nothing is left for a third.
    expect(await sweepExpiredSessions(env, config, now)).toEqual({
      closed: 0,
      rescheduled: 0,
      skipped: 0,
      more: false,
    });
  });

  it("works in bounded chunks per invocation and says when more are due", async () => {
    const now = Date.now();
    const config = parseConfig(JSON.stringify(IDLE));
    await seedSessions(
      Array.from({ length: 9 }, (_, i) =>
        sessionRow({
          key: `agent:chunks:dm:p${i}`,
          agentId: "chunks",
          lastInteractionAt: now - 20 * MIN,
          expiresAt: now - 15 * MIN + i,
        }),
      ),
    );
    expect(await sweepExpiredSessions(env, config, now, { chunk: 3, maxChunks: 2 })).toMatchObject({
      closed: 6,
      more: true,
    });
    expect(await sweepExpiredSessions(env, config, now, { chunk: 3, maxChunks: 2 })).toMatchObject({
      closed: 3,
      more: false,
    });
  });

  it("reschedules instead of closing when the current config no longer makes the session stale", async () => {
    const now = Date.now();
    const [row] = await seedSessions([
      sessionRow({
        key: "agent:longer:dm:p1",
        agentId: "longer",
        lastInteractionAt: now - 20 * MIN,
        sessionStartedAt: now - 20 * MIN,
        expiresAt: now - 15 * MIN, // written under idleMinutes: 5
      }),
    ]);
    const config = parseConfig(JSON.stringify({ session: { reset: { mode: "idle", idleMinutes: 600 } } }));
    expect(await sweepExpiredSessions(env, config, now)).toMatchObject({ closed: 0, rescheduled: 1 });
    const after = await getSession(env, row!.key);
    expect(after?.expiredAt).toBeNull();
    expect(after?.expiresAt).toBe(now - 20 * MIN + 600 * MIN);
  });

  it("leaves a row alone when its expiry changed since it was read (a new message wins)", async () => {
    const now = Date.now();
    const [row] = await seedSessions([
      sessionRow({ key: "agent:race:dm:p1", agentId: "race", expiresAt: now + 5 * MIN }),
    ]);
    expect(await applyExpiryChanges(env, [{ key: row!.key, was: now - MIN, closeAt: now - MIN }])).toEqual([
      false,
    ]);
    expect((await getSession(env, row!.key))?.expiredAt).toBeNull();
  });

  it("starts a new sessionId when a system turn reaches a stale session, without refreshing idle freshness", async () => {
    const t0 = Date.now() - 60 * MIN;
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(t0);
    const key = "agent:main:telegram:group:sweep-system";
    await withActorConfig(key, { ...TEST_CONFIG, ...IDLE });
    const ack = (await (
      await inbound("telegram", { ...dm("hi"), chatType: "group", groupId: "sweep-system" })
    ).json()) as { sessionId: string; runId: string };
    await waitRun(ack.runId);
    vi.setSystemTime(t0 + 6 * MIN);
    const init = { agentId: "main", kind: "group", chatType: "group" as const, channel: "telegram" };
    const result = await actor(key).enqueue({
      sessionKey: key,
      runId: crypto.randomUUID(),
      trigger: "hook",
      inputs: [{ text: "a system event", provenance: { kind: "internal_system" }, timestamp: Date.now() }],
      deliver: false,
      init,
      userInteraction: false,
      hasThread: false,
    });
    expect(result.ok && result.sessionId).not.toBe(ack.sessionId);
    if (result.ok) await waitRun(result.runId);
    const entry = await getSession(env, key);
    expect(entry?.sessionId).not.toBe(ack.sessionId);
    expect(entry?.lastInteractionAt).toBeNull();
  });
});
