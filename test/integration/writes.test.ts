import { env } from "cloudflare:workers";
import { eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import { recordTranscriptStatement, type SessionRow, upsertSessionStatement } from "../../src/db/queries";
import { insertDeliveryStatement, startRunStatement, updateRunStatement } from "../../src/db/runs";
import * as schema from "../../src/db/schema";
import { boundStatement, insertManyQuery, insertQuery } from "../../src/db/writes";
import { newSessionRow } from "../../src/session/entry/rules";

// The hot write statements bypass drizzle's query builder (src/db/writes.ts). Each case here
// holds the statement beside the drizzle query it replaced: same SQL text, same bound params.

/** A D1 binding that hands back what a statement was prepared and bound with. */
const recording = {
  prepare: (sql: string) => ({ bind: (...params: unknown[]) => ({ sql, params }) }),
} as unknown as D1Database;
const db = drizzle({} as D1Database, { schema });

function built(statement: D1PreparedStatement) {
  return statement as unknown as { sql: string; params: unknown[] };
}

type RunInsert = typeof schema.runs.$inferInsert;
type RunFields = Partial<Omit<RunInsert, "runId">>;
type DeliveryInsert = typeof schema.deliveries.$inferInsert;

const fresh = newSessionRow(
  "agent:main:telegram:dm:42",
  { agentId: "main", kind: "main", chatType: "direct", channel: "telegram" },
  1_700_000_000_000,
  "s-1",
);
const populated: SessionRow = {
  ...fresh,
  displayName: "Ada",
  label: "research",
  lastInteractionAt: 1_700_000_000_500,
  model: "fake/model",
  contextTokens: 1200,
  inputTokens: 900,
  outputTokens: 300,
  totalTokens: 1200,
  systemSent: true,
  abortedLastRun: true,
  lastChannel: "telegram",
  lastTo: "42",
  lastAccountId: "bot",
  deliveryContext: { channel: "telegram", to: "42", accountId: "bot", threadId: "7" },
  origin: { label: "Ada", provider: "telegram", from: "42" },
  runStatus: "running",
  expiresAt: 1_700_086_400_000,
};
// Rows built elsewhere may leave fields out: insert falls back to the column default, the
// upsert leaves the column alone.
const partial = {
  ...populated,
  label: undefined,
  contextTokens: undefined,
  systemSent: undefined,
  origin: undefined,
  runStatus: undefined,
} as unknown as SessionRow;

const runs: RunInsert[] = [
  { runId: "r1", sessionKey: "k", sessionId: "s", trigger: "inbound", status: "queued", createdAt: 5 },
  {
    runId: "r2",
    sessionKey: "k",
    sessionId: "s",
    trigger: "rpc",
    status: "queued",
    createdAt: 5,
    deliver: true,
    idempotencyKey: null,
  },
  {
    runId: "r3",
    sessionKey: "k",
    sessionId: "s",
    trigger: "cron",
    status: "done",
    createdAt: 5,
    startedAt: 6,
    endedAt: 7,
    error: null,
    reply: "hi",
    usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 },
    model: "fake/model",
    deliver: false,
    delivered: true,
    idempotencyKey: "idem",
  },
];

const runUpdates: RunFields[] = [
  {
    status: "done",
    startedAt: 6,
    endedAt: null,
    error: null,
    reply: "hello",
    model: null,
    usage: { inputTokens: 10, outputTokens: 20, totalTokens: 30 },
    delivered: false,
  },
  { status: "failed", error: "boom", delivered: null, usage: null },
  { delivered: true, reply: undefined, model: undefined },
  { endedAt: 9 },
];

const deliveries: DeliveryInsert[] = [
  {
    deliveryId: "r1:reply",
    kind: "reply",
    sessionKey: "k",
    runId: "r1",
    channel: "telegram",
    accountId: "bot",
    to: "42",
    threadId: null,
    replyToMessageId: null,
    text: "hi",
    status: "pending",
    attempts: 0,
    nextAttemptAt: 5,
    createdAt: 5,
    updatedAt: 5,
  },
  {
    deliveryId: "r2:announce",
    kind: "announce",
    sessionKey: "k",
    channel: "slack",
    accountId: "T1",
    to: "C1",
    threadId: "t",
    text: "done",
    status: "pending",
    createdAt: 5,
    updatedAt: 5,
  },
];

// Every case runs twice: the second time the SQL text comes from the cache.
const twice = <T>(xs: T[]) => [...xs, ...xs];

