/**
 * `npm run deploy` (scripts/lib/deploy-plan.ts) with wrangler faked: which databases and
 * buckets it creates on a fresh account and on one that has them, the order of creation,
 * migrations and deploy, and where it stops. No Cloudflare call is made.
 */
import { describe, expect, it } from "vitest";
import {
  autoProvisionedName,
  type DeployHost,
  parseD1List,
  parseR2BucketList,
  planDeploy,
  type ResourceBindings,
  resourcesToEnsure,
  runDeploy,
  type Step,
} from "../../scripts/lib/deploy-plan";

const CONFIG = "/repo/wrangler.toml";

/** wrangler.toml's resources. */
const GATEWAY: ResourceBindings = {
  name: "switchboard",
  d1_databases: [{ binding: "DB", database_name: "switchboard" }],
  r2_buckets: [{ binding: "MEDIA", bucket_name: "switchboard-media" }],
};

/** `wrangler r2 bucket list` as wrangler prints it (a `name:` line per bucket). */
function r2ListOutput(names: string[]): string {
  const rows = names.map((n) => `name:           ${n}\ncreation_date:  2026-01-02T03:04:05.000Z`);
  return `\n ⛅️ wrangler 4.156.2\n───────────\nListing buckets...\n${rows.join("\n\n")}\n`;
}

/**
 * A wrangler that answers the listings from `account` and records every command; `fail` makes
 * the command whose args start with it exit 1.
 */
function fakeWrangler(account: { d1: string[]; r2: string[] }, fail?: string) {
  const ran: string[] = [];
  const log: string[] = [];
  const failing = (args: string[]) => fail !== undefined && args.join(" ").startsWith(fail);
  const host: DeployHost = {
    query(args) {
      ran.push(`wrangler ${args.join(" ")}`);
      if (failing(args)) return { status: 1, stdout: "", stderr: "Authentication error [code: 10000]" };
      if (args[0] === "d1") {
        const rows = account.d1.map((name, i) => ({ uuid: `uuid-${i}`, name, version: "production" }));
        return { status: 0, stdout: JSON.stringify(rows, null, 2), stderr: "" };
      }
      return { status: 0, stdout: r2ListOutput(account.r2), stderr: "" };
    },
    run(step: Step) {
      ran.push(`${step.run} ${step.args.join(" ")}`);
      return failing(step.args) ? 1 : 0;
    },
    log: (line) => log.push(line),
  };
  return { host, ran, log };
}

describe("resourcesToEnsure", () => {
  it("takes every bucket and every database without a database_id", () => {
    expect(
      resourcesToEnsure({
        name: "switchboard",
        d1_databases: [
          { binding: "DB", database_name: "switchboard" },
          { binding: "DB_1", database_name: "switchboard-1", database_id: "6f1c…" },
        ],
        r2_buckets: [
          { binding: "MEDIA", bucket_name: "switchboard-media" },
          { binding: "ARCHIVE", bucket_name: "archive", jurisdiction: "eu" },
        ],
      }),
    ).toEqual([
      { kind: "d1", binding: "DB", name: "switchboard" },
      { kind: "r2", binding: "MEDIA", name: "switchboard-media" },
      { kind: "r2", binding: "ARCHIVE", name: "archive", jurisdiction: "eu" },
    ]);
  });

  it("names a binding without a name as wrangler's provisioning does", () => {
    expect(resourcesToEnsure({ name: "switchboard", d1_databases: [{ binding: "DB_2" }] })).toEqual([
      { kind: "d1", binding: "DB_2", name: "switchboard-db-2" },
    ]);
    expect(() => autoProvisionedName(undefined, "MEDIA")).toThrow(
      'binding MEDIA names no database or bucket, and the wrangler config has no "name"',
    );
  });
});

describe("the listings", () => {
  it("reads the names of `wrangler d1 list --json`", () => {
    expect(parseD1List('[{"uuid":"a","name":"switchboard"},{"uuid":"b","name":"other"}]')).toEqual(
      new Set(["switchboard", "other"]),
    );
    expect(() => parseD1List('{"error":"x"}')).toThrow("wrangler d1 list --json printed no list");
  });

  it("reads the names of `wrangler r2 bucket list`", () => {
    expect(parseR2BucketList(r2ListOutput(["switchboard-media", "logs"]))).toEqual(
      new Set(["switchboard-media", "logs"]),
    );
    expect(parseR2BucketList(r2ListOutput([]))).toEqual(new Set());
  });
});

