/**
 * `storage.rebalance` and `storage.verify` (SPEC §19): 10,000 sessions placed in DB are spread
 * over four databases while the gateway refuses to serve, through three kills (one between a
 * copy and its delete, one between a delete and the next copy), and back again; a dry run changes nothing; verify names a doubled row.
 * The databases of this file are shared by its tests, which run in order.
 */
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { bindingOf, placeKey } from "../../src/db/placement";
import { writePlacementRecord } from "../../src/db/placement-check";
import { type RebalanceProgress, rebalance } from "../../src/db/rebalance";
import type { verifyPlacement } from "../../src/db/rebalance-verify";
import { app } from "../../src/http/app";
import { TOKEN } from "./support";

const ONE = ["DB"];
const FOUR = ["DB", "DB_1", "DB_2", "DB_3"];
const SESSIONS = 10_000;
const NOW = 1_760_000_000_000;
/** The tests that move 10,000 sessions take seconds; a machine under load may take several times that. */
const SLOW = { timeout: 60_000 };
const BASE = JSON.parse(env.SWITCHBOARD_CONFIG) as Record<string, unknown>;

const keyOf = (i: number) => `agent:main:rb-${String(i).padStart(5, "0")}`;
const withMessages = (i: number) => i % 10 === 0;
/** A session that moves to another database and has more messages and runs than one read takes. */
const BIG =
  Array.from({ length: 100 }, (_, i) => i).find((i) => !withMessages(i) && placeKey(FOUR, keyOf(i)) !== 0) ??
  1;
const BIG_MESSAGES = 1234;
/** The text of its first message: longer than one JSON parameter of a copy takes. */
const LONG_TEXT = "x".repeat(600_000);
const BIG_RUNS = 1100;

function configured(list: string[], bindings: Record<string, unknown> = {}): Env {
  return {
    ...env,
    SWITCHBOARD_CONFIG: JSON.stringify({ ...BASE, storage: { d1: list } }),
    ...bindings,
  } as Env;
}

const db = (name: string) => bindingOf(env, name);

async function call<T>(e: Env, method: string, params: unknown = {}) {
  const res = await app.fetch(
    new Request(`http://gw.test/rpc/${method}`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(params),
    }),
    e,
    createExecutionContext(),
  );
  const body = (await res.json()) as { ok: boolean; payload: T; error?: { code: string; message: string } };
  return { status: res.status, ...body };
}

/** Inserts `rows` (arrays in `columns` order) with one statement per 1,000 rows. */
async function insertRows(d: D1Database, table: string, columns: string[], rows: unknown[][]) {
  const values = columns.map((_, i) => `j.value ->> ${i}`).join(", ");
  const sql = `INSERT INTO ${table} (${columns.map((c) => `"${c}"`).join(", ")}) SELECT ${values} FROM json_each(?1) AS j`;
  const statements = [];
  for (let i = 0; i < rows.length; i += 1000)
    statements.push(d.prepare(sql).bind(JSON.stringify(rows.slice(i, i + 1000))));
  await d.batch(statements);
}

