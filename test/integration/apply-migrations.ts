import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

// Setup files run outside per-file storage isolation and may run more than once;
// applyD1Migrations() only applies what is missing, so calling it here is safe. Every D1
// binding the tests have gets the migrations, as `npm run migrate` gives them to each database.
for (const name of ["DB", "DB_1", "DB_2", "DB_3"]) {
  const db = (env as unknown as Record<string, D1Database | undefined>)[name];
  if (db) await applyD1Migrations(db, env.TEST_MIGRATIONS);
}
