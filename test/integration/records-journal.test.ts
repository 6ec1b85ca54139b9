/**
 * The journal an earlier version of the actor kept (d1_pending: a connector's accepted message,
 * a run's start, a busy session's finalize, written behind): this version writes nothing to it,
 * and writes what an instance of the earlier version left at its first contact, before it
 * admits anything; a row no version can read is dead-lettered as stored.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { SessionRow } from "../../src/db/queries";
import { runIdFor } from "../../src/keys/run-id";
import { deferredRecordCodec } from "../../src/session/storage/documents";
import { actor, inbound, rpc, waitRun } from "./support";

function journalRows(key: string): Promise<number> {
  return runInDurableObject(
    actor(key),
    (_i, state) => state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM d1_pending`).one().n,
  );
}

let n = 0;
async function say(room: string, text: string) {
  const res = await inbound("telegram", {
    messageId: `jr-${room}-${++n}`,
    chatType: "group",
    groupId: room,
    from: "u-1",
    text,
  });
  return (await res.json()) as { runId: string; status: string; sessionId: string };
}

interface DeadRecord {
  runId: string;
  body: string;
}

describe("a journal an earlier version left", () => {
  it("is written at the next contact, its unreadable rows dead-lettered, before anything is admitted", async () => {
    const room = "journal-leftover";
    const key = `agent:main:telegram:group:${room}`;
    const warm = await say(room, "warm up");
    expect((await waitRun(warm.runId)).status).toBe("ok");
    const entry = (await actor(key).getEntry(key)) as unknown as SessionRow;
    const at = Date.now();
    const leftRunId = await runIdFor(key, "left behind");
    // A busy session's finalize the earlier version wrote behind, and never carried.
    const finished = deferredRecordCodec.encode({
      kind: "finished",
      entry: { ...entry, updatedAt: at },
      run: {
        runId: leftRunId,
        sessionKey: key,
        sessionId: entry.sessionId,
        trigger: "inbound",
        status: "ok",
        createdAt: at,
        startedAt: at,
        endedAt: at,
        reply: "from before the deploy",
      },
      starting: [
        {
          id: `${leftRunId}:u0`,
          role: "user",
          content: [{ type: "text", text: "left behind" }],
          timestamp: at,
          runId: leftRunId,
        },
        {
          id: `${leftRunId}:s1:a`,
          role: "assistant",
          content: [{ type: "text", text: "from before the deploy" }],
          timestamp: at,
          runId: leftRunId,
        },
      ],
    });
    // A record a newer deploy left (a rollback followed), and one that is damaged.
    const newer = JSON.stringify({ _v: 9, shape: "of the future" });
    await runInDurableObject(actor(key), (_i, state) => {
      state.storage.sql.exec(
        `INSERT INTO d1_pending (body) VALUES (?), (?), (?)`,
        finished,
        newer,
        "{not json",
      );
    });
    await abortAllDurableObjects();

    const next = await say(room, "still writing?");
    expect((await waitRun(next.runId)).status).toBe("ok");
    expect(await journalRows(key)).toBe(0);
    expect((await rpc("runs.get", { runId: leftRunId })).payload).toMatchObject({
      status: "ok",
      reply: "from before the deploy",
    });
    const listed = await rpc<{ records: DeadRecord[] }>("records.dead", { limit: 200 });
    const bodies = listed.payload.records.filter((r) => r.runId.startsWith("unreadable:")).map((r) => r.body);
    expect(bodies).toEqual(expect.arrayContaining([newer, "{not json"]));
    // The leftover messages landed before the message admitted after them.
    const history = await rpc<{ messages: Array<{ role: string; content: Array<{ text?: string }> }> }>(
      "chat.history",
      { sessionKey: key },
    );
    expect(history.payload.messages.map((m) => m.content[0]?.text)).toEqual([
      "warm up",
      "echo: warm up",
      "left behind",
      "from before the deploy",
      "still writing?",
      "echo: still writing?",
    ]);
  });
});