async function seed() {
  const sessions: unknown[][] = [];
  const transcripts: unknown[][] = [];
  const messages: unknown[][] = [];
  const runs: unknown[][] = [];
  for (let i = 0; i < SESSIONS; i++) {
    const key = keyOf(i);
    const sid = `sid-${i}`;
    sessions.push([key, "main", sid, "other", NOW, NOW + i, NOW]);
    transcripts.push([sid, key, NOW]);
    runs.push([`run-${i}`, key, sid, "message", "ok", NOW + i]);
    if (withMessages(i) || i === BIG)
      for (let seq = 1; seq <= (i === BIG ? BIG_MESSAGES : 3); seq++)
        messages.push([
          sid,
          seq,
          `${sid}:m${seq}`,
          "user",
          JSON.stringify([{ type: "text", text: i === BIG && seq === 1 ? LONG_TEXT : `hi ${seq}` }]),
          NOW,
        ]);
  }
  for (let n = 1; n <= BIG_RUNS; n++)
    runs.push([`run-${BIG}-${n}`, keyOf(BIG), `sid-${BIG}`, "message", "ok", NOW + n]);
  const home = db("DB");
  await insertRows(
    home,
    "sessions",
    ["key", "agent_id", "session_id", "kind", "created_at", "updated_at", "session_started_at"],
    sessions,
  );
  await insertRows(home, "transcripts", ["session_id", "session_key", "created_at"], transcripts);
  await insertRows(home, "messages", ["session_id", "seq", "id", "role", "content", "timestamp"], messages);
  await insertRows(
    home,
    "runs",
    ["run_id", "session_key", "session_id", "trigger", "status", "created_at"],
    runs,
  );
  // A few rows of the tables moved by a scan (no index on their key), one of them of a deleted session.
  await insertRows(
    home,
    "run_prefixes",
    ["prefix", "session_key"],
    [0, 1, 2, 3].map((i) => [`p-${i}`, keyOf(i)]).concat([["p-gone", "agent:main:deleted"]]),
  );
  await insertRows(
    home,
    "dead_records",
    ["run_id", "session_key", "error", "attempts", "body", "created_at"],
    [["run-dead", keyOf(BIG), "D1 said no", 5, "{}", NOW]],
  );
  await insertRows(
    home,
    "deliveries",
    [
      "delivery_id",
      "kind",
      "session_key",
      "channel",
      "account_id",
      "to",
      "text",
      "status",
      "created_at",
      "updated_at",
    ],
    [1, 2, 3].map((i) => [
      `d-${i}`,
      "reply",
      keyOf(i),
      "telegram",
      "default",
      "42",
      "hi",
      "delivered",
      NOW,
      NOW,
    ]),
  );
  await writePlacementRecord(home, ONE, NOW);
}

/** Every row of the session tables, by database: [table, key] pairs (messages through their transcript). */
async function placedRows(names: string[]) {
  const out: Record<string, Array<[string, string]>> = {};
  for (const name of names) {
    const [sessions, transcripts, messages, runs, prefixes, deliveries, dead] = await db(name).batch([
      db(name).prepare("SELECT key AS k FROM sessions"),
      db(name).prepare("SELECT session_key AS k FROM transcripts"),
      db(name).prepare(
        "SELECT t.session_key AS k FROM messages m JOIN transcripts t ON t.session_id = m.session_id",
      ),
      db(name).prepare("SELECT session_key AS k FROM runs"),
      db(name).prepare("SELECT session_key AS k FROM run_prefixes"),
      db(name).prepare("SELECT session_key AS k FROM deliveries"),
      db(name).prepare("SELECT session_key AS k FROM dead_records"),
    ]);
    const rows = {
      sessions,
      transcripts,
      messages,
      runs,
      run_prefixes: prefixes,
      deliveries,
      dead_records: dead,
    };
    out[name] = Object.entries(rows).flatMap(([table, r]) =>
      ((r?.results ?? []) as Array<{ k: string }>).map((row): [string, string] => [table, row.k]),
    );
  }
  return out;
}

/** Checks that each row is in the database its key places it in under `list`, exactly once. */
async function expectPlaced(list: string[]) {
  const rows = await placedRows(FOUR);
  const seen = new Map<string, number>();
  const misplaced: string[] = [];
  for (const [name, pairs] of Object.entries(rows)) {
    for (const [table, key] of pairs) {
      if (list[placeKey(list, key)] !== name) misplaced.push(`${table} ${key} in ${name}`);
      const id = `${table} ${key}`;
      seen.set(id, (seen.get(id) ?? 0) + 1);
    }
  }
  expect(misplaced).toEqual([]);
  const count = (table: string) => [...seen.keys()].filter((id) => id.startsWith(`${table} `)).length;
  expect(count("sessions")).toBe(SESSIONS);
  expect(count("transcripts")).toBe(SESSIONS);
  expect(count("runs")).toBe(SESSIONS);
  const times = (id: string) =>
    id === `messages ${keyOf(BIG)}`
      ? BIG_MESSAGES
      : id === `runs ${keyOf(BIG)}`
        ? BIG_RUNS + 1
        : id.startsWith("messages ")
          ? 3
          : 1;
  expect([...seen.entries()].filter(([id, n]) => n !== times(id))).toEqual([]);
  expect(count("messages")).toBe(SESSIONS / 10 + 1);
  expect(count("run_prefixes")).toBe(5);
  expect(count("deliveries")).toBe(3);
  expect(count("dead_records")).toBe(1);
}

