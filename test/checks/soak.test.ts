/**
 * The fault-injection soak, short (SPEC §16 "Nothing lost"): the engine of `npm run soak`
 * (scripts/lib/soak.ts) with 150 messages over 10 sessions, 3 SIGKILLs with restarts on the same
 * state, a failing and hanging connector and a model answering 429, 500 and slowly, on a fixed
 * seed. The bar is the soak's: 0 lost, 0 duplicated, every run ended, every delivery delivered
 * or dead with a cause, with every message accepted and every kill survived. With
 * SWITCHBOARD_TEST_D1=N, the sessions are spread over N D1 databases (storage.d1).
 */
import { describe, expect, it } from "vitest";
import { runSoak } from "../../scripts/lib/soak.ts";
import { TEST_D1 } from "../e2e/support/gateway.ts";

const MESSAGES = 150;
const SESSIONS = 10;
const KILLS = 3;
const SEED = 20_261_125;

describe("the fault-injection soak (short)", () => {
  it(`loses and duplicates nothing over ${MESSAGES} messages, ${SESSIONS} sessions and ${KILLS} kills (seed ${SEED})`, async () => {
    const report = await runSoak({
      messages: MESSAGES,
      sessions: SESSIONS,
      kills: KILLS,
      seed: SEED,
      // The suite's databases (SWITCHBOARD_TEST_D1): sessions spread over them when several.
      ...(TEST_D1.length > 1 ? { d1: TEST_D1 } : {}),
      // Bounded under the test's timeout: the drain gets what is left of it. Four databases
      // take longer than one (150 s against 97 s on this machine).
      deadlineMs: 240_000,
      drainMs: 120_000,
      log: (line) => console.log(line),
    });
    console.log(report.markdown);
    const failed = report.rows.filter((r) => r.pass === false).map((r) => `${r.measure}: ${r.value}`);
    expect(failed, `${report.markdown}\n${report.findings.join("\n")}`).toEqual([]);
    expect(report.pass).toBe(true);
  }, 270_000);
});
