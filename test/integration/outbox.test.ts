/**
 * The delivery outbox over a real Durable Object's SQLite: through adds, repeats, settled
 * attempts and recorded outcomes, an owed delivery is never skipped and a settled one never
 * posted again; each attempt's outcome is kept until it is recorded, a failed one due at once.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load";
import type { DeliveryPayload } from "../../src/delivery/deliver";
import { DeliveryOutbox, OUTCOME_RECORD_DELAY_MS } from "../../src/delivery/outbox";
import { migrate } from "../../src/session/storage/schema";
import { actor, fakeConnector } from "./support";

function payload(n: number): DeliveryPayload {
  return {
    deliveryId: `outbox-test-${n}:reply`,
    kind: "reply",
    sessionKey: "agent:main:telegram:dm:outbox",
    channel: "telegram",
    accountId: "default",
    to: "outbox",
    text: `reply ${n}`,
  };
}

/** An outbox over the actor's migrated SQLite, with the test env and config. */
function outboxIn(state: DurableObjectState): DeliveryOutbox {
  migrate(state.storage.sql);
  return new DeliveryOutbox(
    state.storage.sql,
    () => env,
    () => loadConfig(env),
    () => {},
  );
}

describe("DeliveryOutbox", () => {
  it("attempts what is owed, posts a settled delivery once, and keeps each outcome until it is recorded", async () => {
    const connector = fakeConnector(() => 200);
    await runInDurableObject(
      actor("agent:main:telegram:dm:outbox"),
      async (_i: unknown, state: DurableObjectState) => {
        const outbox = outboxIn(state);
        expect(outbox.nextDue()).toBeUndefined();
        for (let n = 0; n < 5; n++) {
          expect((await outbox.addAndAttempt(payload(n), 5_000))?.status).toBe("delivered");
          // A repeat while its outcome is kept answers that outcome and posts nothing.
          if (n === 2) expect((await outbox.addAndAttempt(payload(n), 5_000))?.status).toBe("delivered");
        }
        expect(connector.delivered).toHaveLength(5);
        // Each outcome stays until D1 shows it, due to be written alone a while later.
        const kept = outbox.unrecorded();
        expect(kept.map((o) => [o.deliveryId, o.state.status])).toEqual(
          [0, 1, 2, 3, 4].map((n) => [`outbox-test-${n}:reply`, "delivered"]),
        );
        const due = outbox.recordDue() ?? 0;
        expect(due).toBeGreaterThan(Date.now() + OUTCOME_RECORD_DELAY_MS - 5_000);
        expect(outbox.nextDue()).toBe(due);
        // Nothing is owed: dispatching starts nothing.
        outbox.dispatch();
        expect(connector.delivered).toHaveLength(5);
        outbox.recorded(kept);
        expect(state.storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n).toBe(0);

        outbox.dispatch();
        expect(outbox.nextDue()).toBeUndefined();
        expect(outbox.unrecorded()).toEqual([]);

        // Owed again: found by the next dispatch, and settled by it.
        outbox.add(payload(9));
        expect(outbox.nextDue()).toBeTypeOf("number");
        outbox.dispatch();
        await expect.poll(() => connector.delivered.length, { timeout: 5_000 }).toBe(6);
        await expect.poll(() => outbox.unrecorded().length, { timeout: 5_000 }).toBe(1);
      },
    );
    expect(connector.delivered.map((d) => d.body.text)).toEqual([
      "reply 0",
      "reply 1",
      "reply 2",
      "reply 3",
      "reply 4",
      "reply 9",
    ]);
    connector.restore();
  });

  it("records a failed attempt's outcome at once, and only the newest of a row's outcomes", async () => {
    let answer = 503;
    const connector = fakeConnector(() => answer);
    await runInDurableObject(
      actor("agent:main:telegram:dm:outbox-failed"),
      async (_i: unknown, state: DurableObjectState) => {
        const outbox = outboxIn(state);
        const first = await outbox.addAndAttempt(payload(1), 5_000);
        expect(first?.status).toBe("retrying");
        // A delivery in trouble is due to be recorded now, not after the delay.
        expect(outbox.recordDue()).toBeLessThanOrEqual(Date.now());
        const read = outbox.unrecorded();
        expect(read.map((o) => o.state.status)).toEqual(["retrying"]);
        // The retry delivers before the first outcome is recorded: recording what was read
        // leaves the newer outcome in place.
        answer = 200;
        // The retry comes due (as the next instance after a restart would find it).
        state.storage.sql.exec(`UPDATE outbox SET next_at = 0`);
        const next = new DeliveryOutbox(
          state.storage.sql,
          () => env,
          () => loadConfig(env),
          () => {},
        );
        next.dispatch();
        await expect.poll(() => next.unrecorded()[0]?.state.status, { timeout: 3_000 }).toBe("delivered");
        next.recorded(read);
        expect(next.unrecorded().map((o) => o.state.status)).toEqual(["delivered"]);
        next.recorded(next.unrecorded());
        expect(next.nextDue()).toBeUndefined();
      },
    );
    expect(connector.delivered).toHaveLength(1);
    connector.restore();
  });
});
