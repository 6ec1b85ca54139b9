/**
 * CPU seconds used so far by a process group, read from Linux /proc: the bench and the profiler
 * measure the gateway's own CPU with it (wrangler dev is spawned detached, so its pid is the
 * group id).
 */
import { readdirSync, readFileSync } from "node:fs";

/**
 * CPU seconds (user + system) of the processes in group `group`, or of those among them whose
 * name starts with `only` (`workerd`: the Worker, its Durable Objects and the local D1, without
 * wrangler's own Node process). NaN when unknown (no group, not Linux).
 */
export function groupCpuSeconds(group: number | undefined, only?: string): number {
  if (!group || process.platform !== "linux") return Number.NaN;
  let ticks = 0;
  try {
    for (const pid of readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
        // Fields after "(comm) ": state ppid pgrp … utime(11) stime(12).
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        if (Number(f[2]) === group && (!only || comm.startsWith(only)))
          ticks += Number(f[11]) + Number(f[12]);
      } catch {
        // the process went away
      }
    }
  } catch {
    return Number.NaN;
  }
  return ticks / 100; // USER_HZ is 100 on Linux
}
