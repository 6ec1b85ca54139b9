/**
 * "Nothing lost" (SPEC §1, §14, §16): serialized FIFO runs under a burst, delivery retries with
 * backoff while the connector is down, dead deliveries, and a gateway killed mid-run.
 *
 * One gateway for the file (the restart test replaces it, so it runs last). The agent `main`
 * uses the echo model so bursts are fast; the agent `slow` uses the scripted model.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { FakeConnector } from "./support/fake-connector.ts";
import type { FakeModel } from "./support/fake-model.ts";
import { directMessage, type Gateway, settled, sleep, startGateway, waitFor } from "./support/gateway.ts";
import { startWorld, type World } from "./support/world.ts";

const MAX_ATTEMPTS = 5;
const BASE_DELAY_MS = 200;
const MAX_DELAY_MS = 1000;

interface DeliveryRow {
  deliveryId: string;
  kind: string;
  sessionKey: string;
  status: "pending" | "retrying" | "delivered" | "dead";
  attempts: number;
  lastError?: string;
  nextAttemptAt?: number;
  deliveredAt?: number;
  text: string;
}

interface RunRow {
  runId: string;
  status: string;
  createdAt: number;
  startedAt: number;
  endedAt: number;
  reply?: string;
}

let world: World;
let gw: Gateway;
let connector: FakeConnector;
let model: FakeModel;

beforeAll(async () => {
  world = await startWorld({
    retry: { attempts: 3, baseDelayMs: 50 },
    agents: {
      defaults: { model: "echo/echo" },
      list: [
        { id: "main", default: true },
        { id: "slow", model: "fake/test-model" },
      ],
    },
    delivery: { maxAttempts: MAX_ATTEMPTS, baseDelayMs: BASE_DELAY_MS, maxDelayMs: MAX_DELAY_MS },
  });
  ({ gw, connector, model } = world);
});

afterAll(async () => {
  await world?.dispose();
});

async function deliveriesOf(sessionKey: string): Promise<DeliveryRow[]> {
  const page = await gw.call<{ deliveries: DeliveryRow[] }>("deliveries.list", { sessionKey, limit: 200 });
  return page.deliveries;
}

describe("a burst of 50 messages to one session", () => {
  const peer = "300000001";
  const key = `agent:main:telegram:dm:${peer}`;
  const N = 50;

  it("answers all of them, one run at a time, in the order they were acknowledged", async () => {
    const started = performance.now();
    const acks = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        gw.inbound("telegram", directMessage({ messageId: `burst-${i}`, from: peer, text: `burst ${i}` })),
      ),
    );
    const ackMs = acks.map((a) => a.ms).sort((a, b) => a - b);
    for (const ack of acks) {
      expect(ack.status).toBe(202);
      expect(ack.body).toMatchObject({ ok: true, sessionKey: key, status: "queued" });
    }
    expect(new Set(acks.map((a) => a.body.runId)).size).toBe(N);

    await waitFor(() => connector.deliveriesFor({ sessionKey: key }).length >= N, 90_000, {
      intervalMs: 100,
      what: `${N} deliveries`,
    });
    const allAnsweredMs = performance.now() - started;
    console.log(
      `burst of ${N}: ack p50 ${ackMs[N / 2]?.toFixed(0)} ms, max ${ackMs[N - 1]?.toFixed(0)} ms; all answered after ${allAnsweredMs.toFixed(0)} ms`,
    );

    // Every message got exactly its own answer, once.
    const delivered = connector.deliveriesFor({ sessionKey: key });
    expect(delivered).toHaveLength(N);
    expect(new Set(delivered.map((d) => d.body?.deliveryId)).size).toBe(N);
    for (const d of delivered) {
      const i = Number(d.body?.replyToMessageId?.replace("burst-", ""));
      expect(d.body?.text).toBe(`echo: burst ${i}`);
      expect(d.signatureCheck).toBe("ok");
    }

    // Replies go out before their runs' records reach D1: wait for the runs' ends.
    for (const a of acks) await gw.call("agent.wait", { runId: a.body.runId, timeoutMs: 10_000 });
    const runs = await Promise.all(
      acks.map((a) => gw.call<RunRow>("runs.get", { runId: a.body.runId as string })),
    );
    for (const run of runs) expect(run.status).toBe("ok");
    const byStart = [...runs].sort((a, b) => a.startedAt - b.startedAt || a.endedAt - b.endedAt);
    for (let i = 1; i < byStart.length; i++) {
      const prev = byStart[i - 1] as RunRow;
      const next = byStart[i] as RunRow;
      // Never overlapping: a run starts only after the previous one ended.
      expect(next.startedAt, `run ${i} started before run ${i - 1} ended`).toBeGreaterThanOrEqual(
        prev.endedAt,
      );
      // FIFO: runs start in the order the gateway accepted (created) them.
      expect(next.createdAt, `run ${i} was accepted before run ${i - 1}`).toBeGreaterThanOrEqual(
        prev.createdAt,
      );
    }

    // The transcript agrees: 50 user/assistant pairs, each answer right after its question.
    const history = await gw.call<{ messages: Array<{ role: string; runId: string }>; hasMore: boolean }>(
      "chat.history",
      { sessionKey: key, limit: 1000 },
    );
    expect(history.hasMore).toBe(false);
    expect(history.messages).toHaveLength(2 * N);
    expect(history.messages.map((m) => m.runId)).toEqual(byStart.flatMap((r) => [r.runId, r.runId]));
    expect(history.messages.map((m) => m.role)).toEqual(
      Array.from({ length: N }, () => ["user", "assistant"]).flat(),
    );
  });
});

describe("a connector that is down", () => {
  it("gets the reply retried with backoff, shown as retrying, and delivered once it is back", async () => {
    const peer = "300000002";
    const key = `agent:main:telegram:dm:${peer}`;
    connector.down();
    try {
      const ack = await gw.inbound(
        "telegram",
        directMessage({ messageId: "down-1", from: peer, text: "ping" }),
      );
      expect(ack.status).toBe(202);
      const deliveryId = `${ack.body.runId}:reply`;

      const retrying = await waitFor(
        async () => {
          if (connector.attemptsFor({ deliveryId }).length < 2) return undefined;
          return (await deliveriesOf(key)).find(
            (d) => d.deliveryId === deliveryId && d.status === "retrying",
          );
        },
        15_000,
        { what: "a delivery in state retrying after two failed attempts" },
      );
      expect(retrying).toMatchObject({
        kind: "reply",
        text: "echo: ping",
        lastError: "connector answered 503: connector is down",
      });
      expect(retrying.attempts).toBeGreaterThanOrEqual(2);
      expect(retrying.attempts).toBeLessThan(MAX_ATTEMPTS);
      expect(retrying.nextAttemptAt).toBeGreaterThan(Date.now() - 5_000);
      expect(connector.deliveriesFor({ deliveryId })).toHaveLength(0);
    } finally {
      connector.up();
    }

    const delivery = await waitFor(() => connector.deliveriesFor({ sessionKey: key })[0], 15_000, {
      what: "the delivery after the connector came back",
    });
    const attempts = connector.attemptsFor({ sessionKey: key });
    expect(attempts.length).toBeGreaterThan(1);
    expect(attempts.at(-1)).toBe(delivery);
    expect(attempts.slice(0, -1).every((a) => a.status === 503)).toBe(true);
    // Exponential backoff: the wait before attempt n+1 is at least base * 2^(n-1), capped.
    for (let n = 1; n < attempts.length; n++) {
      const gap = (attempts[n]?.at ?? 0) - (attempts[n - 1]?.at ?? 0);
      const expected = Math.min(BASE_DELAY_MS * 2 ** (n - 1), MAX_DELAY_MS);
      expect(gap, `gap before attempt ${n + 1}`).toBeGreaterThanOrEqual(expected - 20);
    }

    const row = await waitFor(
      async () => (await deliveriesOf(key)).find((d) => d.status === "delivered"),
      10_000,
      { what: "deliveries.list showing delivered" },
    );
    expect(row.attempts).toBe(attempts.length);
    expect(row.lastError).toBeUndefined();
    expect(row.deliveredAt).toBeGreaterThan(0);
    // Delivered exactly once: nothing arrives later.
    await settled(gw, key);
    expect(connector.deliveriesFor({ sessionKey: key })).toHaveLength(1);
    expect(connector.attemptsFor({ sessionKey: key })).toHaveLength(attempts.length);
  });

  it("marks the delivery dead after exactly delivery.maxAttempts attempts", async () => {
    const peer = "300000003";
    const key = `agent:main:telegram:dm:${peer}`;
    connector.down();
    try {
      const ack = await gw.inbound(
        "telegram",
        directMessage({ messageId: "dead-1", from: peer, text: "anyone?" }),
      );
      expect(ack.status).toBe(202);
      const deliveryId = `${ack.body.runId}:reply`;
      const dead = await waitFor(
        async () => (await deliveriesOf(key)).find((d) => d.deliveryId === deliveryId && d.status === "dead"),
        30_000,
        { intervalMs: 100, what: "the delivery marked dead" },
      );
      expect(dead).toMatchObject({
        attempts: MAX_ATTEMPTS,
        lastError: "connector answered 503: connector is down",
      });
      expect(dead.nextAttemptAt).toBeUndefined();
      const listedDead = await gw.call<{ deliveries: DeliveryRow[] }>("deliveries.list", { status: "dead" });
      expect(listedDead.deliveries.map((d) => d.deliveryId)).toContain(deliveryId);
    } finally {
      connector.up();
    }
    // Dead is final: no further attempts even with the connector back.
    await settled(gw, key);
    expect(connector.attemptsFor({ sessionKey: key })).toHaveLength(MAX_ATTEMPTS);
    expect(connector.attemptsFor({ sessionKey: key }).every((a) => a.status === 503)).toBe(true);
    expect(connector.deliveriesFor({ sessionKey: key })).toHaveLength(0);
  });
});

describe("a gateway killed mid-run", () => {
  it("resumes the run after a restart: one reply, delivered once, no duplicated transcript rows", async () => {
    const peer = "300000004";
    const key = `agent:slow:telegram:dm:${peer}`;
    const hang = model.hang();
    model.push({ text: "answer after the restart", usage: { prompt: 40, completion: 4 } });

    const ack = await gw.inbound(
      "telegram",
      directMessage({ messageId: "restart-1", from: peer, text: "long question", agentId: "slow" }),
    );
    expect(ack.status).toBe(202);
    expect(ack.body.sessionKey).toBe(key);
    const runId = ack.body.runId as string;

    const hung = await Promise.race([
      hang.started,
      sleep(30_000).then(() => {
        throw new Error("the model never got the first request");
      }),
    ]);
    expect(hung.system).toContain(`- session key: ${key}`);
    // A connector's message reaches D1 within a second of its ack (session.writeBehind): the
    // run is recorded running before the gateway dies.
    const before = await waitFor(
      async () => {
        const run = await gw.call<RunRow>("runs.get", { runId }).catch(() => undefined);
        return run?.status === "running" && run;
      },
      10_000,
      { what: "the run recorded as running" },
    );

    const { persistTo, options } = gw;
    await gw.stop("SIGKILL");
    gw = await startGateway({ ...options, persistTo });
    world.gw = gw; // disposed in afterAll
    // The killed gateway's request is gone; answering it now must change nothing.
    hang.release({ text: "a stale answer nobody is waiting for" });

    const wait = await gw.call<{ status: string; runStatus: string; startedAt: number; endedAt: number }>(
      "agent.wait",
      { runId, timeoutMs: 20_000 },
    );
    expect(wait).toMatchObject({ runId, status: "ok", runStatus: "ok" });
    expect(hung.outcome).toBe("client-closed");

    const delivery = await waitFor(
      () => connector.deliveriesFor({ replyToMessageId: "restart-1" })[0],
      20_000,
      {
        what: "the reply after the restart",
      },
    );
    expect(delivery.body).toMatchObject({
      deliveryId: `${runId}:reply`,
      kind: "reply",
      sessionKey: key,
      to: peer,
      text: "answer after the restart",
    });
    await settled(gw, key);
    expect(connector.attemptsFor({ sessionKey: key })).toHaveLength(1);
    expect(model.requests).toHaveLength(2);

    const run = await gw.call<RunRow>("runs.get", { runId });
    expect(run).toMatchObject({
      status: "ok",
      reply: "answer after the restart",
      startedAt: before.startedAt,
    });
    const history = await gw.call<{ messages: Array<{ role: string; runId: string; content: unknown }> }>(
      "chat.history",
      { sessionKey: key },
    );
    expect(history.messages.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(history.messages.every((m) => m.runId === runId)).toBe(true);
    const sessions = await gw.call<{ sessions: Array<{ key: string; totalTokens: number }> }>(
      "sessions.list",
      {
        agentId: "slow",
      },
    );
    expect(sessions.sessions.map((s) => [s.key, s.totalTokens])).toEqual([[key, 44]]);
  });
});
