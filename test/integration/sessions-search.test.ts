import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ConfigInput } from "../../src/config/schema";
import { allDatabases, databaseOfKey } from "../../src/db/placement";
import { recordTranscript, type SessionRow, upsertSessionStatement } from "../../src/db/queries";
import { backfillSearchIndex, searchIndexStatus } from "../../src/db/search";
import type { TranscriptMessage } from "../../src/transcript/message";
import type { searchSessions } from "../../src/views/search";
import { familyKeys, invokeTools, seedMessages, seedSessions, sessionRow } from "./rpc-support";
import { rpc } from "./support";

/** A page of sessions_search / sessions.search, as views/search.ts shapes it. */
type SearchAnswer = Awaited<ReturnType<typeof searchSessions>>;

const invoke = <T>(config: ConfigInput, body: Record<string, unknown>) => invokeTools<T>(config, body);

let counter = 0;
function unique(prefix: string): string {
  counter++;
  return `${prefix}${counter}x${Date.now().toString(36)}`;
}

function said(
  id: string,
  role: "user" | "assistant",
  text: string,
  timestamp = Date.now(),
): TranscriptMessage {
  return { id, role, content: [{ type: "text", text }], timestamp };
}

/** Agents a, b, c; sessions of each kind of relation to a's main and a's group (see session-tools.test.ts). */
async function family(word: string) {
  const a = unique("a");
  const b = unique("b");
  const c = unique("c");
  const k = familyKeys(a, b, c);
  const rows = await seedSessions([
    sessionRow({ key: k.aMain, agentId: a, kind: "main" }),
    sessionRow({ key: k.aChild, agentId: a, spawnedBy: k.aMain }),
    sessionRow({ key: k.aGroup, agentId: a, kind: "group", chatType: "group", channel: "telegram" }),
    sessionRow({ key: k.aGroupChild, agentId: a, spawnedBy: k.aGroup }),
    sessionRow({ key: k.bMain, agentId: b, kind: "main" }),
    sessionRow({ key: k.bChildOfA, agentId: b, spawnedBy: k.aMain }),
    sessionRow({ key: k.cMain, agentId: c, kind: "main" }),
  ]);
  for (const row of rows) {
    await seedMessages(row.sessionId, [
      said(`${row.sessionId}-1`, "user", `where is the ${word} for ${row.key}`),
      said(`${row.sessionId}-2`, "assistant", `the ${word} is here`),
    ]);
  }
  const agents = (extra: Record<string, unknown> = {}) => ({
    list: [{ id: a, ...extra }, { id: b }, { id: c }],
  });
  return { a, b, c, k, rows, agents };
}

/** Every key sessions_list shows the caller, among `among`. */
async function listed(config: ConfigInput, caller: Record<string, unknown>, among: string[]) {
  const res = await invoke<{ sessions: Array<{ key: string }> }>(config, {
    tool: "sessions_list",
    ...caller,
    args: { limit: 200, archived: "all" },
  });
  expect(res.status, JSON.stringify({ caller, res })).toBe(200);
  return res.result.sessions.map((s) => s.key).filter((key) => among.includes(key) || key === "main");
}

/** Every hit of a search, following cursors. */
async function searchAll(
  config: ConfigInput,
  caller: Record<string, unknown>,
  args: Record<string, unknown>,
) {
  const hits: SearchAnswer["results"] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 50; page++) {
    const res = await invoke<SearchAnswer>(config, {
      tool: "sessions_search",
      ...caller,
      args: { ...args, ...(cursor ? { cursor } : {}) },
    });
    expect(res.status, JSON.stringify(res)).toBe(200);
    hits.push(...res.result.results);
    cursor = res.result.nextCursor;
    if (!cursor) return hits;
  }
  throw new Error("sessions_search did not end");
}

describe("sessions_search visibility", () => {
  it("finds exactly the sessions sessions_list shows, at every visibility level, sandboxed or not", async () => {
    const word = unique("pelican");
    const f = await family(word);
    const among = Object.values(f.k);
    const configs: ConfigInput[] = [
      { agents: f.agents(), tools: { sessions: { visibility: "self" } } },
      { agents: f.agents(), tools: { sessions: { visibility: "tree" } } },
      { agents: f.agents(), tools: { sessions: { visibility: "agent" } } },
      { agents: f.agents(), tools: { sessions: { visibility: "all" } } },
      { agents: f.agents(), tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } } },
      {
        agents: f.agents(),
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true, allow: [f.a, f.c] } },
      },
      {
        agents: f.agents({ sandbox: { mode: "all" } }),
        tools: { sessions: { visibility: "all" }, agentToAgent: { enabled: true } },
      },
      { agents: f.agents({ sandbox: { mode: "non-main" } }), tools: { sessions: { visibility: "agent" } } },
    ];
    const callers = [{ agentId: f.a }, { agentId: f.a, sessionKey: f.k.aGroup }, { agentId: f.b }];
    for (const config of configs) {
      for (const caller of callers) {
        const expected = (await listed(config, caller, among)).sort();
        const hits = await searchAll(config, caller, { query: word, limit: 3, archived: "all" });
        const keys = [...new Set(hits.map((h) => h.sessionKey))].sort();
        expect(keys, JSON.stringify({ config: config.tools, caller })).toEqual(expected);
        // Both messages of each visible session, each once.
        expect(hits.length).toBe(expected.length * 2);
        expect(new Set(hits.map((h) => `${h.sessionId}:${h.seq}`)).size).toBe(hits.length);
      }
    }
  });

  it("the operator's sessions.search sees every session with canonical keys", async () => {
    const word = unique("heron");
    const f = await family(word);
    const answer = await rpc<SearchAnswer>("sessions.search", { query: word, limit: 50 });
    expect(answer.status).toBe(200);
    expect(new Set(answer.payload.results.map((h) => h.sessionKey))).toEqual(new Set(Object.values(f.k)));
  });
});

