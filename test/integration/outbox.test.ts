/**
 * The delivery outbox over a real Durable Object's SQLite: its in-memory count of owed rows stays
 * exact through adds, repeats and settled attempts, so an alarm with nothing owed costs no query
 * and an owed delivery is never skipped.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load";
import type { DeliveryPayload } from "../../src/delivery/deliver";
import { DeliveryOutbox } from "../../src/delivery/outbox";
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

/** The storage with every statement counted. */
function counted(sql: SqlStorage) {
  const seen: string[] = [];
  const wrapped = new Proxy(sql, {
    get(target, prop, receiver) {
      if (prop === "exec") {
        return (query: string, ...bindings: unknown[]) => {
          seen.push(query.trim().split(/\s+/)[0] ?? "");
          return target.exec(query, ...(bindings as SqlStorageValue[]));
        };
      }
      return Reflect.get(target, prop, receiver);
    },
  });
  return { sql: wrapped, seen };
}

describe("DeliveryOutbox", () => {
  it("keeps its count exact: nothing owed costs no query, and an owed row is dispatched", async () => {
    const connector = fakeConnector(() => 200);
    await runInDurableObject(
      actor("agent:main:telegram:dm:outbox"),
      async (_i: unknown, state: DurableObjectState) => {
        state.storage.sql.exec(DeliveryOutbox.DDL);
        const { sql, seen } = counted(state.storage.sql);
        const outbox = new DeliveryOutbox(
          sql,
          () => env,
          () => loadConfig(env),
          async () => {},
          () => {},
        );
        // Counted once, on first use; kept in memory from then on.
        expect(outbox.nextDue()).toBeUndefined();
        expect(seen).toEqual(["SELECT"]);
        for (let n = 0; n < 5; n++) {
          expect((await outbox.addAndAttempt(payload(n), 5_000))?.status).toBe("delivered");
          // A repeat of a settled delivery adds it again (it is owed again), then settles it.
          if (n === 2) expect((await outbox.addAndAttempt(payload(n), 5_000))?.status).toBe("delivered");
        }
        expect(state.storage.sql.exec("SELECT COUNT(*) AS n FROM outbox").one().n).toBe(0);

        seen.length = 0;
        outbox.dispatch();
        expect(outbox.nextDue()).toBeUndefined();
        expect(seen).toEqual([]);

        // Owed again: found by the next dispatch, and settled by it.
        outbox.add(payload(9));
        expect(outbox.nextDue()).toBeTypeOf("number");
        outbox.dispatch();
        await expect.poll(() => connector.delivered.length, { timeout: 5_000 }).toBe(7);
        await expect.poll(() => outbox.nextDue(), { timeout: 5_000 }).toBeUndefined();
      },
    );
    expect(connector.delivered.map((d) => d.body.text)).toEqual([
      "reply 0",
      "reply 1",
      "reply 2",
      "reply 2",
      "reply 3",
      "reply 4",
      "reply 9",
    ]);
    connector.restore();
  });
});
