/**
 * `npm run ab`: workerd CPU per request of two revisions of the gateway, measured side by side.
 * The host's speed drifts by ±30% within minutes, so two profile runs minutes apart cannot
 * tell a 5% change; here both gateways run at once (each its own `wrangler dev`, persistence
 * on tmpfs and fake connector), warmed up alike, and take the workload in alternating blocks,
 * so both see the same drift. Prints each block pair and the mean per request of each side.
 * 127.0.0.1 only, bounded counts.
 *
 *   npm run ab -- <base revision> [list|history|healthz|existing|new] [blocks=20] [block=50]
 *   AB_MODEL=http npm run ab -- …   every turn calls an OpenAI-compatible model over HTTP
 *                                   (workload.startModel, one per side) instead of the echo model
 *   AB_D1=1,4 npm run ab -- HEAD list   the base side spreads sessions over 1 D1 database, the
 *                                   head side over 4 (storage.d1): the cost of more databases
 *   npm run ab -- floor <new|existing> …   the base side is the platform floor of a message
 *                                   (bench/floor/message-worker.ts: a bare Worker doing once,
 *                                   at its cheapest, what a durable gateway must per message),
 *                                   both sides with a model over HTTP: how far above the
 *                                   platform the gateway runs. The gateway starts first; the
 *                                   last model request of its warm-up (the history session's
 *                                   31st turn) gives the floor the same system prompt, tool
 *                                   schemas and parameters to send, and the floor's D1 gets
 *                                   the gateway's migrations
 *
 * The base revision is checked out into a temporary git worktree (sharing this checkout's
 * node_modules) and removed afterwards; the other side is this working tree, uncommitted
 * changes included.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { LocalServer, LocalServerOptions } from "../scripts/lib/local-server.ts";
import { groupCpuSeconds } from "../scripts/lib/proc-cpu.ts";
import * as workload from "./workload.ts";

const root = path.resolve(import.meta.dirname, "..");
const [base, modeArg = "list", blocksArg = "20", blockArg = "50"] = process.argv.slice(2);
if (!base) throw new Error("usage: npm run ab -- <base revision> [mode] [blocks] [block]");
const MODE = workload.modeOf(modeArg);
const BLOCKS = Math.min(Math.max(Number(blocksArg) || 20, 2), 200);
const BLOCK = Math.min(Math.max(Number(blockArg) || 50, 10), 500);
/** `floor`: the base side is the message floor Worker, not a revision. */
const FLOOR = base === "floor";
const HTTP_MODEL = process.env.AB_MODEL === "http" || FLOOR;
/** D1 databases of the base and head sides (`AB_D1=1,4`; default one each). */
const D1_COUNTS = (process.env.AB_D1 ?? "1,1")
  .split(",")
  .map((n) => Math.min(Math.max(Number(n) || 1, 1), 16));
const bindings = (n: number) => Array.from({ length: n }, (_, i) => (i === 0 ? "DB" : `DB_${i}`));

function log(msg: string) {
  process.stderr.write(`[ab] ${msg}\n`);
}

type Starter = (opts: LocalServerOptions) => Promise<LocalServer>;

interface Side {
  name: string;
  server: LocalServer;
  connector: Awaited<ReturnType<typeof workload.startConnector>>;
  model: Awaited<ReturnType<typeof workload.startModel>> | undefined;
  cpuMs: number;
  done: number;
}

async function startSide(
  name: string,
  start: Starter,
  scratch: (prefix: string) => string,
  databases: number,
  /** The floor's FLOOR_REQUEST (workload.floorRequestVar): this side is the message floor. */
  floorRequest?: string,
): Promise<Side> {
  const connector = await workload.startConnector();
  const model = HTTP_MODEL ? await workload.startModel() : undefined;
  const d1 = bindings(databases);
  const persistTo = scratch(`switchboard-ab-${name}-`);
  const server =
    floorRequest !== undefined
      ? await start({
          persistTo,
          // The gateway's own migrations (message.wrangler.toml's migrations_dir): its tables and indexes.
          wranglerConfig: path.join(root, "bench/floor/message.wrangler.toml"),
          vars: {
            ...workload.workloadVars,
            FLOOR_MODEL_URL: model?.url ?? "",
            FLOOR_DELIVER_URL: `http://127.0.0.1:${connector.port}/deliver`,
            FLOOR_REQUEST: floorRequest,
          },
        })
      : await start({
          persistTo,
          vars: workload.workloadVars,
          config: {
            ...workload.workloadConfig(connector.port, MODE, model?.url),
            ...(databases > 1 ? { storage: { d1 } } : {}),
          },
          ...(databases > 1 ? { d1 } : {}),
        });
  log(
    `${name}: ${server.url} (pid ${server.pid})${model ? `, model ${model.url}` : ""}${databases > 1 ? `, ${databases} D1 databases` : ""}`,
  );
  await workload.warmUp(server.url, connector);
  return { name, server, connector, model, cpuMs: 0, done: 0 };
}