describe("sessions_search matching", () => {
  it("matches whole words without case or diacritics, marks them, and redacts secrets in excerpts", async () => {
    const a = unique("m");
    const key = `agent:${a}:main`;
    const [row] = await seedSessions([sessionRow({ key, agentId: a, kind: "main" })]);
    await seedMessages(row!.sessionId, [
      said(`${row!.sessionId}-1`, "user", "Une Crème brûlée, please"),
      said(`${row!.sessionId}-2`, "assistant", "deploy with password=hunter2secret now"),
      said(`${row!.sessionId}-3`, "user", "cremes are plural"),
    ]);
    const config = { agents: { list: [{ id: a }] } };
    const creme = await invoke<SearchAnswer>(config, {
      tool: "sessions_search",
      agentId: a,
      args: { query: "CREME" },
    });
    expect(creme.result.results.map((h) => h.excerpt)).toEqual(["Une **Crème** brûlée, please"]);
    expect(creme.result.results[0]).toMatchObject({ sessionKey: "main", role: "user", agentId: a });
    const secret = await invoke<SearchAnswer>(config, {
      tool: "sessions_search",
      agentId: a,
      args: { query: "deploy" },
    });
    expect(secret.result.results[0]?.excerpt).toContain("**deploy**");
    expect(JSON.stringify(secret.result)).not.toContain("hunter2secret");
    const phrase = await invoke<SearchAnswer>(config, {
      tool: "sessions_search",
      agentId: a,
      args: { query: '"brulee please"' },
    });
    expect(phrase.result.count).toBe(1);
    const roles = await invoke<SearchAnswer>(config, {
      tool: "sessions_search",
      agentId: a,
      args: { query: "deploy", roles: ["user"] },
    });
    expect(roles.result.count).toBe(0);
  });

  it("takes FTS5 syntax as text: no query is an error", async () => {
    const a = unique("s");
    const config = { agents: { list: [{ id: a }] } };
    for (const query of [
      '"',
      "*",
      "NEAR(",
      "NEAR(a b, 2)",
      "-",
      "-x",
      "a:b",
      ":",
      '"unbalanced',
      "^x",
      "a OR",
      "(",
      ")",
      "AND",
    ]) {
      const res = await invoke<SearchAnswer>(config, {
        tool: "sessions_search",
        agentId: a,
        args: { query },
      });
      expect(res.status, query).toBe(200);
      expect(res.result.query).toBe(query);
    }
    const bad = await invoke<SearchAnswer>(config, {
      tool: "sessions_search",
      agentId: a,
      args: { query: "x", cursor: "nope" },
    });
    expect(bad.status).toBe(400);
    expect(bad.error?.message).toContain("cursor");
  });

  it("pages with cursors: every hit once, best first", async () => {
    const a = unique("p");
    const key = `agent:${a}:main`;
    const [row] = await seedSessions([sessionRow({ key, agentId: a, kind: "main" })]);
    const word = unique("walrus");
    await seedMessages(
      row!.sessionId,
      Array.from({ length: 25 }, (_, i) =>
        said(
          `${row!.sessionId}-${i}`,
          i % 2 ? "assistant" : "user",
          `${word} ${"filler ".repeat(i)}`,
          1_000 + i,
        ),
      ),
    );
    const hits = await searchAll(
      { agents: { list: [{ id: a }] } },
      { agentId: a },
      { query: word, limit: 10 },
    );
    expect(hits.length).toBe(25);
    expect(new Set(hits.map((h) => h.seq)).size).toBe(25);
    // bm25 favours the shortest message: the one without filler.
    expect(hits[0]?.seq).toBe(1);
  });
});

