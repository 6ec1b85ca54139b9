/**
 * The Usage page's daily cost chart (SPEC §21): a bar for every day of the range, zero-filled;
 * a 1-2-5 dollar axis the largest bar reaches; an all-unpriced day marked, not drawn as $0; an
 * empty range still a chart; and the dollar formats it and the page share.
 */
import { describe, expect, it } from "vitest";
import {
  costChartSvg,
  costScale,
  type DayUsage,
  dailyCosts,
  daysInRange,
  isCalendarDay,
  layoutCostChart,
  renderCostChart,
  tickLabel,
} from "../../src/views/cost-chart";
import { formatCount, formatUsdExact } from "../../src/views/format";

const row = (group: string, costUsd: number, modelCalls = 1, unpricedCalls = 0): DayUsage => ({
  group,
  costUsd,
  modelCalls,
  unpricedCalls,
});

/** The bars of an SVG string, as the browser test counts them. */
function bars(svg: string): string[] {
  return [...svg.matchAll(/<g class="bar[^"]*" data-day="([^"]+)" data-usd="[^"]*">/g)].map((m) => m[1]!);
}

describe("daysInRange", () => {
  it("lists every calendar day from `from` to `to`, both included, across months and leap days", () => {
    expect(daysInRange("2024-02-27", "2024-03-02")).toEqual([
      "2024-02-27",
      "2024-02-28",
      "2024-02-29",
      "2024-03-01",
      "2024-03-02",
    ]);
    expect(daysInRange("2025-12-31", "2026-01-01")).toEqual(["2025-12-31", "2026-01-01"]);
    expect(daysInRange("2025-06-01", "2025-06-01")).toEqual(["2025-06-01"]);
    expect(daysInRange("2025-01-01", "2025-12-31")).toHaveLength(365);
  });

  it("refuses a day that is not on the calendar and a reversed range", () => {
    expect(isCalendarDay("2025-02-30")).toBe(false);
    expect(isCalendarDay("2025-13-01")).toBe(false);
    expect(isCalendarDay("yesterday")).toBe(false);
    expect(isCalendarDay("2024-02-29")).toBe(true);
    expect(() => daysInRange("2025-02-30", "2025-03-02")).toThrow(RangeError);
    expect(() => daysInRange("2025-03-02", "2025-03-01")).toThrow(RangeError);
  });
});

describe("dailyCosts", () => {
  it("has one entry per day, zero where the rollup has no row", () => {
    const days = dailyCosts("2025-11-01", "2025-11-05", [row("2025-11-02", 0.25), row("2025-11-04", 1.5, 3)]);
    expect(days.map((d) => [d.day, d.costUsd])).toEqual([
      ["2025-11-01", 0],
      ["2025-11-02", 0.25],
      ["2025-11-03", 0],
      ["2025-11-04", 1.5],
      ["2025-11-05", 0],
    ]);
  });

  it("gives a day whose every call was unpriced a null cost, and keeps a partly priced day's cost", () => {
    const [none, partly] = dailyCosts("2025-11-01", "2025-11-02", [
      row("2025-11-01", 0, 4, 4),
      row("2025-11-02", 0.3, 4, 1),
    ]);
    expect(none).toMatchObject({ costUsd: null, unpricedCalls: 4 });
    expect(partly).toMatchObject({ costUsd: 0.3, unpricedCalls: 1 });
  });
});

describe("costScale", () => {
  it("steps by 1, 2 or 5 × 10ⁿ dollars, and its top is the first step at or above the largest cost", () => {
    expect(costScale(1)).toEqual({ top: 1, step: 0.5, ticks: [0, 0.5, 1] });
    expect(costScale(7.3)).toMatchObject({ top: 8, step: 2 });
    expect(costScale(0.3).ticks).toHaveLength(4); // 0, 0.1, 0.2, 0.3: no empty step from rounding
    expect(costScale(0.000105)).toMatchObject({ step: 0.00005 });
    for (const max of [0.0042, 0.3, 1, 12.5, 980, 123456]) {
      const s = costScale(max);
      expect(s.top).toBeGreaterThanOrEqual(max);
      expect(s.top - s.step).toBeLessThan(max);
      expect(s.ticks.length).toBeLessThanOrEqual(6);
    }
  });

  it("labels ticks in dollars with the decimals the step needs", () => {
    expect(tickLabel(0.5, 0.5)).toBe("$0.50");
    expect(tickLabel(20, 10)).toBe("$20");
    expect(tickLabel(0.00015, 0.00005)).toBe("$0.00015");
    expect(tickLabel(0.04, 0.02)).toBe("$0.04");
  });
});

describe("layoutCostChart", () => {
  it("scales bars to the axis: the largest cost reaches the top step, half of it half as high", () => {
    const chart = layoutCostChart(
      dailyCosts("2025-11-01", "2025-11-03", [row("2025-11-01", 2), row("2025-11-02", 1)]),
    );
    const [full, half, zero] = chart.bars;
    expect(chart.scale.top).toBe(2);
    expect(full!.height).toBeCloseTo(chart.plot.height);
    expect(full!.y).toBeCloseTo(chart.plot.top);
    expect(half!.height).toBeCloseTo(chart.plot.height / 2);
    expect(zero!.height).toBe(0);
    expect(zero!.y).toBeCloseTo(chart.plot.top + chart.plot.height);
    // Bars sit side by side in order, inside the plot.
    expect(full!.x).toBeLessThan(half!.x);
    expect(zero!.x + zero!.width).toBeLessThanOrEqual(chart.plot.left + chart.plot.width);
  });

  it("titles each bar with its day and exact cost, and says what the chart shows", () => {
    const chart = layoutCostChart(
      dailyCosts("2025-11-01", "2025-11-02", [row("2025-11-01", 0.000105), row("2025-11-02", 0.5, 3, 1)]),
    );
    expect(chart.bars.map((b) => b.title)).toEqual([
      "2025-11-01: $0.000105",
      "2025-11-02: $0.50 + 1 unpriced calls",
    ]);
    expect(chart.label).toBe(
      "Daily cost, 2 days from 2025-11-01 to 2025-11-02: $0.500105 in total; highest $0.50 on 2025-11-02",
    );
  });

  it("labels at most eight days under the axis, the first and the last among them", () => {
    const days = dailyCosts("2025-10-01", "2025-10-30", []);
    const labels = layoutCostChart(days).dayLabels.map((l) => l.day);
    expect(labels.length).toBeLessThanOrEqual(8);
    expect(labels[0]).toBe("2025-10-01");
    expect(labels.at(-1)).toBe("2025-10-30");
  });
});

describe("costChartSvg", () => {
  it("draws one bar per day of the range", () => {
    const svg = costChartSvg("2025-10-08", "2025-11-06", [row("2025-10-20", 0.4)]);
    expect(bars(svg)).toEqual(daysInRange("2025-10-08", "2025-11-06"));
    expect(bars(svg)).toHaveLength(30);
    expect(svg).toContain("<title>2025-10-20: $0.40</title>");
    expect(svg).toMatch(
      /^<svg [^>]*role="img" aria-label="Daily cost, 30 days from 2025-10-08 to 2025-11-06/,
    );
  });

  it("draws an empty range as zero bars on a scale from $0, with nothing undefined in it", () => {
    const svg = costChartSvg("2025-11-01", "2025-11-07", []);
    expect(bars(svg)).toHaveLength(7);
    expect(svg).not.toMatch(/NaN|undefined|Infinity/);
    expect(svg).toContain(">$0.000</text>");
    expect(svg).toContain("no priced cost");
    expect([...svg.matchAll(/<rect class="cost"[^>]* height="0"/g)]).toHaveLength(7);
  });

  it("marks a day whose calls were all unpriced instead of drawing it as $0", () => {
    const svg = costChartSvg("2025-11-01", "2025-11-03", [
      row("2025-11-01", 0.2),
      row("2025-11-02", 0, 2, 2),
    ]);
    const unpriced = svg.match(
      /<g class="bar is-unpriced" data-day="2025-11-02" data-usd="">(.*?)<\/g>/,
    )?.[1];
    expect(unpriced).toContain("<title>2025-11-02: unpriced (2 model calls, none priced)</title>");
    expect(unpriced).toContain('class="unpriced"');
    expect(unpriced).toContain("url(#cost-chart-unpriced)");
    expect(unpriced).not.toContain('class="cost"');
    expect(svg).toContain("; 1 day unpriced");
    expect(svg.match(/class="bar is-unpriced"/g)).toHaveLength(1);
  });

  it("escapes the text it writes", () => {
    const chart = layoutCostChart(dailyCosts("2025-11-01", "2025-11-01", []));
    const svg = renderCostChart({ ...chart, label: `a "quoted" <label> & more` });
    expect(svg).toContain('aria-label="a &#34;quoted&#34; &#60;label&#62; &#38; more"');
  });
});

describe("dollar and count formats", () => {
  it("gives the exact cost with at least two decimals and no float noise", () => {
    expect(formatUsdExact(0.000105)).toBe("$0.000105");
    expect(formatUsdExact(0.1 + 0.2)).toBe("$0.30");
    expect(formatUsdExact(1.5)).toBe("$1.50");
    expect(formatUsdExact(0)).toBe("$0.00");
    expect(formatUsdExact(1234.5)).toBe("$1234.50");
  });

  it("groups counts by thousands", () => {
    expect(formatCount(0)).toBe("0");
    expect(formatCount(999)).toBe("999");
    expect(formatCount(1234567)).toBe("1,234,567");
  });
});
