/**
 * What one message costs a SessionActor in DO SQLite: a connector's message to an existing idle
 * session, from the enqueue to the run leaving the queue with its reply delivered and its
 * records in D1. The statements bound guards the per-message CPU (each statement costs tens of
 * microseconds of the actor's thread); the rows bound guards the bill (Cloudflare bills each
 * row a Durable Object writes, index rows included; `npm run bench` row 14 counts the whole).
 */
import { runInDurableObject } from "cloudflare:test";
import { afterEach, expect, it } from "vitest";
import type { SessionActor } from "../../src/session/actor";
import { actor, actorSettled, dm, eventually, fakeConnector, inbound, waitRun } from "./support";

/** Statements one message may cost: 18 when this was written (16, and the signal log's two events: SPEC §20). */
const MAX_STATEMENTS = 18;
/** Rows one message may write in the actor's SQLite, alarms aside (14 when this was written: 12, and the signal log's 2). */
const MAX_ROWS = 14;

let restore: (() => void) | undefined;
afterEach(() => restore?.());

it(`runs a message to an existing idle session in at most ${MAX_STATEMENTS} DO SQLite statements and ${MAX_ROWS} rows written`, async () => {
  const connector = fakeConnector();
  restore = connector.restore;
  const group = "statements";
  const key = `agent:main:telegram:group:${group}`;
  const send = async (text: string) =>
    (await (await inbound("telegram", dm(text, { chatType: "group", groupId: group }))).json()) as {
      runId: string;
    };
  await waitRun((await send("warm up")).runId);
  await actorSettled(key);

  const statements: string[] = [];
  const cursors: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];
  let recording = false;
  await runInDurableObject(actor(key), (instance: SessionActor) => {
    const sql = (instance as unknown as { ctx: DurableObjectState }).ctx.storage.sql;
    const exec = sql.exec.bind(sql);
    Object.defineProperty(sql, "exec", {
      configurable: true,
      value: (query: string, ...params: unknown[]) => {
        const cursor = exec(query, ...params);
        if (recording) {
          statements.push(query.replace(/\s+/g, " ").trim());
          cursors.push(cursor);
        }
        return cursor;
      },
    });
  });
  for (const text of ["first", "second"]) {
    statements.length = 0;
    cursors.length = 0;
    recording = true;
    const ack = await send(text);
    expect(await waitRun(ack.runId)).toMatchObject({ status: "ok" });
    await eventually(async () => connector.delivered.some((d) => d.body.text === `echo: ${text}`));
    recording = false;
    await actorSettled(key);
    expect(statements.length, statements.join("\n")).toBeLessThanOrEqual(MAX_STATEMENTS);
    const rows = cursors.map((c, i) => `${c.rowsWritten} ${statements[i]}`);
    const written = cursors.reduce((n, c) => n + c.rowsWritten, 0);
    expect(written, rows.join("\n")).toBeLessThanOrEqual(MAX_ROWS);
    // The run's own work is all there: queued, checkpointed, delivered, removed, recorded.
    for (const kind of [
      "INSERT INTO queue",
      "UPDATE queue SET state = 'running'",
      "INTO outbox",
      "DELETE FROM queue",
      "INTO run_ids",
    ]) {
      expect(
        statements.some((s) => s.includes(kind)),
        kind,
      ).toBe(true);
    }
  }
});
