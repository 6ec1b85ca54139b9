/**
 * `npm run migrate`: applies the D1 migrations (migrations/) to every D1 database wrangler.toml
 * declares, so each database of `storage.d1` (SPEC §19) has the same schema. Local by default;
 * `--remote` applies them to the deployed databases (what `npm run deploy` does before deploying);
 * `--env <name>` takes the databases of that wrangler environment; `--config <file>` another
 * wrangler config. Stops at the first database wrangler fails on, naming it.
 *
 *   npm run migrate                 # local (wrangler dev's databases)
 *   npm run migrate -- --remote     # the deployed databases
 *
 * Then it indexes, for transcript search, the messages stored before the search index existed
 * (migration 0010), a bounded step at a time until none is left; interrupted, it resumes where
 * it stopped (the cron trigger also runs it, a few steps a minute).
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { BACKFILL_LEFT_ROWIDS_SQL, BACKFILL_STEP_SQL } from "../src/db/search-backfill.ts";

const root = path.resolve(import.meta.dirname, "..");

/** The `database_name`s of the [[d1_databases]] of the top level, or of `[env.<env>]`. */
export function d1DatabaseNames(toml: string, env?: string): string[] {
  const header = env ? `[[env.${env}.d1_databases]]` : "[[d1_databases]]";
  const names: string[] = [];
  let inBlock = false;
  for (const line of toml.split("\n")) {
    const trimmed = line.trim();
    if (trimmed.startsWith("[")) {
      inBlock = trimmed === header;
      continue;
    }
    const name = inBlock ? /^database_name\s*=\s*"([^"]+)"/.exec(trimmed)?.[1] : undefined;
    if (name) names.push(name);
  }
  return names;
}

function main(): void {
  const { values } = parseArgs({
    options: {
      remote: { type: "boolean", default: false },
      env: { type: "string" },
      config: { type: "string", default: path.join(root, "wrangler.toml") },
    },
  });
  const names = d1DatabaseNames(readFileSync(values.config, "utf8"), values.env);
  if (names.length === 0) {
    console.error(`${values.config} declares no D1 database${values.env ? ` in [env.${values.env}]` : ""}`);
    process.exit(1);
  }
  const where = values.remote ? "--remote" : "--local";
  for (const name of names) {
    console.log(`[migrate] ${name} (${where.slice(2)})`);
    const args = ["d1", "migrations", "apply", name, where, "--config", values.config];
    if (values.env) args.push("--env", values.env);
    const result = spawnSync(path.join(root, "node_modules/.bin/wrangler"), args, {
      stdio: "inherit",
      env: { ...process.env, CI: process.env.CI ?? "true" },
    });
    if (result.status !== 0) {
      console.error(`[migrate] applying the migrations to ${name} failed (exit ${result.status})`);
      process.exit(result.status ?? 1);
    }
    backfillSearch(name, where, values.config, values.env);
  }
  console.log(`[migrate] ${names.length} database${names.length === 1 ? "" : "s"} up to date`);
}

/** At most this many backfill steps per database in one run (2,000 rowids each: 20M messages). */
const MAX_BACKFILL_STEPS = 10_000;

/** Runs the search index's backfill steps on one database until nothing is left. */
function backfillSearch(name: string, where: string, config: string, env: string | undefined): void {
  const command = [...BACKFILL_STEP_SQL, BACKFILL_LEFT_ROWIDS_SQL]
    .map((q) => q.replace(/\s+/g, " "))
    .join("; ");
  for (let step = 0; step < MAX_BACKFILL_STEPS; step++) {
    const args = ["d1", "execute", name, where, "--config", config, "--json", "--command", command];
    if (env) args.push("--env", env);
    const result = spawnSync(path.join(root, "node_modules/.bin/wrangler"), args, {
      encoding: "utf8",
      env: { ...process.env, CI: process.env.CI ?? "true" },
    });
    if (result.status !== 0) {
      console.error(
        `[migrate] indexing ${name} for search failed (exit ${result.status}); run it again to resume`,
      );
      console.error(result.stderr || result.stdout);
      process.exit(result.status ?? 1);
    }
    const answers = JSON.parse(result.stdout) as Array<{ results: Array<{ rowids?: number }> }>;
    const left = answers.at(-1)?.results[0]?.rowids ?? 0;
    if (left <= 0) {
      if (step > 0) console.log(`[migrate] ${name}: search index backfilled (${step} steps)`);
      return;
    }
    if (step % 20 === 0) console.log(`[migrate] ${name}: indexing for search, ${left} rowids left`);
  }
}

if (import.meta.filename === process.argv[1]) main();