async function tableCounts(names: string[]) {
  const out: Record<
    string,
    { sessions: number; transcripts: number; messages: number; runs: number; records: number }
  > = {};
  for (const name of names) {
    const [a, b, c, d, p] = await db(name).batch(
      ["sessions", "transcripts", "messages", "runs", "storage_placement"].map((t) =>
        db(name).prepare(`SELECT count(*) AS n FROM ${t}`),
      ),
    );
    const n = (r: D1Result | undefined) => (r?.results[0] as { n: number } | undefined)?.n ?? 0;
    out[name] = { sessions: n(a), transcripts: n(b), messages: n(c), runs: n(d), records: n(p) };
  }
  return out;
}

class Killed extends Error {}

interface Counted {
  env: Env;
  statements: () => number;
}

/**
 * The env with each D1 binding wrapped: statements are counted, and `die` decides, before a
 * batch runs ("before") or once it has run ("after"), whether the Worker dies there.
 */
function wrapped(
  base: Env,
  die: (sql: string[], when: "before" | "after", total: number) => boolean = () => false,
): Counted {
  let total = 0;
  const real = new WeakMap<object, D1PreparedStatement>();
  const sqlOf = new WeakMap<object, string>();
  const statement = (s: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const run = async <T>(f: () => Promise<T>) => {
      if (die([sql], "before", total + 1)) throw new Killed(`killed before: ${sql.slice(0, 40)}`);
      total++;
      const result = await f();
      if (die([sql], "after", total)) throw new Killed(`killed after: ${sql.slice(0, 40)}`);
      return result;
    };
    const w = {
      bind: (...values: unknown[]) => statement(s.bind(...values), sql),
      first: (col?: string) => run(() => (col === undefined ? s.first() : s.first(col))),
      all: () => run(() => s.all()),
      run: () => run(() => s.run()),
      raw: (opts?: { columnNames?: boolean }) => run(() => s.raw(opts as { columnNames: true })),
    } as unknown as D1PreparedStatement;
    real.set(w, s);
    sqlOf.set(w, sql);
    return w;
  };
  const database = (d: D1Database): D1Database =>
    ({
      prepare: (sql: string) => statement(d.prepare(sql), sql),
      batch: async (list: D1PreparedStatement[]) => {
        const sqls = list.map((s) => sqlOf.get(s) ?? "");
        if (die(sqls, "before", total + list.length))
          throw new Killed(`killed before a batch of ${list.length}`);
        total += list.length;
        const results = await d.batch(list.map((s) => real.get(s) ?? s));
        if (die(sqls, "after", total)) throw new Killed(`killed after a batch of ${list.length}`);
        return results;
      },
      exec: (sql: string) => d.exec(sql),
    }) as unknown as D1Database;
  const bindings = Object.fromEntries(FOUR.map((name) => [name, database(bindingOf(base, name))]));
  return { env: { ...base, ...bindings } as Env, statements: () => total };
}

/** Calls rebalance from `cursor` until done (or until the env's binding dies: the error). */
async function rebalanceAll(e: Env, opts: { limit: number; cursor?: string; dryRun?: boolean }) {
  let cursor = opts.cursor;
  const calls: RebalanceProgress[] = [];
  for (;;) {
    const p = await rebalance(e, { limit: opts.limit, cursor, dryRun: opts.dryRun, now: NOW });
    calls.push(p);
    if (p.done) return calls;
    cursor = p.cursor;
  }
}

const movedIn = (calls: RebalanceProgress[]) =>
  calls.reduce((n, c) => n + Object.values(c.databases).reduce((m, d) => m + d.moved, 0), 0);

/** How many of the seeded sessions `to` places outside `from`'s database for them. */
function expectedMoves(from: string[], to: string[]) {
  let n = 0;
  for (let i = 0; i < SESSIONS; i++) if (from[placeKey(from, keyOf(i))] !== to[placeKey(to, keyOf(i))]) n++;
  return n;
}

