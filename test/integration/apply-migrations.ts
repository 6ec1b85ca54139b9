/**
 * The setup of every workerd test file: each D1 binding the tests have gets the migrations, as
 * `npm run migrate` gives them to each database, and each database of storage.d1 records the
 * list it is placed with, as a deployment's first start does.
 *
 * Setup files run outside per-file storage isolation and may run more than once, so both steps
 * are idempotent. The migrations missing from a database go in one batch (one transaction), with
 * their rows in the `d1_migrations` table wrangler keeps (its name, columns and order), so a
 * test file starts in a few milliseconds instead of the seconds a statement-at-a-time apply
 * takes over four databases.
 */
import { env } from "cloudflare:workers";
import { bindingOf, databaseNames } from "../../src/db/placement";
import { writePlacementRecord } from "../../src/db/placement-check";

const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS d1_migrations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT UNIQUE,
  applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)`;

async function migrate(db: D1Database): Promise<void> {
  await db.prepare(MIGRATIONS_TABLE).run();
  const applied = await db.prepare("SELECT name FROM d1_migrations").all<{ name: string }>();
  const done = new Set(applied.results.map((r) => r.name));
  const missing = env.TEST_MIGRATIONS.filter((m) => !done.has(m.name));
  if (missing.length === 0) return;
  await db.batch(
    missing.flatMap((m) => [
      ...m.queries.map((q) => db.prepare(q)),
      db.prepare("INSERT INTO d1_migrations (name) VALUES (?)").bind(m.name),
    ]),
  );
}

for (const name of ["DB", "DB_1", "DB_2", "DB_3"]) {
  const db = (env as unknown as Record<string, D1Database | undefined>)[name];
  if (db) await migrate(db);
}

// Rows a test writes straight to D1 before any request are then in databases placed with that
// list, not taken for rows of an earlier list. Written, not checked: the check is cached per
// isolate, and each test file starts from this state. Idempotent (an upsert).
const names = databaseNames(env);
for (const name of names) await writePlacementRecord(bindingOf(env, name), names, Date.now());
