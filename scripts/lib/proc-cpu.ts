/**
 * CPU seconds used so far by a process group, read from Linux /proc: the bench and the profiler
 * measure the gateway's own CPU with it (wrangler dev is spawned detached, so its pid is the
 * group id).
 *
 * Each live thread's `schedstat` is the scheduler's exact run time in nanoseconds. The `stat`
 * fields utime/stime are sampled at the timer tick (10 ms): a block of 50 requests of ~3 ms
 * each reads ±10 ms of it, ±7% per block, which is more than the differences being measured.
 * The tick counts remain the fallback where `schedstat` is missing.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Nanoseconds on CPU of every live thread of `pid`, or undefined when /proc has no schedstat. */
function threadsRunNs(pid: string): number | undefined {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      // "<run time ns> <wait time ns> <timeslices>"
      const run = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      if (!Number.isFinite(run)) return undefined;
      ns += run;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT" && tid === pid) return undefined;
      // the thread went away
    }
  }
  return ns;
}

/**
 * CPU seconds (user + system) of the processes in group `group`, or of those among them whose
 * name starts with `only` (`workerd`: the Worker, its Durable Objects and the local D1, without
 * wrangler's own Node process). NaN when unknown (no group, not Linux).
 */
export function groupCpuSeconds(group: number | undefined, only?: string): number {
  if (!group || process.platform !== "linux") return Number.NaN;
  let seconds = 0;
  try {
    for (const pid of readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
        // Fields after "(comm) ": state ppid pgrp … utime(11) stime(12).
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        if (Number(f[2]) !== group || (only && !comm.startsWith(only))) continue;
        const ns = threadsRunNs(pid);
        seconds += ns === undefined ? (Number(f[11]) + Number(f[12])) / 100 : ns / 1e9; // USER_HZ is 100
      } catch {
        // the process went away
      }
    }
  } catch {
    return Number.NaN;
  }
  return seconds;
}
