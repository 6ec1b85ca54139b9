/**
 * `npm run migrate`: applies the D1 migrations (migrations/) to every D1 database wrangler.toml
 * declares, so each database of `storage.d1` (SPEC §19) has the same schema. Local by default;
 * `--remote` applies them to the deployed databases (what `npm run deploy` does first);
 * `--env <name>` takes the databases of that wrangler environment; `--config <file>` another
 * wrangler config. Stops at the first database wrangler fails on, naming it.
 *
 *   npm run migrate                 # local (wrangler dev's databases)
 *   npm run migrate -- --remote     # the deployed databases
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

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
  }
  console.log(`[migrate] ${names.length} database${names.length === 1 ? "" : "s"} up to date`);
}

if (import.meta.filename === process.argv[1]) main();
