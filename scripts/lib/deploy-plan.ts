/**
 * What `npm run deploy` does, as data: the D1 databases and R2 buckets of a wrangler config that
 * the account lacks, and the wrangler commands that create them, then migrate, then deploy.
 * Pure: the account's listings come in as text and the commands go out through a host
 * (scripts/deploy.ts runs the real wrangler; test/unit/deploy-plan.test.ts a fake), so no
 * Cloudflare call is needed to test which commands run and in what order.
 *
 * The resources are created before the migrations, not left to `wrangler deploy`'s own
 * provisioning: the migrations must reach a database before the Worker that reads it does.
 */

/** The parts of a wrangler config (top level, as wrangler reads it) that name resources. */
export interface ResourceBindings {
  name?: string;
  d1_databases?: ReadonlyArray<{ binding: string; database_name?: string; database_id?: string }>;
  r2_buckets?: ReadonlyArray<{ binding: string; bucket_name?: string; jurisdiction?: string }>;
}

/** A D1 database or R2 bucket the deployed Worker binds by name. */
export interface Resource {
  kind: "d1" | "r2";
  binding: string;
  /** The database's or bucket's name in the account. */
  name: string;
  /** R2 only: the jurisdiction the bucket lives in (none: the default one). */
  jurisdiction?: string;
}

/**
 * The name wrangler gives a resource whose binding names none (`<worker>-<binding>`, lowercase,
 * `_` as `-`), as its deploy provisioning and its D1 commands look it up.
 */
export function autoProvisionedName(workerName: string | undefined, binding: string): string {
  if (!workerName) {
    throw new Error(`binding ${binding} names no database or bucket, and the wrangler config has no "name"`);
  }
  return `${workerName}-${binding.toLowerCase().replaceAll("_", "-")}`;
}

/**
 * The resources a deploy must find in the account: every R2 bucket, and every D1 database
 * without a `database_id` (one with an id is pinned to a database that already exists).
 */
export function resourcesToEnsure(config: ResourceBindings): Resource[] {
  const d1 = (config.d1_databases ?? [])
    .filter((db) => !db.database_id)
    .map(
      (db): Resource => ({
        kind: "d1",
        binding: db.binding,
        name: db.database_name ?? autoProvisionedName(config.name, db.binding),
      }),
    );
  const r2 = (config.r2_buckets ?? []).map(
    (bucket): Resource => ({
      kind: "r2",
      binding: bucket.binding,
      name: bucket.bucket_name ?? autoProvisionedName(config.name, bucket.binding),
      ...(bucket.jurisdiction ? { jurisdiction: bucket.jurisdiction } : {}),
    }),
  );
  return [...d1, ...r2];
}

/** The database names of `wrangler d1 list --json`. */
export function parseD1List(stdout: string): Set<string> {
  const rows: unknown = JSON.parse(stdout);
  if (!Array.isArray(rows))
    throw new Error(`wrangler d1 list --json printed no list: ${stdout.slice(0, 200)}`);
  return new Set(rows.map((row: { name?: unknown }) => row.name).filter((n) => typeof n === "string"));
}

/**
 * The bucket names of `wrangler r2 bucket list` (it has no JSON output: a `name:` line per
 * bucket, colours already stripped).
 */
export function parseR2BucketList(stdout: string): Set<string> {
  return new Set([...stdout.matchAll(/^name:\s+(\S+)\s*$/gm)].map((m) => m[1] as string));
}

/** The wrangler arguments that list what exists of `kind` (R2: in one jurisdiction). */
export function listArgs(kind: Resource["kind"], configPath: string, jurisdiction?: string): string[] {
  return kind === "d1"
    ? ["d1", "list", "--json", "--config", configPath]
    : ["r2", "bucket", "list", ...(jurisdiction ? ["--jurisdiction", jurisdiction] : [])];
}

/**
 * The wrangler arguments that create `resource`. The config is left as it is: wrangler.toml
 * names the database and bucket, which is all wrangler needs to find them again.
 */
export function createArgs(resource: Resource, configPath: string): string[] {
  return resource.kind === "d1"
    ? ["d1", "create", resource.name, "--config", configPath]
    : [
        "r2",
        "bucket",
        "create",
        resource.name,
        ...(resource.jurisdiction ? ["--jurisdiction", resource.jurisdiction] : []),
        "--config",
        configPath,
      ];
}

/** One command of a deploy: wrangler itself, or scripts/migrate.ts. */
export interface Step {
  run: "wrangler" | "migrate";
  args: string[];
  /** What it does, for the log and for the message when it fails. */
  what: string;
  /** Logged once it succeeded. */
  done?: string;
}

