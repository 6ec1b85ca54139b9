import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

/** The config integration tests run with; tests that need another one pass their own env. */
export const TEST_CONFIG = {
  connectors: {
    telegram: { deliverUrl: "https://connector.test/telegram", secretEnv: "DEV_CONNECTOR_SECRET" },
    slack: { deliverUrl: "https://connector.test/slack", secretEnv: "DEV_CONNECTOR_SECRET" },
  },
  delivery: { maxAttempts: 3, baseDelayMs: 50, maxDelayMs: 200 },
  // `fake/<model>` reaches the scripted model of test/integration/model-support.ts; echo stays the default.
  models: {
    retry: { attempts: 3, baseDelayMs: 1 },
    providers: { fake: { api: "openai-compatible", baseUrl: "https://model.test/v1" } },
  },
};

/** The D1 bindings the Workers tests have. */
export const TEST_D1 = ["DB", "DB_1", "DB_2", "DB_3"];

/**
 * The workerd files where the number of D1 databases matters (SPEC §19): listings and paging
 * merged across databases, label and sessionId resolution, the reset sweep, retention, jobs,
 * rebalance and placement, runs and deliveries listings, what a run writes where. The project
 * workers-d1x4 runs them again with sessions spread over four.
 */
const ACROSS_DATABASES = [
  "test/integration/actor-statements.test.ts",
  "test/integration/placement-gate.test.ts",
  "test/integration/rebalance.test.ts",
  "test/integration/reset-sweep.test.ts",
  "test/integration/retention.test.ts",
  "test/integration/rpc-listings.test.ts",
  "test/integration/rpc.test.ts",
  "test/integration/run-records.test.ts",
  "test/integration/scheduled-jobs.test.ts",
  "test/integration/session-tools.test.ts",
  "test/integration/sessions-search.test.ts",
  "test/integration/sessions-spawn.test.ts",
  "test/integration/transcript-retention.test.ts",
];

/**
 * A Workers project: its files run inside workerd (the gateway behind test/integration/entry.ts)
 * with the test config plus `extra` as SWITCHBOARD_CONFIG, each file with storage of its own (a
 * fresh Miniflare: the D1 databases empty but for the migrations, no actor alive). Files sharing
 * one would see each other's rows, actors and module state (the scripted model, cached config),
 * and pass or fail by the order they ran in.
 */
function workersProject(
  name: string,
  include: string[],
  migrations: Awaited<ReturnType<typeof readD1Migrations>>,
  extra: Record<string, unknown> = {},
) {
  return {
    plugins: [
      cloudflareTest({
        // The gateway behind a test-only entry whose actors a test can give another env
        // (test/integration/entry.ts, actor-env.ts).
        main: "./test/integration/entry.ts",
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          // DB as wrangler.toml has it, and three more for the tests of storage over
          // several databases (SPEC §19); storage.d1 says which the gateway uses.
          d1Databases: TEST_D1,
          bindings: {
            TEST_MIGRATIONS: migrations,
            SWITCHBOARD_CONFIG: JSON.stringify({ ...TEST_CONFIG, ...extra }),
            GATEWAY_TOKEN: "test-token",
            HOOKS_TOKEN: "test-hooks-token",
            DEV_CONNECTOR_SECRET: "test-connector-secret",
          },
        },
      }),
    ],
    // The timeout guards against a hang, it measures nothing: a file's tests take a few hundred
    // milliseconds each here, and a CI box busy starting two gateways can stall workerd for
    // seconds, so vitest's 5 s would fail a test that is only waiting for a core.
    test: { name, include, setupFiles: ["./test/integration/apply-migrations.ts"], testTimeout: 30_000 },
  };
}

/** The workers project of the quick loop (vitest.quick.config.ts): `include`, one database. */
export function quickWorkersProject(
  name: string,
  include: string[],
  migrations: Awaited<ReturnType<typeof readD1Migrations>>,
) {
  return workersProject(name, include, migrations);
}

/**
 * The end-to-end files where the number of D1 databases matters: listings and paging, the reset
 * sweep and jobs, resolution across sessions, a requester and its sub-agents or watched
 * sessions, what a reply makes readable where, usage added up over every database (the CLI's
 * storage commands are cli-storage.e2e, which starts no gateway). The project
 * e2e-d1x4 runs them again against a gateway spreading sessions over four (SWITCHBOARD_TEST_D1).
 */
const E2E_ACROSS_DATABASES = [
  "test/e2e/agent-coordination.e2e.test.ts",
  "test/e2e/lifecycle.e2e.test.ts",
  "test/e2e/listings.e2e.test.ts",
  "test/e2e/read-your-replies.e2e.test.ts",
  "test/e2e/session-tools.e2e.test.ts",
  "test/e2e/usage.e2e.test.ts",
];

/** An end-to-end project: Node tests, each file driving a `wrangler dev` of its own. */
function e2eProject(name: string, include: string[], extra: { env?: Record<string, string> } = {}) {
  return {
    test: {
      name,
      environment: "node",
      include,
      ...(extra.env ? { env: extra.env } : {}),
      testTimeout: 120_000,
      hookTimeout: 180_000,
    },
  };
}

// `npm test`, the whole gate. Pure tests run in Node (test/unit). The gateway's own tests run
// inside workerd (test/integration), and the files where the number of databases matters run
// again with sessions spread over four (storage.d1, SPEC §19). test/e2e runs in Node and
// drives a real `wrangler dev`, again with four databases for its files where that matters;
// test/browser drives the dashboard of one in Chromium. The soak, the bench floors and the CPU
// clock are vitest.checks.config.ts (`npm run checks`); `npm run test:quick` is the loop after
// each change (vitest.quick.config.ts). Two files run at once, of any project: on 2 cores that
// keeps both busy (vitest's default is one fewer worker than cores), and an end-to-end file
// waiting on its gateway's timers leaves the other core to a workerd file.
export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
      maxWorkers: 2,
      projects: [
        {
          test: { name: "unit", environment: "node", include: ["test/unit/**/*.test.ts"] },
        },
        workersProject("workers", ["test/integration/**/*.test.ts"], migrations),
        workersProject("workers-d1x4", ACROSS_DATABASES, migrations, { storage: { d1: TEST_D1 } }),
        e2eProject("e2e", ["test/e2e/**/*.test.ts"]),
        e2eProject("e2e-d1x4", E2E_ACROSS_DATABASES, {
          env: { SWITCHBOARD_TEST_D1: String(TEST_D1.length) },
        }),
        {
          // The dashboard in a real browser (Debian's chromium, driven by playwright-core)
          // against `wrangler dev`; skipped, loudly, when no Chromium is installed.
          test: {
            name: "browser",
            environment: "node",
            include: ["test/browser/**/*.test.ts"],
            testTimeout: 120_000,
            hookTimeout: 240_000,
          },
        },
      ],
    },
  };
});
