import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { bindingOf, databaseNames } from "../../src/db/placement";
import { writePlacementRecord } from "../../src/db/placement-check";

// Setup files run outside per-file storage isolation and may run more than once;
// applyD1Migrations() only applies what is missing, so calling it here is safe. Every D1
// binding the tests have gets the migrations, as `npm run migrate` gives them to each database.
for (const name of ["DB", "DB_1", "DB_2", "DB_3"]) {
  const db = (env as unknown as Record<string, D1Database | undefined>)[name];
  if (db) await applyD1Migrations(db, env.TEST_MIGRATIONS);
}

// The gateway under test has started: each database of its storage.d1 records the list it is
// placed with, as a deployment's first start does (db/placement-check.ts). Rows a test writes
// straight to D1 before any request are then in databases placed with that list, not taken for
// rows of an earlier list. Written, not checked: the check is cached per isolate, and each test
// file starts from this state. Idempotent (an upsert).
const names = databaseNames(env);
for (const name of names) await writePlacementRecord(bindingOf(env, name), names, Date.now());