/** The account's resources by kind (R2 by jurisdiction, "" the default one). */
export interface Existing {
  d1: ReadonlySet<string>;
  r2: ReadonlyMap<string, ReadonlySet<string>>;
}

/**
 * The steps of a deploy given what the account has: create each missing resource, apply the
 * migrations to the remote databases (when the config has any), then `wrangler deploy` with
 * `deployArgs` passed through.
 */
export function planDeploy(
  config: ResourceBindings,
  configPath: string,
  existing: Existing,
  deployArgs: readonly string[] = [],
): Step[] {
  const steps: Step[] = [];
  for (const resource of resourcesToEnsure(config)) {
    const has =
      resource.kind === "d1"
        ? existing.d1.has(resource.name)
        : (existing.r2.get(resource.jurisdiction ?? "")?.has(resource.name) ?? false);
    if (has) continue;
    steps.push({
      run: "wrangler",
      args: createArgs(resource, configPath),
      what: `create the ${resource.kind === "d1" ? "D1 database" : "R2 bucket"} ${resource.name} (${resource.binding})`,
      // wrangler prints a config snippet to paste after creating; the config already has it.
      done: `[deploy] ${resource.name} created; the config binds it by name already, nothing to paste`,
    });
  }
  if ((config.d1_databases ?? []).length > 0) {
    steps.push({
      run: "migrate",
      args: ["--remote", "--config", configPath],
      what: "apply the D1 migrations to every remote database",
    });
  }
  steps.push({
    run: "wrangler",
    args: ["deploy", "--config", configPath, ...deployArgs],
    what: "deploy the Worker",
  });
  return steps;
}

/** What a deploy needs from the machine it runs on. */
export interface DeployHost {
  /** Runs wrangler with its output captured (the listings); stdout has no colours. */
  query(args: string[]): { status: number | null; stdout: string; stderr: string };
  /** Runs a step with its output shown; its exit status. */
  run(step: Step): number | null;
  log(line: string): void;
}

/**
 * Lists what the account has, then runs the steps of `planDeploy` in order, stopping at the
 * first that fails. Returns the exit status. With `--dry-run` among `deployArgs` nothing remote
 * is listed, created or migrated: the resources are printed and only `wrangler deploy --dry-run`
 * runs (it builds the Worker and contacts no one).
 */
export function runDeploy(
  config: ResourceBindings,
  configPath: string,
  deployArgs: readonly string[],
  host: DeployHost,
): number {
  const resources = resourcesToEnsure(config);
  if (deployArgs.includes("--dry-run")) {
    for (const r of resources) {
      host.log(
        `[deploy] --dry-run: would create the ${r.kind.toUpperCase()} ${r.name} (${r.binding}) if missing`,
      );
    }
    host.log("[deploy] --dry-run: no migrations applied");
    const deployStep: Step = {
      run: "wrangler",
      args: ["deploy", "--config", configPath, ...deployArgs],
      what: "build the Worker (dry run)",
    };
    return finish(deployStep, host.run(deployStep), host);
  }

  const d1 = new Set<string>();
  const r2 = new Map<string, Set<string>>();
  const listings: Array<[Resource["kind"], string | undefined]> = [];
  if (resources.some((r) => r.kind === "d1")) listings.push(["d1", undefined]);
  for (const j of new Set(resources.filter((r) => r.kind === "r2").map((r) => r.jurisdiction ?? ""))) {
    listings.push(["r2", j || undefined]);
  }
  for (const [kind, jurisdiction] of listings) {
    const args = listArgs(kind, configPath, jurisdiction);
    const result = host.query(args);
    if (result.status !== 0) {
      host.log(`[deploy] wrangler ${args.join(" ")} failed (exit ${result.status}): nothing was changed`);
      host.log(result.stderr || result.stdout);
      return result.status ?? 1;
    }
    if (kind === "d1") for (const name of parseD1List(result.stdout)) d1.add(name);
    else r2.set(jurisdiction ?? "", parseR2BucketList(result.stdout));
  }

  for (const step of planDeploy(config, configPath, { d1, r2 }, deployArgs)) {
    host.log(`[deploy] ${step.what}`);
    const status = finish(step, host.run(step), host);
    if (status !== 0) return status;
    if (step.done) host.log(step.done);
  }
  return 0;
}

function finish(step: Step, status: number | null, host: DeployHost): number {
  if (status === 0) return 0;
  host.log(`[deploy] could not ${step.what} (exit ${status}); run npm run deploy again once it is fixed`);
  return status ?? 1;
}