/** One block of the workload on a side; returns its workerd CPU per request in ms. */
async function block(side: Side, first: number): Promise<number> {
  const read = workload.readOf(MODE);
  const before = side.connector.delivered();
  const cpu0 = groupCpuSeconds(side.server.pid, "workerd");
  await workload.pool(BLOCK, 1, (i) =>
    read
      ? read(side.server.url, first + i)
      : workload.postInbound(side.server.url, `m-${first + i}`, workload.senderOf(MODE, first + i)),
  );
  if (!read) await side.connector.until(before + BLOCK, 60_000);
  const ms = (groupCpuSeconds(side.server.pid, "workerd") - cpu0) * 1000;
  side.cpuMs += ms;
  side.done += BLOCK;
  return ms / BLOCK;
}

async function main() {
  const worktree = FLOOR ? undefined : mkdtempSync(path.join(tmpdir(), "switchboard-ab-base-"));
  if (worktree)
    execFileSync("git", ["worktree", "add", "--detach", worktree, base as string], {
      cwd: root,
      stdio: "ignore",
    });
  /** Every side started, stopped at the end. */
  const sides: Side[] = [];
  try {
    const headLib = await import("../scripts/lib/local-server.ts");
    let a: Side;
    let b: Side;
    if (worktree) {
      symlinkSync(path.join(root, "node_modules"), path.join(worktree, "node_modules"));
      const baseLib = await import(path.join(worktree, "scripts/lib/local-server.ts"));
      a = await startSide("base", baseLib.startLocalServer, headLib.scratchDir, D1_COUNTS[0] ?? 1);
      sides.push(a);
      b = await startSide("head", headLib.startLocalServer, headLib.scratchDir, D1_COUNTS[1] ?? 1);
      sides.push(b);
    } else {
      // The gateway first: what it sent its model in the warm-up is what the floor sends.
      b = await startSide("head", headLib.startLocalServer, headLib.scratchDir, D1_COUNTS[1] ?? 1);
      sides.push(b);
      const sent = b.model?.lastRequest();
      if (!sent) throw new Error("the gateway sent its model no request in the warm-up");
      const template = workload.requestTemplate(sent, workload.HISTORY_KEY);
      log(
        `the gateway's model request (${workload.HISTORY_KEY}, turn 31): ${template.bytes} bytes, ` +
          `${template.messages} messages, system prompt ${template.system.length} chars, ` +
          `${template.tools.length} tools (${JSON.stringify(template.tools).length} bytes), ` +
          `params ${JSON.stringify(template.params)}`,
      );
      a = await startSide(
        "floor",
        headLib.startLocalServer,
        headLib.scratchDir,
        1,
        workload.floorRequestVar(template),
      );
      sides.push(a);
      const floorSent = a.model?.lastRequest();
      if (floorSent) {
        const floorTemplate = workload.requestTemplate(floorSent, workload.HISTORY_KEY);
        log(
          `the floor's model request (the same turn): ${floorTemplate.bytes} bytes, ${floorTemplate.messages} messages`,
        );
      }
    }
    if (MODE === "existing") {
      // Both sides' session actors equally recent: the side started first would otherwise meet
      // its sessions' actors closed (idle all through the other side's start and warm-up).
      for (const side of [a, b]) await workload.touchSessions(side.server.url);
    }
    console.log(
      `${MODE}: ${BLOCKS} blocks of ${BLOCK} per side, alternating (base ${FLOOR ? "the message floor, bench/floor/message-worker.ts" : base}, head = working tree; ${HTTP_MODEL ? "model over HTTP" : "echo model"})`,
    );
    const ratios: number[] = [];
    for (let i = 0; i < BLOCKS; i++) {
      // Alternate which side goes first, so neither always follows the other's work.
      const [x, y] = i % 2 === 0 ? [a, b] : [b, a];
      const first = i * BLOCK;
      const rx = await block(x, first);
      const ry = await block(y, first);
      const [ra, rb] = x === a ? [rx, ry] : [ry, rx];
      ratios.push(rb / ra);
      console.log(
        `block ${String(i + 1).padStart(3)}: base ${ra.toFixed(2)} ms  head ${rb.toFixed(2)} ms  head/base ${(rb / ra).toFixed(3)}`,
      );
    }
    ratios.sort((p, q) => p - q);
    const median = ratios[Math.floor(ratios.length / 2)] ?? Number.NaN;
    const meanA = a.cpuMs / a.done;
    const meanB = b.cpuMs / b.done;
    console.log(
      `\nworkerd CPU per ${workload.readOf(MODE) ? "request" : "message"}: base ${meanA.toFixed(2)} ms, head ${meanB.toFixed(2)} ms ` +
        `(head/base ${(meanB / meanA).toFixed(3)}; median of block pairs ${median.toFixed(3)})`,
    );
    if (HTTP_MODEL) console.log(`model calls: base ${a.model?.calls()}, head ${b.model?.calls()}`);
  } finally {
    for (const side of sides) {
      await side.server.stop();
      side.connector.close();
      side.model?.close();
      rmSync(side.server.persistTo, { recursive: true, force: true });
    }
    if (worktree) {
      execFileSync("git", ["worktree", "remove", "--force", worktree], { cwd: root, stdio: "ignore" });
      rmSync(worktree, { recursive: true, force: true });
    }
  }
}

await main();
