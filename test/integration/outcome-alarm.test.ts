/**
 * A delivery's outcome is due work of the actor's one scheduler (session/scheduler.ts): no write
 * of the session carries it within OUTCOME_RECORD_DELAY_MS, and the alarm writes it; a failed
 * attempt's outcome is due at once. The clock is held (`holdClock`): the test moves it to the
 * actor's alarms and runs them, never waiting for them.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { OUTCOME_RECORD_DELAY_MS } from "../../src/delivery/outbox";
import {
  advanceToAlarm,
  backlogOf,
  dm,
  fakeConnector,
  holdClock,
  inbound,
  selectEach,
  waitRun,
} from "./support";

afterEach(() => {
  vi.useRealTimers();
});

async function say(groupId: string, text: string) {
  const res = await inbound("telegram", dm(text, { chatType: "group", groupId, from: `${groupId}-user` }));
  return (await res.json()) as { runId: string; sessionKey: string };
}

const deliveryStatus = async (runId: string) =>
  (
    await selectEach<{ status: string }>(
      "SELECT status FROM deliveries WHERE delivery_id = ?",
      `${runId}:reply`,
    )
  )[0]?.status;

describe("the alarm records a delivery's outcome no write carried", () => {
  it("writes a delivered reply's outcome once its delay has passed, and then has nothing due", async () => {
    const t0 = holdClock();
    const connector = fakeConnector(() => 200);
    const { runId, sessionKey } = await say("outcome-alarm", "hello");
    expect(await waitRun(runId)).toMatchObject({ status: "ok" });
    expect(connector.delivered).toHaveLength(1);
    // Kept by the actor for the session's next write; nothing in D1 yet.
    expect(await backlogOf(sessionKey)).toMatchObject({ runs: 0, deliveries: 0, outcomes: 1 });
    expect(await deliveryStatus(runId)).toBeUndefined();

    // The alarms before the outcome's due time (the run's backstop) write nothing.
    let at = await advanceToAlarm(sessionKey);
    while (at !== null && at < t0 + OUTCOME_RECORD_DELAY_MS) {
      expect(await deliveryStatus(runId)).toBeUndefined();
      at = await advanceToAlarm(sessionKey);
    }
    expect(at).toBeGreaterThanOrEqual(t0 + OUTCOME_RECORD_DELAY_MS);
    expect(await deliveryStatus(runId)).toBe("delivered");
    expect(await backlogOf(sessionKey)).toMatchObject({ outcomes: 0, alarm: null });
    connector.restore();
  });

  it("writes a failed attempt's outcome at the next alarm, before the retry is due", async () => {
    const t0 = holdClock();
    const connector = fakeConnector(() => 503);
    const { runId, sessionKey } = await say("outcome-alarm-failed", "anyone?");
    expect(await waitRun(runId)).toMatchObject({ status: "ok" });
    expect(await backlogOf(sessionKey)).toMatchObject({ deliveries: 1, outcomes: 1 });
    // Due now: the actor's alarm is set for it, before the retry's backoff.
    const at = await advanceToAlarm(sessionKey);
    expect(at).toBeLessThanOrEqual(t0);
    expect(await deliveryStatus(runId)).toBe("retrying");
    expect(connector.attempts()).toBe(1);
    connector.restore();
  });
});