describe("planDeploy", () => {
  it("creates nothing when the account has everything, then migrates and deploys", () => {
    const steps = planDeploy(GATEWAY, CONFIG, {
      d1: new Set(["switchboard"]),
      r2: new Map([["", new Set(["switchboard-media"])]]),
    });
    expect(steps.map((s) => `${s.run} ${s.args.join(" ")}`)).toEqual([
      `migrate --remote --config ${CONFIG}`,
      `wrangler deploy --config ${CONFIG}`,
    ]);
  });

  it("looks for a bucket in its own jurisdiction", () => {
    const config: ResourceBindings = { r2_buckets: [{ binding: "M", bucket_name: "m", jurisdiction: "eu" }] };
    const inDefault = planDeploy(config, CONFIG, { d1: new Set(), r2: new Map([["", new Set(["m"])]]) });
    expect(inDefault[0]?.args).toEqual([
      "r2",
      "bucket",
      "create",
      "m",
      "--jurisdiction",
      "eu",
      "--config",
      CONFIG,
    ]);
    const inEu = planDeploy(config, CONFIG, { d1: new Set(), r2: new Map([["eu", new Set(["m"])]]) });
    expect(inEu.map((s) => s.args[0])).toEqual(["deploy"]);
  });
});

describe("runDeploy", () => {
  it("on a fresh account creates the database and the bucket, then migrates, then deploys", () => {
    const { host, ran, log } = fakeWrangler({ d1: [], r2: [] });
    expect(runDeploy(GATEWAY, CONFIG, ["--keep-vars"], host)).toBe(0);
    expect(ran).toEqual([
      `wrangler d1 list --json --config ${CONFIG}`,
      "wrangler r2 bucket list",
      `wrangler d1 create switchboard --config ${CONFIG}`,
      `wrangler r2 bucket create switchboard-media --config ${CONFIG}`,
      `migrate --remote --config ${CONFIG}`,
      `wrangler deploy --config ${CONFIG} --keep-vars`,
    ]);
    expect(log).toContain(
      "[deploy] switchboard-media created; the config binds it by name already, nothing to paste",
    );
  });

  it("on an account that has them only migrates and deploys", () => {
    const { host, ran } = fakeWrangler({ d1: ["other", "switchboard"], r2: ["switchboard-media"] });
    expect(runDeploy(GATEWAY, CONFIG, [], host)).toBe(0);
    expect(ran.filter((c) => !c.includes(" list"))).toEqual([
      `migrate --remote --config ${CONFIG}`,
      `wrangler deploy --config ${CONFIG}`,
    ]);
  });

  it("changes nothing when a listing fails", () => {
    const { host, ran, log } = fakeWrangler({ d1: [], r2: [] }, "d1 list");
    expect(runDeploy(GATEWAY, CONFIG, [], host)).toBe(1);
    expect(ran).toEqual([`wrangler d1 list --json --config ${CONFIG}`]);
    expect(log).toEqual([
      `[deploy] wrangler d1 list --json --config ${CONFIG} failed (exit 1): nothing was changed`,
      "Authentication error [code: 10000]",
    ]);
  });

  it("stops at the first step that fails, before the Worker is deployed", () => {
    const { host, ran, log } = fakeWrangler({ d1: ["switchboard"], r2: [] }, "r2 bucket create");
    expect(runDeploy(GATEWAY, CONFIG, [], host)).toBe(1);
    expect(ran.at(-1)).toBe(`wrangler r2 bucket create switchboard-media --config ${CONFIG}`);
    expect(ran.some((c) => c.startsWith("migrate") || c.startsWith("wrangler deploy"))).toBe(false);
    expect(log.at(-1)).toBe(
      "[deploy] could not create the R2 bucket switchboard-media (MEDIA) (exit 1); run npm run deploy again once it is fixed",
    );
  });

  it("with --dry-run lists, creates and migrates nothing, and only builds", () => {
    const { host, ran, log } = fakeWrangler({ d1: [], r2: [] });
    expect(runDeploy(GATEWAY, CONFIG, ["--dry-run", "--outdir", "/tmp/x"], host)).toBe(0);
    expect(ran).toEqual([`wrangler deploy --config ${CONFIG} --dry-run --outdir /tmp/x`]);
    expect(log).toEqual([
      "[deploy] --dry-run: would create the D1 switchboard (DB) if missing",
      "[deploy] --dry-run: would create the R2 switchboard-media (MEDIA) if missing",
      "[deploy] --dry-run: no migrations applied",
    ]);
  });

  it("runs no migrations for a config without D1", () => {
    const { host, ran } = fakeWrangler({ d1: [], r2: ["b"] });
    expect(runDeploy({ r2_buckets: [{ binding: "B", bucket_name: "b" }] }, CONFIG, [], host)).toBe(0);
    expect(ran).toEqual(["wrangler r2 bucket list", `wrangler deploy --config ${CONFIG}`]);
  });
});
