/**
 * `npm run deploy`: deploys the gateway, on a fresh account as on one that has it. Creates the
 * D1 databases and R2 buckets the wrangler config names and the account lacks (`wrangler d1
 * create`, `wrangler r2 bucket create`), applies the D1 migrations to every remote database
 * (scripts/migrate.ts), then runs `wrangler deploy`. Run again, it creates nothing and applies
 * only the migrations still missing. No id is written anywhere: wrangler finds the database and
 * the bucket by the names in the config. What runs is decided by scripts/lib/deploy-plan.ts.
 *
 *   npm run deploy                                          # wrangler.toml
 *   npm run deploy -- --config wrangler.workers-ai.toml     # the Workers AI variant
 *   npm run deploy -- --dry-run --outdir /tmp/switchboard   # builds only; contacts no one
 *
 * Every argument but `--config` goes to `wrangler deploy` as it is.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";
import { experimental_readRawConfig } from "wrangler";
import { type DeployHost, runDeploy } from "./lib/deploy-plan.ts";

const root = path.resolve(import.meta.dirname, "..");
const wranglerBin = path.join(root, "node_modules/.bin/wrangler");

/** `--config <file>` (or `-c`, or `--config=<file>`) out of `argv`; the rest for `wrangler deploy`. */
function splitConfigArg(argv: readonly string[]): { config: string; rest: string[] } {
  let config = path.join(root, "wrangler.toml");
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--config" || arg === "-c") {
      const value = argv[++i];
      if (!value) throw new Error(`${arg} needs a file`);
      config = path.resolve(value);
    } else if (arg.startsWith("--config=")) {
      config = path.resolve(arg.slice("--config=".length));
    } else {
      rest.push(arg);
    }
  }
  return { config, rest };
}

function main(): void {
  const { config, rest } = splitConfigArg(process.argv.slice(2));
  const { rawConfig } = experimental_readRawConfig({ config }, { hideWarnings: true });
  const host: DeployHost = {
    query(args) {
      const result = spawnSync(wranglerBin, args, {
        cwd: root,
        encoding: "utf8",
        env: { ...process.env, FORCE_COLOR: "0" },
      });
      return {
        status: result.status,
        stdout: stripVTControlCharacters(result.stdout ?? ""),
        stderr: result.stderr ?? "",
      };
    },
    run(step) {
      const [command, args] =
        step.run === "wrangler"
          ? [wranglerBin, step.args]
          : [process.execPath, [path.join(root, "scripts/migrate.ts"), ...step.args]];
      return spawnSync(command, args, { cwd: root, stdio: "inherit" }).status;
    },
    log: (line) => console.log(line),
  };
  process.exit(runDeploy(rawConfig, config, rest, host));
}

if (import.meta.filename === process.argv[1]) main();
