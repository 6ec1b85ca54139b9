/**
 * The actor's journal of records written behind a connector's ack (session/records.ts): a
 * record D1 refuses again and again is dead-lettered with its cause, the operator sees it, and
 * nothing else of the session waits for it; after a restart, nothing is admitted before the
 * records the previous instance left are written.
 */
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { SessionActor } from "../../src/session/actor";
import { deferredRecordCodec } from "../../src/session/durable-state";
import { RECORD_MAX_ATTEMPTS } from "../../src/session/records";
import { actor, eventually, fakeConnector, inbound, rpc, waitRun, wrapDatabases } from "./support";

/**
 * The test env with every D1 database refusing each batch holding a write to the `transcripts`
 * table whose values include `marker`, as D1 refuses a row that breaks a constraint; `held()`
 * holds every batch.
 */
function refusingD1(marker: string, held: () => boolean = () => false) {
  const refused = new WeakSet<object>();
  const tagged = (sql: string, stmt: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(stmt, {
      get(target, prop) {
        if (prop === "bind") {
          return (...args: unknown[]) => {
            const bound = target.bind(...args);
            if (
              /insert into "transcripts"/i.test(sql) &&
              args.some((v) => typeof v === "string" && v.includes(marker))
            )
              refused.add(bound);
            return bound;
          };
        }
        const value = Reflect.get(target, prop);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  return wrapDatabases(
    env,
    (db) =>
      new Proxy(db, {
        get(target, prop) {
          if (prop === "prepare") return (sql: string) => tagged(sql, target.prepare(sql));
          if (prop === "batch") {
            return async (stmts: D1PreparedStatement[]) => {
              while (held()) await new Promise((r) => setTimeout(r, 5));
              if (stmts.some((s) => refused.has(s)))
                throw new Error("D1_ERROR: CHECK constraint failed: transcripts (the row is refused)");
              return target.batch(stmts);
            };
          }
          const value = Reflect.get(target, prop);
          return typeof value === "function" ? value.bind(target) : value;
        },
      }),
  );
}

async function rewire(key: string, rewired: Env): Promise<void> {
  await runInDurableObject(actor(key), (instance: SessionActor) => {
    (instance as unknown as { env: Env }).env = rewired;
  });
}

function journalRows(key: string): Promise<number> {
  return runInDurableObject(
    actor(key),
    (_i, state) => state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM d1_pending`).one().n,
  );
}

function queuedRunIds(key: string): Promise<string[]> {
  return runInDurableObject(actor(key), (_i, state) =>
    state.storage.sql
      .exec<{ run_id: string }>(`SELECT run_id FROM queue ORDER BY pos`)
      .toArray()
      .map((r) => r.run_id),
  );
}

let n = 0;
async function say(room: string, text: string, messageId = `jr-${room}-${++n}`) {
  const res = await inbound("telegram", { messageId, chatType: "group", groupId: room, from: "u-1", text });
  return {
    status: res.status,
    body: (await res.json()) as { runId: string; status: string; sessionId: string },
  };
}

let connector: ReturnType<typeof fakeConnector> | undefined;
afterEach(() => {
  connector?.restore();
  connector = undefined;
});

interface DeadRecord {
  runId: string;
  sessionKey: string;
  error: string;
  attempts: number;
  body: string;
}

describe("a deferred record D1 refuses forever", () => {
  it("is dead-lettered with its cause after RECORD_MAX_ATTEMPTS; the session and its reads go on", async () => {
    connector = fakeConnector();
    const room = "jr-poison";
    const key = `agent:main:telegram:group:${room}`;
    // The session's transcript row (written with its first run) names the room.
    await rewire(key, refusingD1(room));

    const first = await say(room, "hello", "poison-1");
    expect(first.status).toBe(202);
    // The run itself goes on and its reply is delivered: the refused row holds up nothing.
    expect((await waitRun(first.body.runId)).status).toBe("ok");
    await eventually(async () => connector!.delivered.some((d) => d.body.sessionKey === key));
    // What D1 takes of the refused record landed in order: the run and its end are recorded.
    expect(await rpc("runs.get", { runId: first.body.runId })).toMatchObject({
      status: 200,
      payload: { status: "ok", reply: "echo: hello" },
    });
    expect(await journalRows(key)).toBe(1);

    // A command that reads D1 after writing the journal (`/stop` lists the session's
    // sub-agents) is answered, not failed, while the row is refused.
    const stop = await say(room, "/stop");
    expect(stop).toMatchObject({ status: 202, body: { status: "command" } });

    // Every write of the actor tries the row again (a `/stop` writes the entry, then reads):
    // D1 refuses it each time, until it is dead-lettered (the journal's timer counts attempts
    // too, so it may come sooner).
    let dead: DeadRecord | undefined;
    for (let i = 0; i < RECORD_MAX_ATTEMPTS && !dead; i++) {
      expect((await say(room, "/stop")).status).toBe(202);
      const listed = await rpc<{ records: DeadRecord[] }>("records.dead", {});
      dead = listed.payload.records.find((r) => r.runId === first.body.runId);
    }
    expect(dead).toMatchObject({
      sessionKey: key,
      error: expect.stringContaining("CHECK constraint failed: transcripts"),
      attempts: RECORD_MAX_ATTEMPTS,
    });
    expect(deferredRecordCodec.decode(dead!.body)).toMatchObject({ run: { runId: first.body.runId } });
    expect(await journalRows(key)).toBe(0);
    expect((await rpc<{ deadRecords: number }>("status")).payload.deadRecords).toBeGreaterThanOrEqual(1);

    // The session goes on.
    const next = await say(room, "still here?");
    expect((await waitRun(next.body.runId)).status).toBe("ok");
    const history = await rpc<{ messages: Array<{ role: string }> }>("chat.history", { sessionKey: key });
    expect(history.payload.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
  });
});

describe("a deferred record this version cannot read", () => {
  it("is dead-lettered as stored, and the actor's records go on", async () => {
    const room = "journal-unreadable";
    const key = `agent:main:telegram:group:${room}`;
    const warm = await say(room, "warm up");
    expect((await waitRun(warm.body.runId)).status).toBe("ok");
    // A record a newer deploy left (a rollback followed), and one that is damaged.
    const newer = JSON.stringify({ _v: 9, shape: "of the future" });
    await runInDurableObject(actor(key), (_i, state) => {
      state.storage.sql.exec(`INSERT INTO d1_pending (body) VALUES (?), (?)`, newer, "{not json");
    });
    await abortAllDurableObjects();

    const next = await say(room, "still writing?");
    expect((await waitRun(next.body.runId)).status).toBe("ok");
    expect(await journalRows(key)).toBe(0);
    const listed = await rpc<{ records: DeadRecord[] }>("records.dead", { limit: 200 });
    const bodies = listed.payload.records.filter((r) => r.runId.startsWith("unreadable:")).map((r) => r.body);
    expect(bodies).toEqual(expect.arrayContaining([newer, "{not json"]));
    const history = await rpc<{ messages: Array<{ role: string }> }>("chat.history", { sessionKey: key });
    expect(history.payload.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
  });
});

describe("after a restart", () => {
  it("admits nothing before the records the previous instance left are written", async () => {
    connector = fakeConnector();
    const room = "jr-restart";
    const key = `agent:main:telegram:group:${room}`;
    const warm = await say(room, "warm up");
    expect((await waitRun(warm.body.runId)).status).toBe("ok");

    // The first instance journals a message and dies before any write carries it.
    let hold = true;
    await rewire(
      key,
      refusingD1("never", () => hold),
    );
    const left = await say(room, "left behind");
    expect(left.status).toBe(202);
    expect(await journalRows(key)).toBe(1);
    await abortAllDurableObjects();
    hold = false;

    // The new instance's D1 writes are held: its first contact must write the journal first.
    let held = true;
    let reached = false;
    await rewire(
      key,
      refusingD1("never", () => {
        reached = true;
        return held;
      }),
    );
    const a = say(room, "first after the restart");
    const b = say(room, "second after the restart");
    // The leftover record's write has reached D1 (held there).
    await eventually(async () => reached);
    // Neither is admitted while the leftover record is on its way to D1.
    const queued = await queuedRunIds(key);
    expect(queued).toEqual([left.body.runId]);
    held = false;
    const [ra, rb] = await Promise.all([a, b]);
    expect([ra.status, rb.status]).toEqual([202, 202]);
    expect(await journalRows(key)).toBeLessThanOrEqual(2);
    await runDurableObjectAlarm(actor(key));
    for (const runId of [left.body.runId, ra.body.runId, rb.body.runId]) {
      expect((await waitRun(runId)).status).toBe("ok");
    }
    const history = await rpc<{ messages: Array<{ role: string; content: Array<{ text?: string }> }> }>(
      "chat.history",
      { sessionKey: key },
    );
    const users = history.payload.messages.filter((m) => m.role === "user").map((m) => m.content[0]?.text);
    expect(users.slice(0, 2)).toEqual(["warm up", "left behind"]);
    expect(users).toHaveLength(4);
  });
});
