/**
 * The CPU clock of the bench, the profiler and `npm run ab` (scripts/lib/proc-cpu.ts): a process
 * group's CPU time with the scheduler's nanosecond precision, not the 10 ms tick's.
 */
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { groupCpuSeconds } from "../../scripts/lib/proc-cpu.ts";

/** This process's group id (field 5 of /proc/self/stat). */
function ownGroup(): number {
  const stat = readFileSync("/proc/self/stat", "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
}

/** Spins until this process has used `ms` more CPU (by its own clock, not the wall's). */
function burnCpu(ms: number): void {
  const start = process.cpuUsage();
  let x = 0;
  for (;;) {
    for (let i = 0; i < 10_000; i++) x += Math.sqrt(i + x);
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1000 >= ms) break;
  }
  expect(x).toBeGreaterThan(0);
}

describe.runIf(process.platform === "linux")("groupCpuSeconds", () => {
  it("counts the CPU this process spends, to better than the 10 ms tick", () => {
    const group = ownGroup();
    const before = groupCpuSeconds(group);
    burnCpu(30);
    const after = groupCpuSeconds(group);
    // The group holds this process: at least its 30 ms (other members can only add).
    expect(after - before).toBeGreaterThanOrEqual(0.029);
    // Nanoseconds summed per thread, not a count of 10 ms ticks (where the kernel has schedstat).
    if (existsSync("/proc/self/schedstat"))
      expect(Math.abs(after * 100 - Math.round(after * 100))).toBeGreaterThan(1e-9);
  });

  it("filters the group's processes by name, and knows no group 0", () => {
    const group = ownGroup();
    expect(groupCpuSeconds(group, "no-such-process-name")).toBe(0);
    expect(groupCpuSeconds(undefined)).toBeNaN();
  });
});
