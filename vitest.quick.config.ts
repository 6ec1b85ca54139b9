/**
 * `npm run test:quick`: the loop to run after each change, in about a minute and a half. The pure tests
 * (Node) and the workerd files a change to the run, its records, delivery or the RPC most often
 * breaks, with one database. `npm test` stays the gate before a commit lands.
 */
import path from "node:path";
import { readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { quickWorkersProject } from "./vitest.config.ts";

/** The workerd files of the quick loop: the lifecycle of a run end to end inside one workerd. */
export const QUICK = [
  "test/integration/actor-statements.test.ts",
  "test/integration/announcements.test.ts",
  "test/integration/commands.test.ts",
  "test/integration/connectors.test.ts",
  "test/integration/outbox.test.ts",
  "test/integration/rpc.test.ts",
  "test/integration/run-lifecycle.test.ts",
  "test/integration/run-queue-front.test.ts",
  "test/integration/run-records.test.ts",
  "test/integration/session-tools.test.ts",
  "test/integration/sessions-send.test.ts",
  "test/integration/sessions-spawn.test.ts",
  "test/integration/tools-invoke.test.ts",
  "test/integration/transcripts.test.ts",
];

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
      // Two files at once, as in vitest.config.ts.
      maxWorkers: 2,
      projects: [
        { test: { name: "unit", environment: "node", include: ["test/unit/**/*.test.ts"] } },
        quickWorkersProject("workers", QUICK, migrations),
      ],
    },
  };
});
