import { describe, expect, it } from "vitest";
import { hangingFetch } from "./rpc-support";
import { dm, eventually, fakeConnector, inbound, rpc, waitRun } from "./support";

interface Delivery {
  deliveryId: string;
  status: string;
  attempts: number;
  lastError?: string;
  nextAttemptAt?: number;
}

async function deliveryOf(runId: string): Promise<Delivery | undefined> {
  const list = await rpc<{ deliveries: Delivery[] }>("deliveries.list", {});
  return list.payload.deliveries.find((d) => d.deliveryId.startsWith(runId));
}

// TEST_CONFIG: delivery { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200 }.
describe("delivery outbox", () => {
  it("retries a connector that is down with backoff and delivers once it is back", async () => {
    let down = true;
    const connector = fakeConnector(() => (down ? 503 : 200));
    const ack = (await (await inbound("telegram", dm("are you there?", { from: "patient" }))).json()) as {
      runId: string;
    };
    await waitRun(ack.runId);
    const retrying = await eventually(async () => {
      const d = await deliveryOf(ack.runId);
      return d?.status === "retrying" && d.attempts >= 1 ? d : undefined;
    });
    expect(retrying.lastError).toMatch(/connector answered 503/);
    expect(retrying.nextAttemptAt).toBeGreaterThan(Date.now() - 1000);
    down = false;
    const delivered = await eventually(async () => {
      const d = await deliveryOf(ack.runId);
      return d?.status === "delivered" ? d : undefined;
    });
    expect(delivered.attempts).toBeGreaterThan(1);
    expect(connector.delivered).toHaveLength(1);
    expect(connector.delivered[0]!.body).toMatchObject({
      text: "echo: are you there?",
      deliveryId: `${ack.runId}:reply`,
    });
    connector.restore();
  });

  it("marks a delivery dead after the configured attempts when the connector stays down", async () => {
    const connector = fakeConnector(() => 500);
    const ack = (await (await inbound("telegram", dm("anyone?", { from: "lonely" }))).json()) as {
      runId: string;
    };
    await waitRun(ack.runId);
    const dead = await eventually(async () => {
      const d = await deliveryOf(ack.runId);
      return d?.status === "dead" ? d : undefined;
    });
    expect(dead.attempts).toBe(3);
    expect(dead.lastError).toMatch(/connector answered 500/);
    await new Promise((r) => setTimeout(r, 300));
    expect(connector.attempts()).toBe(3);
    const listed = await rpc<{ deliveries: Delivery[] }>("deliveries.list", { status: "dead" });
    expect(listed.payload.deliveries.map((d) => d.deliveryId)).toContain(dead.deliveryId);
    connector.restore();
  });
});

describe("deliveries.retry", () => {
  it("queues a dead delivery again, delivers it once, and refuses a delivered one", async () => {
    let down = true;
    const connector = fakeConnector(() => (down ? 500 : 200));
    const ack = (await (await inbound("telegram", dm("retry me", { from: "second-chance" }))).json()) as {
      runId: string;
    };
    await waitRun(ack.runId);
    const dead = await eventually(async () => {
      const d = await deliveryOf(ack.runId);
      return d?.status === "dead" ? d : undefined;
    });
    down = false;
    const retried = await rpc("deliveries.retry", { deliveryId: dead.deliveryId });
    expect(retried.status).toBe(200);
    expect(retried.payload).toEqual({ deliveryId: dead.deliveryId, status: "pending", requeued: true });
    const delivered = await eventually(async () => {
      const d = await deliveryOf(ack.runId);
      return d?.status === "delivered" ? d : undefined;
    });
    // A fresh round of attempts: the first one of it succeeded.
    expect(delivered.attempts).toBe(1);
    expect(connector.delivered).toHaveLength(1);
    expect(connector.delivered[0]!.body).toMatchObject({
      deliveryId: dead.deliveryId,
      text: "echo: retry me",
    });

    const again = await rpc("deliveries.retry", { deliveryId: dead.deliveryId });
    expect(again.status).toBe(409);
    expect(again.error?.message).toMatch(/was delivered; only a dead one can be retried/);
    connector.restore();
  });

  it("leaves a delivery that is still owed alone, and names what is wrong with a bad request", async () => {
    const connector = fakeConnector(() => 503);
    const ack = (await (await inbound("telegram", dm("still trying", { from: "owed" }))).json()) as {
      runId: string;
    };
    await waitRun(ack.runId);
    const owed = await eventually(async () => {
      const d = await deliveryOf(ack.runId);
      return d?.status === "retrying" ? d : undefined;
    });
    const retried = await rpc("deliveries.retry", { deliveryId: owed.deliveryId });
    expect(retried.payload).toEqual({ deliveryId: owed.deliveryId, status: "retrying", requeued: false });

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
      for (let i = 0; i < 5; i++) {
        const ack = (await (
          await inbound("telegram", dm(`hello ${i}`, { from: "stalled-chat" }))
        ).json()) as {
          runId: string;
        };
        // Well inside one delivery attempt's timeout (15 s): a run that waited for the
        // connector would not be done.
        const done = await waitRun(ack.runId, 6_000);
        expect(done.status, `message ${i}`).toBe("ok");
        runs.push(ack.runId);
      }
      expect(connector.calls()).toBeGreaterThanOrEqual(1);
      for (const runId of runs) {
        const d = await eventually(async () => deliveryOf(runId));
        expect(["pending", "retrying"]).toContain(d.status);
      }
    } finally {
      connector.restore();
    }
  });
});
