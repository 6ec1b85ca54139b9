/**
 * The platform floor of a read, for `npm run bench`: a bare Hono Worker (same framework,
 * compatibility date and flags as the gateway, none of its code) that does only what every
 * read through `POST /tools/invoke` must do. `POST /read` reads and parses a JSON body, makes
 * one D1 select of `limit + 1` rows shaped like a `sessions_list` page (the 24 listed columns of
 * the session index, nulls left out), and answers them as JSON. `GET /healthz` answers like the
 * gateway's. Under `wrangler dev` the D1 simulator, the request body and the answer's bytes are
 * workerd CPU too, so `/read ÷ /healthz` here is the lowest ratio a read path can have on this
 * host, and the bench prints each read path's ratio beside it. With `databases: 4` in the body
 * it makes the same select in each of 4 D1 databases in parallel and answers the newest
 * `limit` of them (the floor of a listing over 4 databases, as `storage.d1` spreads sessions).
 * `POST /seed` creates the rows in each database (idempotent).
 */
import { Hono } from "hono";

interface FloorEnv {
  DB: D1Database;
  DB_1: D1Database;
  DB_2: D1Database;
  DB_3: D1Database;
}

const databases = (env: FloorEnv) => [env.DB, env.DB_1, env.DB_2, env.DB_3];

const COLUMNS = [
  ["key", "text primary key"],
  ["agent_id", "text not null"],
  ["session_id", "text not null"],
  ["kind", "text not null"],
  ["channel", "text"],
  ["display_name", "text"],
  ["label", "text"],
  ["updated_at", "integer not null"],
  ["model", "text"],
  ["context_tokens", "integer not null"],
  ["total_tokens", "integer not null"],
  ["thinking_level", "text"],
  ["verbose_level", "text"],
  ["system_sent", "integer not null"],
  ["aborted_last_run", "integer not null"],
  ["send_policy", "text"],
  ["last_channel", "text"],
  ["last_to", "text"],
  ["delivery_context", "text"],
  ["spawned_by", "text"],
  ["archived_at", "integer"],
  ["run_status", "text not null"],
  ["expires_at", "integer"],
  ["expired_at", "integer"],
] as const;

const NAMES = COLUMNS.map(([name]) => name);
const SELECT = `select ${NAMES.map((n) => `"${n}"`).join(", ")} from "rows" where "agent_id" = ? order by "updated_at" desc, "key" desc limit ?`;

/** A row of the answer: the non-null columns, camelCased as the gateway names them. */
const PROPS = NAMES.map((n) => n.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()));

export default new Hono<{ Bindings: FloorEnv }>()
  .get("/healthz", (c) => c.json({ ok: true, version: "floor" }))
  .post("/seed", async (c) => {
    const { count = 60 } = JSON.parse((await c.req.text()) || "{}") as { count?: number };
    const now = Date.now();
    for (const [d, db] of databases(c.env).entries()) await seed(db, count, now, d * count);
    return c.json({ ok: true });
  })
  .post("/read", async (c) => {
    const body = JSON.parse(await c.req.text()) as { args?: { limit?: number }; databases?: number };
    const limit = body.args?.limit ?? 50;
    const pages = await Promise.all(
      databases(c.env)
        .slice(0, Math.min(Math.max(body.databases ?? 1, 1), 4))
        .map((db) =>
          db
            .prepare(SELECT)
            .bind("main", limit + 1)
            .raw(),
        ),
    );
    const rows = pages.length === 1 ? (pages[0] ?? []) : pages.flat().sort(newestFirst);
    const sessions = rows.slice(0, limit).map((values) => {
      const row: Record<string, unknown> = {};
      values.forEach((v, i) => {
        if (v !== null) row[PROPS[i] as string] = v;
      });
      return row;
    });
    return c.json({ ok: true, result: { count: sessions.length, sessions } });
  });

const UPDATED = NAMES.indexOf("updated_at");
const KEY = NAMES.indexOf("key");

/** Rows (raw) on the listing's order: `updated_at` desc, then `key` desc. */
function newestFirst(a: unknown[], b: unknown[]): number {
  const d = Number(b[UPDATED]) - Number(a[UPDATED]);
  return d !== 0 ? d : String(b[KEY]) < String(a[KEY]) ? -1 : String(b[KEY]) > String(a[KEY]) ? 1 : 0;
}

/** `count` list-shaped rows in `db`, numbered from `from + 1`. */
async function seed(db: D1Database, count: number, now: number, from: number): Promise<void> {
  await db.batch([
    db.prepare(`create table if not exists "rows" (${COLUMNS.map(([n, t]) => `"${n}" ${t}`).join(", ")})`),
    db.prepare(
      `create index if not exists "rows_recent" on "rows" ("agent_id", "updated_at" desc, "key" desc)`,
    ),
    db
      // D1 binds a JS number as a real: cast, so the keys read floor-1, not floor-1.0.
      .prepare(`with recursive n(i) as (select cast(?3 as integer) + 1 union all select i + 1 from n where i < cast(?3 as integer) + ?1)
insert or ignore into "rows" select 'agent:main:subagent:floor-' || i, 'main',
  printf('f100f100-0000-4000-8000-%012d', i), 'other', 'telegram', 'Floor ' || i, null, ?2 - i * 1000,
  'echo/echo', 32000, 40, null, null, 1, 0, null, 'telegram', 'peer-' || i,
  json_object('channel', 'telegram', 'to', 'peer-' || i), 'agent:main:main', null, 'idle', null, null
from n`)
      .bind(count, now, from),
  ]);
}
