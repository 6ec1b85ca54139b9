/**
 * The memory store (src/db/memory.ts) against D1: keyed upserts, the per-agent cap, LIKE
 * escaping, limits, per-agent isolation and the indexes that serve it. Storage is shared
 * within this file, so every test uses its own agent ids.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  countMemory,
  likePattern,
  MAX_READ_LIMIT,
  readMemory,
  readMemoryQuery,
  writeMemory,
} from "../../src/db/memory";
import { homeDatabase } from "../../src/db/placement";

let n = 0;
const agentId = () => `mem${++n}-${Date.now().toString(36)}`;

async function plan(sql: string, params: unknown[]) {
  const rows = await homeDatabase(env)
    .prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...params)
    .all<{ detail: string }>();
  return rows.results.map((r) => r.detail).join("\n");
}

describe("writeMemory", () => {
  it("adds a note without a key, each call a new note", async () => {
    const a = agentId();
    const first = await writeMemory(env, { agentId: a, text: "likes tea", now: 1000 });
    const second = await writeMemory(env, { agentId: a, text: "likes tea", now: 1001 });
    expect(first).toEqual({ id: expect.any(String), key: null, created: true });
    expect(second).toMatchObject({ key: null, created: true });
    expect("id" in second && "id" in first && second.id !== first.id).toBe(true);
    expect(await countMemory(env, a)).toBe(2);
  });

  it("replaces the text of a key in place, keeping its id and createdAt", async () => {
    const a = agentId();
    const created = await writeMemory(env, {
      agentId: a,
      key: "user/tz",
      text: "UTC",
      sessionKey: "s1",
      now: 1000,
    });
    const updated = await writeMemory(env, {
      agentId: a,
      key: "user/tz",
      text: "Europe/Berlin",
      sessionKey: "s2",
      now: 2000,
    });
    expect(created).toMatchObject({ key: "user/tz", created: true });
    expect(updated).toEqual({ id: "id" in created ? created.id : "?", key: "user/tz", created: false });
    const rows = await readMemory(env, { agentId: a, limit: 10 });
    expect(rows).toEqual([
      {
        id: "id" in created ? created.id : "?",
        agentId: a,
        key: "user/tz",
        text: "Europe/Berlin",
        createdAt: 1000,
        updatedAt: 2000,
        sessionKey: "s2",
      },
    ]);
  });

  it("keeps keys per agent: the same key of two agents is two notes", async () => {
    const [a, b] = [agentId(), agentId()];
    await writeMemory(env, { agentId: a, key: "k", text: "from a", now: 1 });
    await writeMemory(env, { agentId: b, key: "k", text: "from b", now: 2 });
    expect((await readMemory(env, { agentId: a, limit: 10 })).map((r) => r.text)).toEqual(["from a"]);
    expect((await readMemory(env, { agentId: b, limit: 10 })).map((r) => r.text)).toEqual(["from b"]);
  });

  it("refuses a new note at the cap (full), keyed or not, but still replaces an existing key", async () => {
    const a = agentId();
    const cap = 3;
    expect(await writeMemory(env, { agentId: a, key: "one", text: "1", now: 1, cap })).toMatchObject({
      created: true,
    });
    expect(await writeMemory(env, { agentId: a, text: "2", now: 2, cap })).toMatchObject({ created: true });
    expect(await writeMemory(env, { agentId: a, text: "3", now: 3, cap })).toMatchObject({ created: true });
    expect(await writeMemory(env, { agentId: a, text: "4", now: 4, cap })).toEqual({ full: true });
    expect(await writeMemory(env, { agentId: a, key: "two", text: "4", now: 4, cap })).toEqual({
      full: true,
    });
    expect(await writeMemory(env, { agentId: a, key: "one", text: "1b", now: 5, cap })).toMatchObject({
      key: "one",
      created: false,
    });
    expect(await countMemory(env, a)).toBe(3);
    // The cap is per agent: another agent still writes.
    expect(await writeMemory(env, { agentId: agentId(), text: "x", now: 6, cap })).toMatchObject({
      created: true,
    });
  });

  it("never passes the cap under concurrent writes", async () => {
    const a = agentId();
    const cap = 5;
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => writeMemory(env, { agentId: a, text: `n${i}`, now: i, cap })),
    );
    expect(results.filter((r) => "full" in r)).toHaveLength(7);
    expect(await countMemory(env, a)).toBe(cap);
  });
});

describe("readMemory", () => {
  it("returns notes newest first by updatedAt, a rewritten key moving to the front", async () => {
    const a = agentId();
    await writeMemory(env, { agentId: a, key: "old", text: "first", now: 100 });
    await writeMemory(env, { agentId: a, text: "second", now: 200 });
    await writeMemory(env, { agentId: a, text: "third", now: 300 });
    expect((await readMemory(env, { agentId: a, limit: 10 })).map((r) => r.text)).toEqual([
      "third",
      "second",
      "first",
    ]);
    await writeMemory(env, { agentId: a, key: "old", text: "first, rewritten", now: 400 });
    expect((await readMemory(env, { agentId: a, limit: 10 })).map((r) => r.text)).toEqual([
      "first, rewritten",
      "third",
      "second",
    ]);
  });

  it("orders notes written in the same millisecond latest first", async () => {
    const a = agentId();
    for (const text of ["a", "b", "c"]) await writeMemory(env, { agentId: a, text, now: 500 });
    expect((await readMemory(env, { agentId: a, limit: 10 })).map((r) => r.text)).toEqual(["c", "b", "a"]);
  });

  it("applies the limit, clamped to 1..50", async () => {
    const a = agentId();
    for (let i = 0; i < 55; i++) await writeMemory(env, { agentId: a, text: `note ${i}`, now: i });
    const two = await readMemory(env, { agentId: a, limit: 2 });
    expect(two.map((r) => r.text)).toEqual(["note 54", "note 53"]);
    expect(await readMemory(env, { agentId: a, limit: 500 })).toHaveLength(MAX_READ_LIMIT);
    expect(await readMemory(env, { agentId: a, limit: 0 })).toHaveLength(1);
  });

  it("matches query as a case-insensitive substring of the text or the key", async () => {
    const a = agentId();
    await writeMemory(env, { agentId: a, text: "Prefers GREEN tea", now: 1 });
    await writeMemory(env, { agentId: a, key: "drinks/green", text: "none in the evening", now: 2 });
    await writeMemory(env, { agentId: a, text: "coffee at 9", now: 3 });
    const hits = await readMemory(env, { agentId: a, query: "green", limit: 10 });
    expect(hits.map((r) => r.text)).toEqual(["none in the evening", "Prefers GREEN tea"]);
  });

  it("treats %, _ and \\ in query literally", async () => {
    const a = agentId();
    await writeMemory(env, { agentId: a, text: "discount 50% off", now: 1 });
    await writeMemory(env, { agentId: a, text: "discount 50 percent", now: 2 });
    await writeMemory(env, { agentId: a, text: "file a_b.txt", now: 3 });
    await writeMemory(env, { agentId: a, text: "file axb.txt", now: 4 });
    await writeMemory(env, { agentId: a, text: "path C:\\temp", now: 5 });
    await writeMemory(env, { agentId: a, text: "path C:temp", now: 6 });
    const texts = async (query: string) =>
      (await readMemory(env, { agentId: a, query, limit: 10 })).map((r) => r.text);
    expect(await texts("50%")).toEqual(["discount 50% off"]);
    expect(await texts("a_b")).toEqual(["file a_b.txt"]);
    expect(await texts("C:\\t")).toEqual(["path C:\\temp"]);
    expect(await texts("%")).toEqual(["discount 50% off"]);
    expect(likePattern("a%b_c\\d")).toBe("%a\\%b\\_c\\\\d%");
  });

  it("never returns another agent's notes", async () => {
    const [a, b] = [agentId(), agentId()];
    await writeMemory(env, { agentId: a, key: "secret", text: "a's plan", now: 1 });
    await writeMemory(env, { agentId: b, text: "b's note", now: 2 });
    expect((await readMemory(env, { agentId: b, limit: 50 })).map((r) => r.text)).toEqual(["b's note"]);
    expect(await readMemory(env, { agentId: b, query: "plan", limit: 50 })).toEqual([]);
    expect(await readMemory(env, { agentId: b, query: "secret", limit: 50 })).toEqual([]);
    expect(await countMemory(env, b)).toBe(1);
  });

  it("reads through the index memories_agent_recent, without sorting", async () => {
    const q = readMemoryQuery(env, { agentId: "x", query: "y", limit: 10 });
    const details = await plan(q.sql, q.params);
    expect(details).toMatch(/USING INDEX memories_agent_recent/);
    expect(details).not.toMatch(/TEMP B-TREE/);
  });
});

describe("messages_compactions", () => {
  it("serves the latest compaction entry of a transcript", async () => {
    const details = await plan(
      "SELECT seq, first_kept_seq FROM messages WHERE session_id = ? AND first_kept_seq IS NOT NULL ORDER BY seq DESC LIMIT 1",
      ["s"],
    );
    expect(details).toMatch(/USING (COVERING )?INDEX messages_compactions/);
    expect(details).not.toMatch(/TEMP B-TREE/);
  });
});
