import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";

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
 * A Workers project: its tests run inside workerd with per-file isolated storage, with the test
 * config plus `extra` as SWITCHBOARD_CONFIG.
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
    test: { name, include, setupFiles: ["./test/integration/apply-migrations.ts"] },
  };
}

/** The end-to-end files that start no gateway (the CLI against fakes, pure formatting, the bench's own Worker). */
const E2E_WITHOUT_GATEWAY = [
  "test/e2e/cli-args.e2e.test.ts",
  "test/e2e/cli-format.e2e.test.ts",
  "test/e2e/proc-cpu.e2e.test.ts",
  "test/e2e/bench-floor.e2e.test.ts",
];

/** An end-to-end project: Node tests driving `wrangler dev`, one file at a time. */
function e2eProject(
  name: string,
  extra: { exclude?: string[]; env?: Record<string, string>; groupOrder?: number } = {},
) {
  return {
    test: {
      name,
      environment: "node",
      include: ["test/e2e/**/*.test.ts"],
      ...(extra.exclude ? { exclude: [...configDefaults.exclude, ...extra.exclude] } : {}),
      ...(extra.env ? { env: extra.env } : {}),
      ...(extra.groupOrder !== undefined ? { sequence: { groupOrder: extra.groupOrder } } : {}),
      testTimeout: 120_000,
      hookTimeout: 180_000,
      fileParallelism: false,
    },
  };
}

// Everything under test/unit and test/integration runs inside workerd with per-file isolated
// storage, and test/integration again with sessions spread over the four D1 databases
// (storage.d1, SPEC §19); test/e2e runs in Node and drives a real `wrangler dev`, and again
// with four databases (SWITCHBOARD_TEST_D1, test/e2e/support/gateway.ts) once the others are
// done, so that no two end-to-end projects share the machine; test/browser drives the dashboard
// of one in Chromium.
export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
      projects: [
        workersProject("workers", ["test/unit/**/*.test.ts", "test/integration/**/*.test.ts"], migrations),
        workersProject("workers-d1x4", ["test/integration/**/*.test.ts"], migrations, {
          storage: { d1: TEST_D1 },
        }),
        e2eProject("e2e"),
        e2eProject("e2e-d1x4", {
          exclude: E2E_WITHOUT_GATEWAY,
          env: { SWITCHBOARD_TEST_D1: String(TEST_D1.length) },
          groupOrder: 1,
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
            fileParallelism: false,
          },
        },
      ],
    },
  };
});
