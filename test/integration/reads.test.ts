/**
 * The hot reads bypass drizzle's query builder (src/db/reads.ts). Each case reads the same rows
 * both ways, through the hand-written statement and through the drizzle query it replaced, and
 * expects identical results: every column, JSON and boolean decoding, nulls, order and paging.
 */
import { env } from "cloudflare:workers";
import { and, desc, eq, inArray, isNull, lt, ne, or } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { appendMessages, historyPage, sessionWithHistoryPage } from "../../src/db/messages";
import { databaseOfKey, homeDatabase } from "../../src/db/placement";
import { database, getSession, LISTED_COLUMNS, listSessions, listSessionsBatch } from "../../src/db/queries";
import { MAX_BOUND_PARAMS, MAX_UNION_TERMS } from "../../src/db/reads";
import * as schema from "../../src/db/schema";
import { seedSessions, sessionRow, transcriptMessages } from "./rpc-support";

const prefix = `reads-${crypto.randomUUID().slice(0, 8)}`;
const s = schema.sessions;

async function seed() {
  const base = Date.now() - 100_000;
  const rows = Array.from({ length: 12 }, (_, i) =>
    sessionRow({
      key: `agent:${prefix}:telegram:dm:p${i}`,
      agentId: prefix,
      updatedAt: base + (i % 4) * 1000, // ties on updatedAt, broken by key
      label: i === 3 ? `${prefix}-label` : null,
      spawnedBy: i % 3 === 0 ? `agent:${prefix}:main` : null,
      archivedAt: i === 5 ? base : null,
      systemSent: i % 2 === 0,
      abortedLastRun: i === 7,
      deliveryContext: { channel: "telegram", to: `p${i}`, accountId: "default" },
      origin: i === 2 ? null : { label: `P ${i}`, provider: "telegram", from: `p${i}` },
      kind: i % 2 === 0 ? "main" : "group",
    }),
  );
  return seedSessions(rows);
}

