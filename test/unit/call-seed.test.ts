/** callSeed: the ids a tool derives (run ids, child keys) are unique per caller (SPEC §5). */
import { describe, expect, it } from "vitest";
import { type CallerContext, callSeed } from "../../src/tools/types";

const caller = (fields: Partial<CallerContext>): CallerContext => ({
  sessionKey: "agent:main:main",
  agentId: "main",
  trigger: "http",
  ...fields,
});

describe("callSeed", () => {
  it("inside runs: the same model call id in two runs gives two seeds, in one run one", () => {
    // Models (the echo model among them) repeat call ids such as `call_0` across runs.
    const inRun = (runId: string) =>
      callSeed({ caller: caller({ runId, trigger: "inbound" }), toolCallId: "call_0" });
    expect(inRun("run-1")).not.toBe(inRun("run-2"));
    expect(inRun("run-1")).toBe(inRun("run-1"));
  });

  it("over HTTP: the same idempotency key from two acting sessions gives two seeds, from one one", () => {
    const http = (sessionKey: string) => callSeed({ caller: caller({ sessionKey }), toolCallId: "http:k1" });
    expect(http("agent:main:main")).not.toBe(http("agent:main:dm:bob"));
    expect(http("agent:main:main")).toBe(http("agent:main:main"));
  });

  it("a run and an HTTP caller never share a seed", () => {
    const run = callSeed({ caller: caller({ runId: "http", trigger: "inbound" }), toolCallId: "x" });
    const http = callSeed({ caller: caller({}), toolCallId: "x" });
    expect(run).not.toBe(http);
  });
});
