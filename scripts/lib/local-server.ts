/**
 * Starts the gateway locally with `wrangler dev` on 127.0.0.1, for `npm run dev`, the
 * end-to-end tests and the benchmark. Local D1 migrations are applied to the same persistence
 * directory first. The caller stops the server with `stop()` (by PID, never by name): the whole
 * process group (wrangler and its workerd) is signalled, and `stop()` returns only once every
 * member of the group is gone, so a restart on the same persistence directory never races an
 * orphaned workerd still holding its SQLite files.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import {
  accessSync,
  constants,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const root = path.resolve(import.meta.dirname, "../..");
const wranglerBin = path.join(root, "node_modules/.bin/wrangler");
/** Children run on the project's own Node (node_modules/.bin first), whatever started us. */
const childEnv = {
  ...process.env,
  PATH: `${path.join(root, "node_modules/.bin")}${path.delimiter}${process.env.PATH ?? ""}`,
  WRANGLER_SEND_METRICS: "false",
  CI: "true",
};

export interface LocalServerOptions {
  /** Port to listen on; a free one when omitted. */
  port?: number;
  /** Persistence directory (D1 + Durable Objects); a fresh temporary one when omitted. */
  persistTo?: string;
  /** The SWITCHBOARD_CONFIG document (object or JSON5 text). */
  config?: unknown;
  /** Secrets and extra vars (GATEWAY_TOKEN, connector secrets, provider keys…). */
  vars?: Record<string, string>;
  /** Pass output through to this process (npm run dev) instead of buffering it. */
  inheritOutput?: boolean;
  /** Use an existing env file (e.g. .dev.vars) instead of writing one from `vars`. */
  envFile?: string;
  /** Apply local D1 migrations first (default true; a restart on the same directory can skip it). */
  migrate?: boolean;
  /** Another Worker's wrangler config (the bench's floor Worker); the gateway's when omitted. */
  wranglerConfig?: string;
  /**
   * The D1 bindings to declare (default `["DB"]`, as wrangler.toml has it): each other name is
   * declared next to DB as a local database of its own, migrated like DB. `config.storage.d1`
   * still says which of them the gateway uses.
   */
  d1?: readonly string[];
}

export interface LocalServer {
  url: string;
  port: number;
  persistTo: string;
  pid: number;
  /** The V8 inspector of the Worker (and its Durable Objects), for profiling. */
  inspectorPort: number;
  /** Everything wrangler printed so far (when output is not inherited). */
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Listens on a free port of 127.0.0.1 and returns it (the fakes of the tests, soak and bench). */
export async function listenOnLoopback(server: Server): Promise<number> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as { port: number }).port;
}

export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  server.close();
  await once(server, "close");
  return port;
}

/**
 * A throwaway persistence directory for measurements, on tmpfs (/dev/shm) when the machine has
 * one. Under `wrangler dev`, D1 and every Durable Object are SQLite files written and synced on
 * workerd's single thread, so a slow disk's fsyncs stall every request there; production
 * storage never blocks the isolate. `SWITCHBOARD_SCRATCH_DIR` picks another parent (e.g. /tmp,
 * to measure on disk).
 */
export function scratchDir(prefix: string): string {
  const shm = "/dev/shm";
  let parent = process.env.SWITCHBOARD_SCRATCH_DIR;
  if (!parent) {
    try {
      accessSync(shm, constants.W_OK);
      parent = shm;
    } catch {
      parent = tmpdir();
    }
  }
  return mkdtempSync(path.join(parent, prefix));
}

/** The local database name of a D1 binding declared by `withD1Bindings` (DB: wrangler.toml's). */
export function localDatabaseName(binding: string): string {
  return binding === "DB" ? "switchboard" : `switchboard-${binding.toLowerCase()}`;
}

/**
 * A wrangler config's text with the D1 bindings `names` declared: each other than DB right after
 * DB's own block (so in the top-level Worker, not an `[env.*]` one), with the same migrations.
 */
export function withD1Bindings(text: string, names: readonly string[]): string {
  const first = /^\[\[d1_databases\]\]\n(?:[a-z_]+ = .*\n)+/m.exec(text);
  if (!first) throw new Error("the wrangler config declares no [[d1_databases]] to add bindings next to");
  const extra = names
    .filter((name) => name !== "DB")
    .map(
      (name, i) =>
        `\n[[d1_databases]]\nbinding = "${name}"\ndatabase_name = "${localDatabaseName(name)}"\n` +
        `database_id = "00000000-0000-0000-0000-${String(i + 1).padStart(12, "0")}"\nmigrations_dir = "migrations"\n`,
    )
    .join("");
  const end = first.index + first[0].length;
  return `${text.slice(0, end)}${extra}${text.slice(end)}`;
}