describe("hand-written reads return what drizzle returns", () => {
  it("an entry by key, with JSON and boolean columns and nulls", async () => {
    const rows = await seed();
    for (const r of rows.slice(0, 4)) {
      const viaDrizzle = await database(homeDatabase(env)).select().from(s).where(eq(s.key, r.key)).get();
      expect(await getSession(env, r.key)).toEqual(viaDrizzle);
    }
    expect(await getSession(env, `${prefix}-missing`)).toBeUndefined();
  });

  it("listing pages under every filter, in the same order", async () => {
    await seed();
    const drizzleList = (where: ReturnType<typeof and>, limit: number) =>
      database(homeDatabase(env))
        .select()
        .from(s)
        .where(where)
        .orderBy(desc(s.updatedAt), desc(s.key))
        .limit(limit)
        .all();
    const first = await listSessions(env, { agentId: prefix, archived: "all", limit: 5 });
    expect(first).toEqual(await drizzleList(eq(s.agentId, prefix), 5));
    const last = first.at(-1)!;
    const cursor = { updatedAt: last.updatedAt, key: last.key };
    expect(await listSessions(env, { agentId: prefix, archived: "all", limit: 5, cursor })).toEqual(
      await drizzleList(
        and(
          eq(s.agentId, prefix),
          or(
            lt(s.updatedAt, cursor.updatedAt),
            and(eq(s.updatedAt, cursor.updatedAt), lt(s.key, cursor.key)),
          ),
        ),
        5,
      ),
    );
    expect(
      await listSessions(env, { agentId: prefix, kinds: ["group"], archived: false, limit: 50 }),
    ).toEqual(await drizzleList(and(eq(s.kind, "group"), eq(s.agentId, prefix), isNull(s.archivedAt)), 50));
    const keys = [`agent:${prefix}:telegram:dm:p1`, `agent:${prefix}:telegram:dm:p2`];
    expect(await listSessions(env, { keys, excludeKeys: [keys[0]!], archived: "all", limit: 50 })).toEqual(
      await drizzleList(and(inArray(s.key, keys), ne(s.key, keys[0]!)), 50),
    );
    expect(await listSessions(env, { keys: [], archived: "all", limit: 50 })).toEqual([]);
    expect(
      await listSessions(env, { spawnedBy: `agent:${prefix}:main`, archived: "all", limit: 50 }),
    ).toEqual(await drizzleList(eq(s.spawnedBy, `agent:${prefix}:main`), 50));
  });

  it("history pages, with and without tool results", async () => {
    const sessionId = crypto.randomUUID();
    const key = `agent:${prefix}:history`;
    await appendMessages(env, key, sessionId, transcriptMessages(`${prefix}-h`, 30, { toolEvery: 5 }));
    const m = schema.messages;
    for (const opts of [
      { limit: 10, includeTools: true },
      { limit: 10, before: 12, includeTools: true },
      { limit: 50, includeTools: false },
    ]) {
      const page = await historyPage(env, key, sessionId, opts);
      const rows = await database(databaseOfKey(env, key))
        .select()
        .from(m)
        .where(
          and(
            eq(m.sessionId, sessionId),
            opts.before !== undefined ? lt(m.seq, opts.before) : undefined,
            opts.includeTools ? undefined : ne(m.role, "toolResult"),
          ),
        )
        .orderBy(desc(m.seq))
        .limit(opts.limit + 1)
        .all();
      expect(page.messages.map((x) => x.seq)).toEqual(
        rows
          .slice(0, opts.limit)
          .reverse()
          .map((r) => r.seq),
      );
      expect(page.messages.map((x) => x.content)).toEqual(
        rows
          .slice(0, opts.limit)
          .reverse()
          .map((r) => r.content),
      );
      expect(page.hasMore).toBe(rows.length > opts.limit);
    }
  });

  it("several listings in one union, and more than one D1 statement takes, each in its own order", async () => {
    const rows = await seed();
    const filters = rows.map((r) => ({ keys: [r.key], archived: "all" as const, limit: 5 }));
    // 12 selects: more than one statement's selects; with long key lists, more than its parameters.
    expect(filters.length).toBeGreaterThan(MAX_UNION_TERMS);
    // Three selects of 41 parameters each: within the selects of one statement, past its parameters.
    const many = [0, 1, 2].map((n) => ({
      keys: [
        ...rows.slice(n).map((r) => r.key),
        ...Array.from({ length: 28 + n }, (_, i) => `${prefix}-no-${i}`),
      ],
      archived: "all" as const,
      limit: 3,
    }));
    expect(many.length).toBeLessThanOrEqual(MAX_UNION_TERMS);
    expect(many.reduce((n, f) => n + f.keys.length + 1, 0)).toBeGreaterThan(MAX_BOUND_PARAMS);
    for (const batch of [filters, many]) {
      const answers = await listSessionsBatch(env, batch);
      expect(answers).toHaveLength(batch.length);
      for (const [i, f] of batch.entries()) expect(answers[i]).toEqual(await listSessions(env, f));
    }
    // A projection: exactly the listed columns, decoded alike.
    const [listed] = await listSessionsBatch(
      env,
      [{ agentId: prefix, archived: "all", limit: 50 }],
      LISTED_COLUMNS,
    );
    const full = await listSessions(env, { agentId: prefix, archived: "all", limit: 50 });
    expect(listed).toEqual(full.map((r) => Object.fromEntries(LISTED_COLUMNS.map((k) => [k, r[k]]))));
  });

  it("a session and its history page in one statement", async () => {
    const [row] = await seed();
    const sessionId = row!.sessionId;
    await appendMessages(env, row!.key, sessionId, transcriptMessages(`${prefix}-sh`, 12, { toolEvery: 4 }));
    const opts = { limit: 5, includeTools: false };
    const both = await sessionWithHistoryPage(env, row!.key, opts);
    expect(both.row).toEqual({
      key: row!.key,
      agentId: row!.agentId,
      spawnedBy: row!.spawnedBy,
      sessionId,
    });
    expect(both.page).toEqual(await historyPage(env, row!.key, sessionId, opts));
    expect(both.page.messages).toHaveLength(5);
    // No session under the key: no row, an empty page.
    expect(await sessionWithHistoryPage(env, `${prefix}-none`, opts)).toEqual({
      row: undefined,
      page: { messages: [], hasMore: false },
    });
  });
});
