/**
 * `npm run checks`: what guards the run lifecycle and the bench beyond `npm test`, in minutes
 * rather than seconds: the fault-injection soak, short (test/checks/soak.test.ts: 150 messages,
 * 3 kills, a fixed seed), with one and with four D1 databases; the bench's platform floors
 * against their own `wrangler dev`; the CPU clock of the bench and `npm run ab`; streamed
 * replies over a 30-second answer (test/e2e/streaming.e2e.test.ts, 5 s in `npm test`). Run it before
 * changing the run lifecycle, delivery, storage placement or the bench; CI runs it after
 * `npm test` (.ci/run).
 */
import { defineConfig } from "vitest/config";
import { TEST_D1 } from "./vitest.config.ts";

function checksProject(name: string, include: string[], env: Record<string, string> = {}) {
  return {
    test: {
      name,
      environment: "node",
      include,
      env,
      testTimeout: 300_000,
      hookTimeout: 180_000,
      fileParallelism: false,
    },
  };
}

export default defineConfig({
  test: {
    // One file at a time across projects: each starts its own `wrangler dev` and measures CPU.
    maxWorkers: 1,
    projects: [
      checksProject("checks", ["test/checks/**/*.test.ts"]),
      checksProject("checks-d1x4", ["test/checks/soak.test.ts"], {
        SWITCHBOARD_TEST_D1: String(TEST_D1.length),
      }),
      checksProject("checks-streaming", ["test/e2e/streaming.e2e.test.ts"], {
        SWITCHBOARD_STREAM_MS: "30000",
      }),
    ],
  },
});