describe("storage rebalance", () => {
  beforeAll(seed, 60_000);

  it("refuses bad params with the field and the allowed values", async () => {
    const big = await call(configured(FOUR), "storage.rebalance", { limit: 5000 });
    expect(big.status).toBe(400);
    expect(big.error?.message).toBe("`limit`: must be a whole number between 1 and 1000 (got 5000)");
    const cursor = await call(configured(FOUR), "storage.rebalance", { cursor: "nope" });
    expect(cursor.status).toBe(400);
    expect(cursor.error?.message).toBe("`cursor` is not a cursor returned by storage.rebalance");
    const unknown = await call(configured(FOUR), "storage.verify", { deep: true });
    expect(unknown.status).toBe(400);
    expect(unknown.error?.message).toContain("`deep`");
  });

  it("a dry run counts what would move and changes nothing", SLOW, async () => {
    const before = await tableCounts(FOUR);
    const calls = await rebalanceAll(configured(FOUR), { limit: 1000, dryRun: true });
    expect(movedIn(calls)).toBe(expectedMoves(ONE, FOUR));
    expect(calls.every((c) => c.verify === undefined)).toBe(true);
    expect(await tableCounts(FOUR)).toEqual(before);
    const record = await db("DB").prepare("SELECT databases, moving_to FROM storage_placement").first();
    expect(record).toEqual({ databases: '["DB"]', moving_to: null });
  });

  it("spreads 10,000 sessions over four databases through three kills, then serves again", SLOW, async () => {
    const four = configured(FOUR);
    // Placed with ["DB"]: every request but the rebalance's own is refused, naming it.
    const refused = await call(four, "sessions.list", { limit: 1 });
    expect(refused.status).toBe(503);
    expect(refused.error?.message).toContain("switchboard storage rebalance");

    // The first kill: the 20th copy of a batch of rows is in its target, its delete not yet run.
    let copies = 0;
    const first = wrapped(
      four,
      (sql, when) => when === "after" && sql.some((s) => s.startsWith("INSERT OR IGNORE")) && ++copies === 20,
    );
    const beforeKill: RebalanceProgress[] = [];
    await expect(
      (async () => {
        let cursor: string | undefined;
        for (;;) {
          const p = await call<RebalanceProgress>(first.env, "storage.rebalance", {
            limit: 500,
            ...(cursor ? { cursor } : {}),
          });
          if (p.status !== 200) throw new Killed(p.error?.message);
          beforeKill.push(p.payload);
          cursor = p.payload.cursor;
        }
      })(),
    ).rejects.toThrow(Killed);
    // Meanwhile the gateway refuses: the start is recorded before anything moves.
    expect((await call(four, "sessions.list", { limit: 1 })).status).toBe(503);
    // The rows of the killed batch are in their source and their target.
    const halfway = Object.values(await tableCounts(FOUR));
    const rows = halfway.reduce((n, c) => n + c.sessions + c.transcripts + c.messages + c.runs, 0);
    expect(rows).toBeGreaterThan(3 * SESSIONS + 3 * (SESSIONS / 10) + BIG_MESSAGES + BIG_RUNS);

    // The second kill, from the cursor of the last call that answered: after a delete at a
    // source, before the next copy. The third: before the 150th statement, wherever that is.
    let deletes = 0;
    const second = wrapped(
      four,
      (sql, when) => when === "after" && sql.some((s) => s.startsWith("DELETE")) && ++deletes === 15,
    );
    const cursor = beforeKill[beforeKill.length - 1]?.cursor;
    expect(cursor).toBeDefined();
    await expect(rebalanceAll(second.env, { limit: 500, cursor })).rejects.toThrow(Killed);
    const third = wrapped(four, (_sql, when, total) => when === "before" && total >= 150);
    await expect(rebalanceAll(third.env, { limit: 500 })).rejects.toThrow(Killed);

    // Started again from scratch: slower, as correct.
    const counted = wrapped(four);
    const calls = await rebalanceAll(counted.env, { limit: 500 });
    const last = calls[calls.length - 1] as RebalanceProgress;
    expect(last.verify).toMatchObject({ ok: true, problems: [], recorded: true });
    expect(last.verify?.rows.sessions).toEqual({ found: SESSIONS, atStart: SESSIONS });
    expect(last.remaining).toEqual({ sessions: 0, toMove: 0 });
    await expectPlaced(FOUR);
    const long = await db(FOUR[placeKey(FOUR, keyOf(BIG))] as string)
      .prepare("SELECT content FROM messages WHERE id = ?1")
      .bind(`sid-${BIG}:m1`)
      .first<{ content: string }>();
    expect(long?.content).toBe(JSON.stringify([{ type: "text", text: LONG_TEXT }]));
    // Few statements per session moved (counted over the last pass, which moved a third of them).
    const moved = movedIn(calls);
    expect(moved).toBeGreaterThan(expectedMoves(ONE, FOUR) / 4);
    const perSession = counted.statements() / moved;
    expect(perSession).toBeLessThan(0.5);

    // Every database records the list; the gateway serves again.
    for (const name of FOUR) {
      const record = await db(name)
        .prepare("SELECT databases, moving_to, counts FROM storage_placement")
        .first();
      expect(record).toEqual({ databases: JSON.stringify(FOUR), moving_to: null, counts: null });
    }
    const listed = await call<{ count: number }>(four, "sessions.list", { limit: 5 });
    expect(listed.status).toBe(200);
    const away =
      Array.from({ length: SESSIONS }, (_, i) => i).find((i) => placeKey(FOUR, keyOf(i)) !== 0) ?? 0;
    const got = await call<{ key: string; sessionId: string }>(four, "sessions.get", { key: keyOf(away) });
    expect(got.payload).toMatchObject({ key: keyOf(away), sessionId: `sid-${away}` });
  });

  it("verify names a doubled row, and the gateway keeps its list", async () => {
    const four = configured(FOUR);
    const key = keyOf(7);
    const home = FOUR[placeKey(FOUR, key)] as string;
    const other = FOUR.find((n) => n !== home) as string;
    await db(other)
      .prepare(
        `INSERT INTO sessions (key, agent_id, session_id, kind, created_at, updated_at, session_started_at)
         VALUES (?1, 'main', 'sid-doubled', 'other', ?2, ?2, ?2)`,
      )
      .bind(key, NOW)
      .run();
    const v = await call<Awaited<ReturnType<typeof verifyPlacement>>>(four, "storage.verify");
    expect(v.status).toBe(200);
    expect(v.payload.ok).toBe(false);
    expect(v.payload.problems).toEqual([
      {
        problem: "doubled",
        table: "sessions",
        key,
        database: other,
        belongsIn: home,
        message: `sessions rows of ${key} are in both ${other} and ${home}; they belong in ${home}`,
      },
    ]);
    // A verify that fails takes nothing back: the gateway still serves with the list.
    expect((await call(four, "sessions.list", { limit: 1 })).status).toBe(200);
    await db(other).prepare("DELETE FROM sessions WHERE session_id = 'sid-doubled'").run();
    expect((await call<{ ok: boolean }>(four, "storage.verify")).payload.ok).toBe(true);
  });

  it("needs every binding of the earlier list", async () => {
    const missing = await call(configured(ONE, { DB_3: undefined }), "storage.rebalance", {});
    expect(missing.status).toBe(409);
    expect(missing.error?.message).toContain('no D1 binding named "DB_3"');
    expect(missing.error?.message).toContain("keep the bindings of the earlier list");
  });

  it(
    "moves them back from four databases to one, leaving a row the target refuses where it is",
    SLOW,
    async () => {
      const one = configured(ONE);
      expect((await call(one, "sessions.list", { limit: 1 })).status).toBe(503);
      // Two sessions of one agent with one label, in two databases: DB takes only one of them.
      const inDb = (n: number) =>
        keyOf(Array.from({ length: SESSIONS }, (_, i) => i).find((i) => placeKey(FOUR, keyOf(i)) === n) ?? 0);
      const [first, second] = [inDb(1), inDb(2)];
      await db("DB_1").prepare("UPDATE sessions SET label = 'standup' WHERE key = ?1").bind(first).run();
      await db("DB_2").prepare("UPDATE sessions SET label = 'standup' WHERE key = ?1").bind(second).run();

      const calls = await rebalanceAll(one, { limit: 1000 });
      // DB stays in the list and no database was added: only the three others were scanned.
      expect(Object.keys(calls[0]?.databases ?? {})).toEqual(["DB_1", "DB_2", "DB_3"]);
      expect(calls.flatMap((c) => c.conflicts)).toEqual([
        { table: "sessions", key: second, database: "DB_2", target: "DB" },
      ]);
      const refused = calls[calls.length - 1]?.verify;
      expect(refused?.ok).toBe(false);
      expect(refused?.problems.map((p) => [p.problem, p.table, p.key, p.database])).toContainEqual([
        "misplaced",
        "sessions",
        second,
        "DB_2",
      ]);
      expect(
        refused?.problems.every((p) => p.key === second && p.database === "DB_2" && p.belongsIn === "DB"),
      ).toBe(true);
      expect((await call(one, "sessions.list", { limit: 1 })).status).toBe(503);

      // The operator clears the label; the next rebalance moves that session too.
      await db("DB_2").prepare("UPDATE sessions SET label = NULL WHERE key = ?1").bind(second).run();
      const again = await rebalanceAll(one, { limit: 1000 });
      expect(movedIn(calls) + movedIn(again)).toBe(expectedMoves(FOUR, ONE));
      expect(again[again.length - 1]?.verify).toMatchObject({ ok: true, recorded: true });
      await expectPlaced(ONE);
      const counts = await tableCounts(FOUR);
      expect(counts.DB).toMatchObject({
        sessions: SESSIONS,
        transcripts: SESSIONS,
        runs: SESSIONS + BIG_RUNS,
      });
      for (const name of ["DB_1", "DB_2", "DB_3"]) {
        expect(counts[name]).toEqual({ sessions: 0, transcripts: 0, messages: 0, runs: 0, records: 1 });
        // A database dropped from the list records it too: its rows are placed with it (none).
        expect(await db(name).prepare("SELECT databases FROM storage_placement").first()).toEqual({
          databases: '["DB"]',
        });
      }
      expect((await call(one, "sessions.list", { limit: 1 })).status).toBe(200);
    },
  );

  it(
    "replaces the only database: the sessions and the deployment's own rows move to the new one",
    SLOW,
    async () => {
      const home = db("DB");
      await insertRows(home, "maintenance", ["task", "last_run_at", "last_run"], [["retention", NOW, "{}"]]);
      await insertRows(
        home,
        "memories",
        ["id", "agent_id", "key", "text", "created_at", "updated_at"],
        [
          ["mem-1", "main", "tz", "Europe/Berlin", NOW, NOW],
          ["mem-2", "main", null, "likes tea", NOW, NOW],
        ],
      );
      await insertRows(
        home,
        "job_runs",
        ["job_id", "scheduled_for", "run_id", "session_key", "claimed_at"],
        [["digest", NOW, "run-job", keyOf(1), NOW]],
      );
      await insertRows(
        home,
        "paired_senders",
        ["channel", "peer_id", "approved_at"],
        [["telegram", "42", NOW]],
      );
      const other = configured(["DB_1"]);
      // DB_1 records ["DB"] (a database the last rebalance dropped): the earlier list is read there.
      const calls = await rebalanceAll(other, { limit: 1000 });
      expect(calls[0]?.from).toEqual(["DB"]);
      expect(movedIn(calls)).toBe(SESSIONS);
      // The scanned tables moved whole, the run-id prefix of a session deleted since included.
      const rows = (t: string) => calls.reduce((n, c) => n + (c.rows[t] ?? 0), 0);
      expect([rows("run_prefixes"), rows("dead_records")]).toEqual([5, 1]);
      expect(calls[calls.length - 1]?.verify).toMatchObject({ ok: true, recorded: true });
      const deployment = ["maintenance", "memories", "job_runs", "paired_senders"];
      for (const [name, n] of [
        ["DB", 0],
        ["DB_1", 1],
      ] as const) {
        const [a, b, c, d] = await db(name).batch(
          deployment.map((t) => db(name).prepare(`SELECT count(*) AS n FROM ${t}`)),
        );
        expect([a, b, c, d].map((r) => (r?.results[0] as { n: number } | undefined)?.n)).toEqual([
          n,
          2 * n,
          n,
          n,
        ]);
      }
      const counts = await tableCounts(["DB", "DB_1"]);
      expect(counts.DB).toEqual({ sessions: 0, transcripts: 0, messages: 0, runs: 0, records: 1 });
      expect(counts.DB_1).toMatchObject({ sessions: SESSIONS, messages: (SESSIONS / 10) * 3 + BIG_MESSAGES });
      expect((await call(other, "sessions.list", { limit: 1 })).status).toBe(200);
    },
  );
});