describe("sessions_search across resets and deletes", () => {
  it("finds a transcript from before a reset and reopens it around the hit", async () => {
    const a = unique("r");
    const key = `agent:${a}:main`;
    const [row] = await seedSessions([sessionRow({ key, agentId: a, kind: "main" })]);
    const old = row!.sessionId;
    const word = unique("marmot");
    await seedMessages(
      old,
      Array.from({ length: 20 }, (_, i) =>
        said(`${old}-${i}`, i % 2 ? "assistant" : "user", i === 9 ? word : `line ${i}`),
      ),
    );
    // The reset: a new transcript under the same key.
    const fresh = crypto.randomUUID();
    await upsertSessionStatement(databaseOfKey(env, key), { ...row!, sessionId: fresh } as SessionRow).run();
    await recordTranscript(env, fresh, key, Date.now());
    await seedMessages(fresh, [said(`${fresh}-1`, "user", "a new day")]);

    const config = { agents: { list: [{ id: a }] } };
    const found = await invoke<SearchAnswer>(config, {
      tool: "sessions_search",
      agentId: a,
      args: { query: word },
    });
    expect(found.result.results).toHaveLength(1);
    const hit = found.result.results[0]!;
    expect(hit).toMatchObject({ sessionKey: "main", sessionId: old, seq: 10 });

    const around = await invoke<{
      sessionId: string;
      messages: Array<{ seq: number }>;
      hasMore: boolean;
      hasNewer: boolean;
    }>(config, {
      tool: "sessions_history",
      agentId: a,
      args: { sessionKey: hit.sessionKey, sessionId: hit.sessionId, aroundSeq: hit.seq, limit: 6 },
    });
    expect(around.status).toBe(200);
    expect(around.result.sessionId).toBe(old);
    expect(around.result.messages.map((m) => m.seq)).toEqual([8, 9, 10, 11, 12, 13]);
    expect(around.result).toMatchObject({ hasMore: true, hasNewer: true });

    const rpcAround = await rpc<{ messages: Array<{ seq: number }>; hasNewer: boolean }>("chat.history", {
      sessionKey: key,
      sessionId: old,
      aroundSeq: 20,
      limit: 4,
    });
    expect(rpcAround.payload.messages.map((m) => m.seq)).toEqual([19, 20]);
    expect(rpcAround.payload.hasNewer).toBe(false);

    // A sessionId of another session is an error naming both.
    const other = unique("o");
    const [otherRow] = await seedSessions([
      sessionRow({ key: `agent:${other}:main`, agentId: other, kind: "main" }),
    ]);
    const wrong = await rpc("chat.history", { sessionKey: key, sessionId: otherRow!.sessionId });
    expect(wrong.status).toBe(400);
    expect(wrong.error?.message).toBe(
      `sessionId ${otherRow!.sessionId} is a transcript of session agent:${other}:main, not of ${key}`,
    );
  });

  it("a deleted session's transcript leaves the index", async () => {
    const a = unique("d");
    const key = `agent:${a}:subagent:gone`;
    const [row] = await seedSessions([sessionRow({ key, agentId: a })]);
    const word = unique("ibex");
    await seedMessages(row!.sessionId, [said(`${row!.sessionId}-1`, "user", word)]);
    expect((await rpc<SearchAnswer>("sessions.search", { query: word })).payload.count).toBe(1);
    expect((await rpc("sessions.delete", { key })).status).toBe(200);
    expect((await rpc<SearchAnswer>("sessions.search", { query: word })).payload.count).toBe(0);
    const [{ n }] = (
      await databaseOfKey(env, key)
        .prepare("SELECT count(*) AS n FROM messages_fts WHERE messages_fts MATCH ?")
        .bind(`"${word}"`)
        .all<{ n: number }>()
    ).results as [{ n: number }];
    expect(n).toBe(0);
  });
});

describe("search backfill", () => {
  it("indexes messages stored before the index, resumably, and status reports what is left", async () => {
    const a = unique("b");
    const key = `agent:${a}:main`;
    const [row] = await seedSessions([sessionRow({ key, agentId: a, kind: "main" })]);
    const word = unique("okapi");
    await seedMessages(
      row!.sessionId,
      Array.from({ length: 30 }, (_, i) => said(`${row!.sessionId}-${i}`, "user", `${word} ${i}`)),
    );
    // As if they were stored before migration 0010: not indexed, and the backfill's to do.
    for (const db of allDatabases(env)) {
      await db.batch([
        db
          .prepare(
            `DELETE FROM messages_fts WHERE rowid IN (SELECT rowid FROM messages WHERE session_id = ?)`,
          )
          .bind(row!.sessionId),
        db.prepare(
          `UPDATE search_backfill SET through = 0, upto = (SELECT coalesce(max(rowid), 0) FROM messages)`,
        ),
      ]);
    }
    expect((await rpc<SearchAnswer>("sessions.search", { query: word })).payload.count).toBe(0);
    const before = await searchIndexStatus(env);
    expect(before.pending).toBeGreaterThanOrEqual(30);
    let left = await backfillSearchIndex(env, 1);
    for (let i = 0; i < 100 && left.pending > 0; i++) left = await backfillSearchIndex(env, 1);
    expect(left.pending).toBe(0);
    const answer = await rpc<SearchAnswer>("sessions.search", { query: word, limit: 50 });
    expect(answer.payload.count).toBe(30);
    // Running it again changes nothing.
    await backfillSearchIndex(env, 5);
    expect((await rpc<SearchAnswer>("sessions.search", { query: word, limit: 50 })).payload.count).toBe(30);
    const status = await rpc<{ search: { indexed: number; pending: number } }>("status", {});
    expect(status.payload.search.pending).toBe(0);
  });
});
