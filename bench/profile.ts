/**
 * `npm run profile`: a V8 CPU profile of the gateway (Worker + Durable Objects share one
 * isolate under `wrangler dev`) while it takes inbound messages, summarised by self time per
 * function and per module. Writes the raw profile to a .cpuprofile file (open it in Chrome
 * DevTools → Performance). 127.0.0.1 only, bounded counts.
 *
 *   npm run profile -- [count=500] [new|existing|list|history|healthz] [--cpu] [--serial]
 *     new       every message opens a new session (default)
 *     existing  every message goes to one of the sessions the warm-up created
 *     list      sessions_list (limit 50) through POST /tools/invoke, after the warm-up (visibility
 *               "all", so each page holds 50 of the warm-up's sessions, as the bench's pages do)
 *     history   sessions_history (limit 50) of the warm-up's sessions through /tools/invoke
 *     healthz   GET /healthz, the floor the read paths are compared with
 *     --cpu     no profiler: only workerd's own CPU per request, from /proc (what the bench's
 *               bars measure; the profiler's sampling adds to it)
 *     --serial  one request at a time (as the bench's read-path ratios are measured), not 32
 *   AB_MODEL=http npm run profile -- …   every turn calls an OpenAI-compatible model over HTTP
 *                                        (workload.startModel), as `npm run ab` does
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import WebSocket from "ws";
import { type LocalServer, scratchDir, startLocalServer } from "../scripts/lib/local-server.ts";
import { groupCpuSeconds } from "../scripts/lib/proc-cpu.ts";
import * as workload from "./workload.ts";

const args = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const CPU_ONLY = process.argv.includes("--cpu");
const COUNT = Math.min(Number(args[0] ?? 500) || 500, 5000);
const MODE = workload.modeOf(args[1] ?? "new");
const CONCURRENCY = process.argv.includes("--serial") ? 1 : 32;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

function log(msg: string) {
  process.stderr.write(`[profile] ${msg}\n`);
}

async function inspector(port: number) {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()) as Array<{
    webSocketDebuggerUrl: string;
    title?: string;
  }>;
  const target = targets[0];
  if (!target) throw new Error("no inspector target");
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.on("open", resolve);
    ws.on("error", reject);
  });
  let next = 1;
  const pending = new Map<number, (v: unknown) => void>();
  ws.on("message", (data) => {
    const msg = JSON.parse(String(data)) as { id?: number; result?: unknown };
    if (msg.id !== undefined) pending.get(msg.id)?.(msg.result);
  });
  const call = <T>(method: string, params: Record<string, unknown> = {}) =>
    new Promise<T>((resolve) => {
      const id = next++;
      pending.set(id, resolve as (v: unknown) => void);
      ws.send(JSON.stringify({ id, method, params }));
    });
  return { call, close: () => ws.close() };
}

function summarise(profile: Profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i] ?? 0;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const total = profile.endTime - profile.startTime;
  let idle = 0;
  const fn = new Map<string, number>();
  const mod = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    if (functionName === "(idle)") idle += us;
    const file = url.replace(/^.*\/(node_modules\/)?/, "");
    const pkg =
      /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1] ??
      (url ? url.split("/").slice(-2).join("/") : functionName);
    fn.set(
      `${functionName || "(anonymous)"} ${file}:${lineNumber + 1}`,
      (fn.get(`${functionName || "(anonymous)"} ${file}:${lineNumber + 1}`) ?? 0) + us,
    );
    mod.set(pkg, (mod.get(pkg) ?? 0) + us);
  }
  const top = (m: Map<string, number>, k: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, k)
      .map(
        ([name, us]) =>
          `${(us / 1000).toFixed(1).padStart(9)} ms ${((us / total) * 100).toFixed(1).padStart(5)}%  ${name}`,
      );
  return { total, idle, fns: top(fn, 45), mods: top(mod, 25) };
}

async function main() {
  const connector = await workload.startConnector();
  const model = process.env.AB_MODEL === "http" ? await workload.startModel() : undefined;
  const persistTo = scratchDir("switchboard-profile-");
  const server: LocalServer = await startLocalServer({
    persistTo,
    vars: workload.workloadVars,
    config: workload.workloadConfig(connector.port, MODE, model?.url),
  });
  log(`gateway ${server.url} pid ${server.pid} inspector ${server.inspectorPort}`);
  try {
    await workload.warmUp(server.url, connector);
    const insp = CPU_ONLY ? undefined : await inspector(server.inspectorPort);
    await insp?.call("Profiler.enable");
    await insp?.call("Profiler.setSamplingInterval", { interval: 200 });
    await insp?.call("Profiler.start");
    const before = connector.delivered();
    const cpuBefore = groupCpuSeconds(server.pid, "workerd");
    const read = workload.readOf(MODE);
    const ackMs = read
      ? await workload.pool(COUNT, CONCURRENCY, (i) => read(server.url, i))
      : await workload.pool(COUNT, CONCURRENCY, (i) =>
          workload.postInbound(server.url, `m-${i}`, workload.senderOf(MODE, i)),
        );
    if (!read) await connector.until(before + COUNT, 120_000);
    const cpuMs = ((groupCpuSeconds(server.pid, "workerd") - cpuBefore) * 1000) / COUNT;
    const unit = read ? "request" : "message";
    const cpuLine = `workerd CPU per ${unit} (/proc${insp ? ", profiler on" : ""}): ${cpuMs.toFixed(2)} ms`;
    if (!insp) {
      console.log(
        `${COUNT} ${unit}s (${MODE}): ${(COUNT / (ackMs / 1000)).toFixed(0)} req/s; ${connector.delivered() - before} delivered`,
      );
      console.log(cpuLine);
      return;
    }
    const { profile } = await insp.call<{ profile: Profile }>("Profiler.stop");
    insp.close();
    const dir = mkdtempSync(path.join(tmpdir(), "switchboard-profile-"));
    const file = path.join(dir, `inbound-${MODE}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    const s = summarise(profile);
    console.log(
      `${COUNT} ${read ? "requests" : "messages"} (${MODE}): ${(COUNT / (ackMs / 1000)).toFixed(0)} req/s; ${connector.delivered() - before} delivered; profile ${(s.total / 1000).toFixed(0)} ms`,
    );
    console.log(
      `per ${read ? "request" : "message"}: ${(s.total / 1000 / COUNT).toFixed(2)} ms of isolate time sampled (idle included), ${((s.total - s.idle) / 1000 / COUNT).toFixed(2)} ms busy`,
    );
    console.log(cpuLine);
    console.log("\nself time by module:");
    for (const l of s.mods) console.log(l);
    console.log("\nself time by function:");
    for (const l of s.fns) console.log(l);
    console.log(`\nraw profile: ${file}`);
  } finally {
    await server.stop();
    connector.close();
    model?.close();
    rmSync(persistTo, { recursive: true, force: true });
  }
}

await main();
