/** The run page's waterfall (views/timeline-chart.ts): a row per span on one axis from the run's creation. */
import { describe, expect, it } from "vitest";
import { spanDuration, timelineSvg } from "../../src/views/timeline-chart";

const rects = (svg: string) =>
  [...svg.matchAll(/<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"/g)].map((m) => ({
    x: Number(m[1]),
    w: Number(m[2]),
  }));

describe("timelineSvg", () => {
  it("draws a row per span, placed and sized on one axis from the run's creation", () => {
    const svg = timelineSvg(
      [
        { phase: "queued", startedAt: 1_000, ms: 100 },
        { phase: "model", name: "fake/m", startedAt: 1_100, ms: 300, outcome: "ok" },
        { phase: "delivery", name: "reply", startedAt: 1_400, ms: 600, outcome: "delivered" },
      ],
      1_000,
    );
    expect([...svg.matchAll(/<g class="span[^"]*" data-phase="(\w+)"/g)].map((m) => m[1])).toEqual([
      "queued",
      "model",
      "delivery",
    ]);
    const [queued, model, delivery] = rects(svg);
    // 1000 ms end to end: the queue is a tenth of the axis, the model starts where it ends.
    expect(model!.x).toBeCloseTo(queued!.x + queued!.w, 1);
    expect(model!.w).toBeCloseTo(queued!.w * 3, 1);
    expect(queued!.w).toBeCloseTo((884 - 190) / 10, 1);
    expect(delivery!.x + delivery!.w).toBeCloseTo(884, 0);
    expect(svg).toContain("<title>model fake/m: 300 ms from +100 ms, ok</title>");
    expect(svg).toContain('aria-label="Run timeline: 3 spans over 1.0 s"');
  });

  it("marks a failed or refused span, keeps a 0 ms span visible and escapes names", () => {
    const svg = timelineSvg(
      [
        { phase: "tool", name: "<x>&", startedAt: 5, ms: 0, outcome: "error" },
        { phase: "model", name: "m", startedAt: 5, ms: 0, outcome: "refused" },
      ],
      0,
    );
    expect(svg.match(/class="span failed"/g)).toHaveLength(2);
    expect(rects(svg).every((r) => r.w >= 2)).toBe(true);
    expect(svg).not.toContain("<x>");
    expect(svg).toContain("tool &#60;x&#62;&#38;");
  });

  it("draws an empty timeline as the axis alone, with nothing undefined in it", () => {
    const svg = timelineSvg([], 0);
    expect(svg).not.toMatch(/NaN|undefined|Infinity/);
    expect(rects(svg)).toEqual([]);
  });

  it("reads durations as people do", () => {
    expect([0, 340, 1_234, 12_345].map(spanDuration)).toEqual(["0 ms", "340 ms", "1.2 s", "12 s"]);
  });
});
