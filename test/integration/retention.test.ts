import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { SessionActor } from "../../src/session/actor";
import { actor, dm, fakeConnector, inbound, waitRun } from "./support";

const DAY = 24 * 3_600_000;

describe("run id retention in a SessionActor", () => {
  it("forgets run ids older than 30 days on an alarm, at most once an hour", async () => {
    const connector = fakeConnector();
    const from = "retention-user";
    const ack = (await (await inbound("telegram", dm("hello", { from }))).json()) as {
      runId: string;
      sessionKey: string;
    };
    await waitRun(ack.runId);
    const stub = actor(ack.sessionKey);
    const ids = (instance: SessionActor) => {
      const sql = (instance as unknown as { ctx: DurableObjectState }).ctx.storage.sql;
      return sql
        .exec<{ run_id: string }>(`SELECT run_id FROM run_ids WHERE run_id LIKE 'r-%' ORDER BY run_id`)
        .toArray()
        .map((r) => r.run_id);
    };

    await runInDurableObject(stub, async (instance: SessionActor) => {
      const sql = (instance as unknown as { ctx: DurableObjectState }).ctx.storage.sql;
      const now = Date.now();
      sql.exec(`INSERT INTO run_ids (run_id, result, at) VALUES ('r-old', '{}', ?)`, now - 31 * DAY);
      sql.exec(`INSERT INTO run_ids (run_id, result, at) VALUES ('r-recent', '{}', ?)`, now - DAY);
      const kv = (instance as unknown as { store: { kvSet(k: string, v: string): void } }).store;
      kv.kvSet("swept_at", "0");
      await instance.alarm();
      expect(ids(instance)).toEqual(["r-recent"]);

      // Within the hour the next alarm does not scan again.
      sql.exec(`INSERT INTO run_ids (run_id, result, at) VALUES ('r-old2', '{}', ?)`, now - 31 * DAY);
      await instance.alarm();
      expect(ids(instance)).toEqual(["r-old2", "r-recent"]);

      // An hour later it does.
      kv.kvSet("swept_at", String(now - 3_600_001));
      await instance.alarm();
      expect(ids(instance)).toEqual(["r-recent"]);
    });
    connector.restore();
  });
});