/**
 * The wrangler config to run with the D1 bindings `names`: `base` itself when it declares them
 * (only DB), else a copy next to wrangler.toml (so its relative paths still hold) that does.
 */
export function configWithD1(
  base: string | undefined,
  names: readonly string[] | undefined,
): string | undefined {
  if (!names || (names.length === 1 && names[0] === "DB")) return base;
  const from = base ?? path.join(root, "wrangler.toml");
  const file = path.join(root, `.wrangler-storage-${names.join("-").toLowerCase()}.toml`);
  const text = `# Written by scripts/lib/local-server.ts from ${path.relative(root, from)}: D1 bindings ${names.join(", ")}. Never deployed.\n${withD1Bindings(readFileSync(from, "utf8"), names)}`;
  // Written only when it differs, and by a rename: a `wrangler dev` already running on this
  // file (another test file's gateway) reloads its Worker whenever the file changes.
  if (!existsSync(file) || readFileSync(file, "utf8") !== text) {
    const making = `${file}.${process.pid}.tmp`;
    writeFileSync(making, text);
    renameSync(making, file);
  }
  return file;
}

/**
 * Runs SQL against the local D1 database of `binding` in `persistTo` (`wrangler d1 execute
 * --local`), with the D1 bindings `d1` declared (default `["DB"]`), and returns each statement's
 * rows. Only while no `wrangler dev` holds that directory: two workerd processes must not share
 * its SQLite files.
 */
export async function executeLocalD1<T = Record<string, unknown>>(
  persistTo: string,
  binding: string,
  command: string,
  d1: readonly string[] = ["DB"],
): Promise<T[][]> {
  const wranglerConfig = configWithD1(undefined, d1);
  const args = ["d1", "execute", localDatabaseName(binding), "--local", "--persist-to", persistTo, "--json"];
  if (wranglerConfig) args.push("--config", wranglerConfig);
  args.push("--command", command);
  const { stdout } = await promisify(execFile)(wranglerBin, args, {
    cwd: root,
    env: childEnv,
    maxBuffer: 64 * 1024 * 1024,
  });
  return (JSON.parse(stdout) as Array<{ results: T[] }>).map((r) => r.results);
}

/** Today's migration files, by name, in order. */
function migrationFiles(): string[] {
  return readdirSync(path.join(root, "migrations"))
    .filter((f) => f.endsWith(".sql"))
    .sort();
}

export async function applyLocalMigrations(
  persistTo: string | undefined,
  opts: { wranglerConfig?: string; d1?: readonly string[] } = {},
): Promise<string> {
  // One database after the other: wrangler processes sharing a persistence directory meet
  // SQLITE_BUSY. A database of `persistTo` marked as migrated with today's migration files (a
  // restart on the same state, a copy of `migratedTemplate`) is not asked again: a wrangler
  // process is seconds of CPU.
  const files = migrationFiles().join("\n");
  let out = "";
  for (const binding of opts.d1 ?? ["DB"]) {
    const done = persistTo ? path.join(persistTo, `.migrated-${binding}`) : undefined;
    if (done && existsSync(done) && readFileSync(done, "utf8") === files) continue;
    const args = ["d1", "migrations", "apply", localDatabaseName(binding), "--local"];
    if (persistTo) args.push("--persist-to", persistTo);
    if (opts.wranglerConfig) args.push("--config", opts.wranglerConfig);
    const { stdout } = await promisify(execFile)(wranglerBin, args, { cwd: root, env: childEnv });
    if (done) writeFileSync(done, files);
    out += stdout;
  }
  return out;
}

/**
 * A persistence directory holding only `d1`'s local databases, migrated: made once per set of
 * migration files, databases and wrangler config (its name is their hash, in the OS temporary
 * directory), and copied into each fresh persistence directory, so a gateway started on one
 * costs no wrangler process per database. Made aside and renamed into place: processes racing
 * to make it keep whichever lands first.
 */
async function migratedTemplate(wranglerConfig: string | undefined, d1: readonly string[]): Promise<string> {
  const hash = createHash("sha256");
  for (const file of migrationFiles())
    hash.update(file).update(readFileSync(path.join(root, "migrations", file)));
  hash.update(d1.join(",")).update(readFileSync(wranglerConfig ?? path.join(root, "wrangler.toml")));
  const dir = path.join(tmpdir(), `switchboard-migrated-${hash.digest("hex").slice(0, 16)}`);
  if (existsSync(dir)) return dir;
  const making = mkdtempSync(path.join(tmpdir(), "switchboard-migrating-"));
  await applyLocalMigrations(making, { ...(wranglerConfig ? { wranglerConfig } : {}), d1 });
  try {
    renameSync(making, dir);
  } catch {
    rmSync(making, { recursive: true, force: true });
  }
  return dir;
}

