/** runs.get's timeline (views/run-timeline.ts): the queue, the loop's spans, the deliveries, in start order. */
import { describe, expect, it } from "vitest";
import { runTimeline } from "../../src/views/run-timeline";

describe("runTimeline", () => {
  it("puts the queue first, the loop's spans and each delivery after, by start", () => {
    const spans = runTimeline(
      {
        createdAt: 1_000,
        startedAt: 1_200,
        endedAt: 2_000,
        timeline: [
          { phase: "model", name: "fake/m", startedAt: 1_210, ms: 300, outcome: "ok" },
          { phase: "tool", name: "current_time", startedAt: 1_510, ms: 0, outcome: "ok" },
          // Same millisecond as the tool: kept in the order it was recorded.
          { phase: "model", name: "fake/m", startedAt: 1_510, ms: 400, outcome: "ok" },
        ],
      },
      [{ kind: "reply", status: "delivered", createdAt: 1_950, updatedAt: 2_100, deliveredAt: 2_050 }],
      9_999,
    );
    expect(spans).toEqual([
      { phase: "queued", startedAt: 1_000, ms: 200 },
      { phase: "model", name: "fake/m", startedAt: 1_210, ms: 300, outcome: "ok" },
      { phase: "tool", name: "current_time", startedAt: 1_510, ms: 0, outcome: "ok" },
      { phase: "model", name: "fake/m", startedAt: 1_510, ms: 400, outcome: "ok" },
      { phase: "delivery", name: "reply", startedAt: 1_950, ms: 100, outcome: "delivered" },
    ]);
  });

  it("ends what is still open at now: a run waiting in the queue, a delivery still retrying", () => {
    expect(runTimeline({ createdAt: 1_000 }, [], 4_000)).toEqual([
      { phase: "queued", startedAt: 1_000, ms: 3_000 },
    ]);
    const [, delivery] = runTimeline(
      { createdAt: 0, startedAt: 0, endedAt: 10 },
      [{ kind: "notice", status: "retrying", createdAt: 10, updatedAt: 500, deliveredAt: null }],
      9_999,
    );
    expect(delivery).toEqual({
      phase: "delivery",
      name: "notice",
      startedAt: 10,
      ms: 490,
      outcome: "retrying",
    });
  });

  it("a run dropped before it started waited until it ended", () => {
    expect(runTimeline({ createdAt: 100, startedAt: null, endedAt: 700 }, [], 9_999)).toEqual([
      { phase: "queued", startedAt: 100, ms: 600 },
    ]);
  });
});
