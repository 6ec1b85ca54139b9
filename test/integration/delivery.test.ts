import { runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { hangingFetch } from "./rpc-support";
import {
  actor,
  backlogOf,
  dm,
  drain,
  eventually,
  fakeConnector,
  holdClock,
  inbound,
  nextAttempt,
  outboxOf,
  rpc,
  waitRun,
} from "./support";

interface Delivery {
  deliveryId: string;
  status: string;
  attempts: number;
  lastError?: string;
  nextAttemptAt?: number;
}

/** A run's delivery, as its session's deliveries read now (outcomes its actor holds are written first). */
async function deliveryOf(runId: string, sessionKey: string): Promise<Delivery | undefined> {
  const list = await rpc<{ deliveries: Delivery[] }>("deliveries.list", { sessionKey });
  return list.payload.deliveries.find((d) => d.deliveryId.startsWith(runId));
}

/** A message in a group chat of its own (its own session, so its own actor and outbox). */
async function say(groupId: string, text: string) {
  const res = await inbound("telegram", dm(text, { chatType: "group", groupId, from: `${groupId}-user` }));
  return (await res.json()) as { runId: string; sessionKey: string };
}

afterEach(() => {
  vi.useRealTimers();
});

// TEST_CONFIG: delivery { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200 }. The clock is held
// (`holdClock`): an attempt after the first is made when the test moves the clock to the
// actor's alarm, never by waiting for it.
describe("delivery outbox", () => {
  it("retries a connector that is down with backoff and delivers once it is back", async () => {
    const t0 = holdClock();
    let down = true;
    const connector = fakeConnector(() => (down ? 503 : 200));
    const { runId, sessionKey } = await say("patient", "are you there?");
    await waitRun(runId);
    // The first attempt, with the run, failed: the next is due baseDelayMs later, at the alarm.
    expect(await deliveryOf(runId, sessionKey)).toMatchObject({
      status: "retrying",
      attempts: 1,
      nextAttemptAt: t0 + 50,
      lastError: expect.stringMatching(/connector answered 503/),
    });
    const [owed] = await outboxOf(sessionKey);
    expect(owed).toMatchObject({ attempts: 1, nextAt: t0 + 50 });
    expect((await backlogOf(sessionKey)).alarm).toBe(t0 + 50);
    // Before its time, the alarm attempts nothing (and sets itself again).
    expect(await runDurableObjectAlarm(actor(sessionKey))).toBe(true);
    expect(await outboxOf(sessionKey)).toEqual([owed]);
    expect(connector.attempts()).toBe(1);

    // Still down at the second attempt: the backoff doubles.
    const second = await nextAttempt(sessionKey);
    expect(second.at).toBe(t0 + 50);
    expect(second.after).toMatchObject({ attempts: 2, nextAt: t0 + 50 + 100 });
    down = false;
    const third = await nextAttempt(sessionKey);
    expect(third.at).toBe(t0 + 150);
    expect(third.after).toBeUndefined();
    expect(await deliveryOf(runId, sessionKey)).toMatchObject({ status: "delivered", attempts: 3 });
    expect(connector.attempts()).toBe(3);
    expect(connector.delivered).toHaveLength(1);
    expect(connector.delivered[0]!.body).toMatchObject({
      text: "echo: are you there?",
      deliveryId: `${runId}:reply`,
    });
    // Nothing is left to attempt.
    await drain(sessionKey);
    connector.restore();
  });

  it("marks a delivery dead after the configured attempts when the connector stays down", async () => {
    const t0 = holdClock();
    const connector = fakeConnector(() => 500);
    const { runId, sessionKey } = await say("lonely", "anyone?");
    await waitRun(runId);
    expect((await nextAttempt(sessionKey)).at).toBe(t0 + 50);
    const last = await nextAttempt(sessionKey);
    expect(last.at).toBe(t0 + 150);
    // The third attempt was the last: its row is gone, and with it the actor's alarm.
    expect(last.after).toBeUndefined();
    const dead = await deliveryOf(runId, sessionKey);
    expect(dead).toMatchObject({ status: "dead", attempts: 3 });
    expect(dead?.lastError).toMatch(/connector answered 500/);
    await drain(sessionKey);
    expect(connector.attempts()).toBe(3);
    const listed = await rpc<{ deliveries: Delivery[] }>("deliveries.list", { status: "dead" });
    expect(listed.payload.deliveries.map((d) => d.deliveryId)).toContain(dead!.deliveryId);
    connector.restore();
  });
});

describe("deliveries.retry", () => {
  it("queues a dead delivery again, delivers it once, and refuses a delivered one", async () => {
    holdClock();
    let down = true;
    const connector = fakeConnector(() => (down ? 500 : 200));
    const { runId, sessionKey } = await say("second-chance", "retry me");
    await waitRun(runId);
    await nextAttempt(sessionKey);
    await nextAttempt(sessionKey);
    const dead = await deliveryOf(runId, sessionKey);
    expect(dead).toMatchObject({ status: "dead", attempts: 3 });
    down = false;
    const retried = await rpc("deliveries.retry", { deliveryId: dead!.deliveryId });
    expect(retried.status).toBe(200);
    expect(retried.payload).toEqual({ deliveryId: dead!.deliveryId, status: "pending", requeued: true });
    // Requeued, it is attempted at once (no alarm, no clock moved).
    await drain(sessionKey);
    const delivered = await deliveryOf(runId, sessionKey);
    // A fresh round of attempts: the first one of it succeeded.
    expect(delivered).toMatchObject({ status: "delivered", attempts: 1 });
    expect(connector.delivered).toHaveLength(1);
    expect(connector.delivered[0]!.body).toMatchObject({
      deliveryId: dead!.deliveryId,
      text: "echo: retry me",
    });

    const again = await rpc("deliveries.retry", { deliveryId: dead!.deliveryId });
    expect(again.status).toBe(409);
    expect(again.error?.message).toMatch(/was delivered; only a dead one can be retried/);
    connector.restore();
  });

  it("leaves a delivery that is still owed alone, and names what is wrong with a bad request", async () => {
    holdClock();
    const connector = fakeConnector(() => 503);
    const { runId, sessionKey } = await say("owed", "still trying");
    await waitRun(runId);
    // Held clock: the delivery stays owed (retrying) until the test moves it, which it does not.
    const owed = await deliveryOf(runId, sessionKey);
    expect(owed?.status).toBe("retrying");
    const retried = await rpc("deliveries.retry", { deliveryId: owed!.deliveryId });
    expect(retried.payload).toEqual({ deliveryId: owed!.deliveryId, status: "retrying", requeued: false });
    expect(await outboxOf(sessionKey)).toEqual([
      expect.objectContaining({ deliveryId: owed!.deliveryId, attempts: 1 }),
    ]);

    const unknown = await rpc("deliveries.retry", { deliveryId: "no-such-delivery" });
    expect(unknown.status).toBe(404);
    expect(unknown.error?.message).toBe("delivery not found: no-such-delivery");
    const missing = await rpc("deliveries.retry", {});
    expect(missing.status).toBe(400);
    expect(missing.error?.message).toMatch(/deliveryId/);
    connector.restore();
  });
});

describe("a connector that accepts connections and never answers", () => {
  it("does not delay the session's runs: every message is answered while the replies wait", async () => {
    // Every POST hangs until the gateway gives up on the attempt (its own timeout).
    const connector = hangingFetch("https://connector.test/");
    try {
      const runs: string[] = [];
      let sessionKey = "";
      for (let i = 0; i < 5; i++) {
        const ack = (await (
          await inbound("telegram", dm(`hello ${i}`, { from: "stalled-chat" }))
        ).json()) as {
          runId: string;
          sessionKey: string;
        };
        sessionKey = ack.sessionKey;
        // Well inside one delivery attempt's timeout (15 s): a run that waited for the
        // connector would not be done.
        const done = await waitRun(ack.runId, 6_000);
        expect(done.status, `message ${i}`).toBe("ok");
        runs.push(ack.runId);
      }
      expect(connector.calls()).toBeGreaterThanOrEqual(1);
      for (const runId of runs) {
        const d = await eventually(async () => deliveryOf(runId, sessionKey));
        expect(["pending", "retrying"]).toContain(d.status);
      }
    } finally {
      connector.restore();
    }
  });
});