/**
 * Pids of the live members of process group `pgid` (Linux /proc; empty elsewhere). Zombies
 * count as gone: they hold no ports or files.
 */
export function processGroupMembers(pgid: number): number[] {
  if (process.platform !== "linux" || pgid <= 0) return [];
  const members: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after "(comm) ": state ppid pgrp …
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(f[2]) === pgid && f[0] !== "Z") members.push(Number(pid));
    } catch {
      // the process went away
    }
  }
  return members;
}

async function waitForHealth(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited with code ${child.exitCode}`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`wrangler dev did not answer ${url}/healthz within ${timeoutMs}ms`);
}

/** Waits (bounded) until no member of the group is left, SIGKILLing stragglers after 5 s. */
async function groupGone(pgid: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  let killed = false;
  while (processGroupMembers(pgid).length > 0) {
    if (Date.now() > deadline) {
      throw new Error(`processes of group ${pgid} still running: ${processGroupMembers(pgid).join(", ")}`);
    }
    if (!killed && Date.now() > deadline - 5_000) {
      killed = true;
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts `wrangler dev` and waits until it answers. A free port is only free until someone binds
 * it: when another process (a parallel test's gateway or fake) took the port or the inspector's
 * between `freePort` and wrangler's bind, wrangler exits "Address already in use", and the start
 * is tried again on new ports, up to three times.
 */
export async function startLocalServer(opts: LocalServerOptions = {}): Promise<LocalServer> {
  const persistTo = opts.persistTo ?? mkdtempSync(path.join(tmpdir(), "switchboard-"));
  const wranglerConfig = configWithD1(opts.wranglerConfig, opts.d1);
  // A fresh directory starts as a copy of the migrated databases (the migrations below then
  // find nothing to do).
  if (opts.persistTo === undefined && opts.migrate !== false)
    cpSync(await migratedTemplate(wranglerConfig, opts.d1 ?? ["DB"]), persistTo, { recursive: true });
  if (opts.migrate !== false)
    await applyLocalMigrations(persistTo, {
      ...(wranglerConfig ? { wranglerConfig } : {}),
      d1: opts.d1 ?? ["DB"],
    });
  let envFile = opts.envFile;
  if (!envFile) {
    envFile = path.join(persistTo, ".env.local");
    const lines = Object.entries(opts.vars ?? {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
    writeFileSync(envFile, `${lines.join("\n")}\n`);
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnWrangler(opts, persistTo, envFile, wranglerConfig);
    } catch (error) {
      if (attempt >= 3 || !String(error).includes("Address already in use")) throw error;
    }
  }
}

async function spawnWrangler(
  opts: LocalServerOptions,
  persistTo: string,
  envFile: string,
  wranglerConfig: string | undefined,
): Promise<LocalServer> {
  const port = opts.port ?? (await freePort());
  const inspectorPort = await freePort();
  const args = [
    "dev",
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--persist-to",
    persistTo,
    "--env-file",
    envFile,
    "--inspector-port",
    String(inspectorPort),
    "--show-interactive-dev-session=false",
    ...(wranglerConfig ? ["--config", wranglerConfig] : []),
    // Lets tests and operators fire the cron handler: GET /__scheduled?cron=*+*+*+*+* (now), or
    // miniflare's /cdn-cgi/local/scheduled?cron=*+*+*+*+*&time=<epoch ms> for another instant.
    "--test-scheduled",
    "--log-level",
    opts.inheritOutput ? "info" : "warn",
  ];
  if (opts.config !== undefined) {
    const text = typeof opts.config === "string" ? opts.config : JSON.stringify(opts.config);
    args.push("--var", `SWITCHBOARD_CONFIG:${text}`);
  }
  const child = spawn(wranglerBin, args, {
    cwd: root,
    env: childEnv,
    stdio: opts.inheritOutput ? "inherit" : ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  child.stdout?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    output += d.toString();
  });
  const url = `http://127.0.0.1:${port}`;
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (child.pid === undefined) return;
    const pgid = child.pid;
    if (child.exitCode !== null || child.signalCode !== null) {
      await groupGone(pgid);
      return;
    }
    const exited = once(child, "exit");
    // wrangler runs workerd as a child: signal the whole process group we created.
    try {
      process.kill(-child.pid, signal);
    } catch {
      child.kill(signal);
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-(child.pid ?? 0), "SIGKILL");
      } catch {
        // already gone
      }
    }, 5000);
    await exited;
    clearTimeout(timer);
    await groupGone(pgid);
  };
  try {
    await waitForHealth(url, child, 60_000);
  } catch (error) {
    await stop("SIGKILL");
    throw new Error(`${error instanceof Error ? error.message : error}\n${output}`);
  }
  return { url, port, persistTo, pid: child.pid ?? 0, inspectorPort, output: () => output, stop };
}
