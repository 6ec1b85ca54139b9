import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load";
import { applyRetention } from "../../src/cron/retention";
import { runScheduled } from "../../src/cron/scheduled";
import { databaseOfKey, homeDatabase } from "../../src/db/placement";
import { database, recordTranscript } from "../../src/db/queries";
import * as schema from "../../src/db/schema";
import {
  exportTranscript,
  seedDeliveries,
  seedMessages,
  seedSessions,
  sessionRow,
  transcriptMessages,
} from "./rpc-support";
import { configText, keysInEachDatabase, selectEach } from "./support";

const DAY = 24 * 3_600_000;

/** A transcript's message ids, found in whichever database holds them. */
async function messageIds(sessionId: string): Promise<string[]> {
  const rows = await selectEach<{ id: string }>(
    "SELECT id FROM messages WHERE session_id = ? ORDER BY seq",
    sessionId,
  );
  return rows.map((r) => r.id);
}

async function exists(table: string, column: string, value: string): Promise<boolean> {
  return (await selectEach(`SELECT 1 FROM ${table} WHERE ${column} = ?`, value)).length > 0;
}

function run(runId: string, status: string, createdAt: number): typeof schema.runs.$inferInsert {
  return { runId, sessionKey: "agent:ret:main", sessionId: "s", trigger: "rpc", status, createdAt };
}

function delivery(
  deliveryId: string,
  status: string,
  createdAt: number,
): typeof schema.deliveries.$inferInsert {
  return {
    deliveryId,
    kind: "reply",
    sessionKey: "agent:ret:main",
    channel: "telegram",
    accountId: "default",
    to: "x",
    text: "t",
    status,
    createdAt,
    updatedAt: createdAt,
  };
}

describe("transcript retention (session.retention.days)", () => {
  it("deletes what is older than the cutoff and keeps what is newer or still owed", async () => {
    const now = Date.now();
    // A transcript's row is as old as its first message (its first run's): the current one
    // began 8 days ago.
    const [current] = await seedSessions([
      sessionRow({ key: "agent:ret:main", agentId: "ret", kind: "main", createdAt: now - 8 * DAY - 1 }),
    ]);
    const oldSessionId = crypto.randomUUID();
    await recordTranscript(env, oldSessionId, "agent:ret:main", now - 10 * DAY);
    // The old sessionId: only old messages. The current one: old and recent ones.
    await seedMessages(oldSessionId, transcriptMessages("gone", 4, { start: now - 9 * DAY }));
    await seedMessages(current!.sessionId, [
      ...transcriptMessages("old", 3, { start: now - 8 * DAY }),
      ...transcriptMessages("new", 2, { start: now - DAY / 2 }),
    ]);
    for (const r of [
      run("r-old-ok", "ok", now - 8 * DAY),
      run("r-old-queued", "queued", now - 8 * DAY),
      run("r-new-ok", "ok", now - DAY / 2),
    ])
      await database(databaseOfKey(env, r.sessionKey)).insert(schema.runs).values(r).run();
    await seedDeliveries([
      delivery("d-old-delivered", "delivered", now - 8 * DAY),
      delivery("d-old-dead", "dead", now - 8 * DAY),
      delivery("d-old-retrying", "retrying", now - 8 * DAY),
      delivery("d-new", "delivered", now - DAY / 2),
    ]);

    const config = { session: { retention: { days: 7 } } };
    await runScheduled({ scheduledTime: now }, { ...env, SWITCHBOARD_CONFIG: configText(config) });

    expect(await messageIds(oldSessionId)).toEqual([]);
    expect(await messageIds(current!.sessionId)).toEqual(["new-1", "new-2"]);
    // The emptied old transcript is gone; the current one stays exportable.
    expect((await exportTranscript(`${oldSessionId}.jsonl`)).status).toBe(404);
    expect((await exportTranscript(`${current!.sessionId}.jsonl`)).status).toBe(200);
    expect(await exists("runs", "run_id", "r-old-ok")).toBe(false);
    expect(await exists("runs", "run_id", "r-old-queued")).toBe(true);
    expect(await exists("runs", "run_id", "r-new-ok")).toBe(true);
    expect(await exists("deliveries", "delivery_id", "d-old-delivered")).toBe(false);
    expect(await exists("deliveries", "delivery_id", "d-old-dead")).toBe(false);
    expect(await exists("deliveries", "delivery_id", "d-old-retrying")).toBe(true);
    expect(await exists("deliveries", "delivery_id", "d-new")).toBe(true);

    const status = await runStatus();
    expect(status.retention?.lastWork).toMatchObject({ messages: 7, transcripts: 1, runs: 1, deliveries: 2 });
  });

  it("deletes a transcript's oldest messages first, in bounded chunks, and says when more is left", async () => {
    const now = Date.now();
    const sessionId = crypto.randomUUID();
    await recordTranscript(env, sessionId, "agent:ret:chunks", now - 30 * DAY);
    await seedMessages(sessionId, transcriptMessages("c", 7, { start: now - 30 * DAY }));
    const config = parseConfig(configText({ session: { retention: { days: 1 } } }));
    const first = await applyRetention(env, config, now, { chunk: 2, messageChunks: 2 });
    expect(first).toMatchObject({ messages: 4, more: true });
    expect(await messageIds(sessionId)).toEqual(["c-5", "c-6", "c-7"]);
    const second = await applyRetention(env, config, now, { chunk: 2, messageChunks: 2 });
    expect(second).toMatchObject({ messages: 3, more: false });
  });

  it("deletes in every database, each one's work bounded by the chunk (SPEC §19)", async () => {
    const now = Date.now();
    const keys = keysInEachDatabase("agent:ret-spread:dm:p");
    const sessionIds = keys.map(() => crypto.randomUUID());
    for (const [i, key] of keys.entries()) {
      await recordTranscript(env, sessionIds[i]!, key, now - 30 * DAY);
      await seedMessages(sessionIds[i]!, transcriptMessages(`spread${i}`, 3, { start: now - 30 * DAY }));
    }
    const config = parseConfig(configText({ session: { retention: { days: 1 } } }));
    // Each database deletes up to the chunk: 2 of its 3 messages, so more is left.
    const first = await applyRetention(env, config, now, { chunk: 2, messageChunks: 1 });
    expect(first).toMatchObject({ messages: 2 * keys.length, transcripts: 0, more: true });
    for (const [i, id] of sessionIds.entries()) expect(await messageIds(id)).toEqual([`spread${i}-3`]);
    // Then the last one of each, and the transcripts left empty (no session names them).
    const second = await applyRetention(env, config, now, { chunk: 2, messageChunks: 1 });
    expect(second).toMatchObject({ messages: keys.length, transcripts: keys.length, more: false });
    for (const id of sessionIds) {
      expect(await messageIds(id)).toEqual([]);
      expect(await exists("transcripts", "session_id", id)).toBe(false);
    }
  });

  it("does nothing without session.retention.days", async () => {
    expect(await applyRetention(env, parseConfig("{}"), Date.now())).toBeUndefined();
  });
});

async function runStatus() {
  const rows = await database(homeDatabase(env)).select().from(schema.maintenance).all();
  return Object.fromEntries(rows.map((r) => [r.task, r])) as Record<
    string,
    { lastWork: unknown } | undefined
  >;
}