describe("hot write statements match drizzle's SQL and params", () => {
  it("upsertSessionStatement", () => {
    for (const row of twice([fresh, populated, partial, { ...populated, runStatus: "idle" }])) {
      const { key: _key, ...rest } = row;
      const expected = db
        .insert(schema.sessions)
        .values(row)
        .onConflictDoUpdate({ target: schema.sessions.key, set: rest })
        .toSQL();
      expect(built(upsertSessionStatement(recording, row))).toEqual(expected);
    }
  });

  it("upsertSessionStatement of a run's columns: an existing row keeps those set when it began and its label", () => {
    const kept = ["key", "agentId", "kind", "createdAt", "spawnedBy", "sessionId", "label"];
    for (const row of twice([fresh, populated, partial])) {
      const set = Object.fromEntries(Object.entries(row).filter(([k]) => !kept.includes(k)));
      const expected = db
        .insert(schema.sessions)
        .values(row)
        .onConflictDoUpdate({ target: schema.sessions.key, set })
        .toSQL();
      expect(built(upsertSessionStatement(recording, row, { set: "run" }))).toEqual(expected);
    }
  });

  it("upsertSessionStatement unless newer: the update applies only over an older row", () => {
    for (const row of twice([fresh, populated])) {
      const { key: _key, ...rest } = row;
      const s = schema.sessions;
      const expected = db
        .insert(s)
        .values(row)
        .onConflictDoUpdate({
          target: s.key,
          set: rest,
          setWhere: sql`${sql.identifier("updated_at")} < excluded.${sql.identifier("updated_at")}`,
        })
        .toSQL();
      expect(built(upsertSessionStatement(recording, row, { unlessNewer: true }))).toEqual(expected);
    }
  });

  it("recordTranscriptStatement", () => {
    for (const [sessionId, key, now] of twice([
      ["s-1", "k-1", 1],
      ["s-2", "k-2", 2],
    ] as const)) {
      const expected = db
        .insert(schema.transcripts)
        .values({ sessionId, sessionKey: key, createdAt: now })
        .onConflictDoNothing()
        .toSQL();
      expect(built(recordTranscriptStatement(recording, sessionId, key, now))).toEqual(expected);
    }
  });

  it("startRunStatement", () => {
    for (const run of twice(runs)) {
      const started = { ...run, startedAt: 42 };
      const expected = db
        .insert(schema.runs)
        .values({ ...started, status: "running" })
        .onConflictDoUpdate({
          target: schema.runs.runId,
          set: { status: "running", startedAt: started.startedAt },
        })
        .toSQL();
      expect(built(startRunStatement(recording, started))).toEqual(expected);
    }
  });

  it("updateRunStatement", () => {
    for (const fields of twice(runUpdates)) {
      const expected = db.update(schema.runs).set(fields).where(eq(schema.runs.runId, "r1")).toSQL();
      expect(built(updateRunStatement(recording, "r1", fields))).toEqual(expected);
    }
  });

  it("updateRunStatement with nothing to set fails as drizzle does", () => {
    const fields = { reply: undefined };
    expect(() => db.update(schema.runs).set(fields)).toThrow("No values to set");
    expect(() => updateRunStatement(recording, "r1", fields)).toThrow("No values to set");
  });

  it("insertDeliveryStatement", () => {
    for (const row of twice(deliveries)) {
      const expected = db.insert(schema.deliveries).values(row).onConflictDoNothing().toSQL();
      expect(built(insertDeliveryStatement(recording, row))).toEqual(expected);
    }
  });

  it("refuses columns whose values drizzle computes per statement", () => {
    const stamped = sqliteTable("stamped", {
      id: text("id").primaryKey(),
      at: integer("at").$defaultFn(() => Date.now()),
    });
    expect(() => insertQuery(stamped, { id: "a" }, "nothing")).toThrow(/not supported/);
  });
});

describe("several rows in one statement (insertManyQuery)", () => {
  const row = (i: number): RunInsert => ({
    runId: `many-${i}`,
    sessionKey: `k-${i % 3}`,
    sessionId: "s",
    trigger: i % 2 ? "inbound" : "rpc",
    status: i % 4 ? "ok" : "error",
    createdAt: 1_700_000_000_000 + i,
    ...(i % 2
      ? {
          reply: `reply ${i} "quoted" ✓`,
          usage: { inputTokens: i, outputTokens: 1, totalTokens: i + 1 },
          delivered: true,
        }
      : {}),
    ...(i % 5 === 0 ? { error: "boom", deliver: true } : {}),
  });

  it("stores what one insert per row stores: bound as values, or as one JSON parameter past 100 parameters", async () => {
    const db = env.DB;
    const d = drizzle(db, { schema });
    for (const [from, count, form] of [
      [0, 3, /values \(/],
      [100, 40, /json_each/],
    ] as const) {
      const rows = Array.from({ length: count }, (_, i) => row(from + i));
      const query = insertManyQuery(schema.runs, rows);
      expect(query.sql).toMatch(form);
      await boundStatement(db, query).run();
      // Again: nothing changes (on conflict do nothing).
      await boundStatement(db, insertManyQuery(schema.runs, rows)).run();
      for (const r of rows) {
        await d
          .insert(schema.runs)
          .values({ ...r, runId: `one-${r.runId}` })
          .run();
        const [many] = await d.select().from(schema.runs).where(eq(schema.runs.runId, r.runId)).all();
        const [one] = await d
          .select()
          .from(schema.runs)
          .where(eq(schema.runs.runId, `one-${r.runId}`))
          .all();
        expect(many).toEqual({ ...one, runId: r.runId });
      }
    }
  });
});
