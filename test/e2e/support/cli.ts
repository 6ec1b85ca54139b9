/**
 * Driving the `switchboard` CLI in tests: in process (`runCli`, over an injected `CliIo` whose
 * fetch answers from a handler, whose sleep resolves at once, and whose Ctrl-C the test
 * presses) and as a real child process (`execCli`, `spawnCli`) against `wrangler dev`.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import path from "node:path";
import { run } from "../../../cli/main.ts";

const root = path.resolve(import.meta.dirname, "../../..");
const BIN = "bin/switchboard.ts";

export interface RpcRequest {
  url: string;
  method: string;
  params: Record<string, unknown>;
  authorization: string | null;
}

/** What the fake gateway answers: a JSON body with a status, or a thrown error (no answer). */
export type RpcHandler = (
  req: RpcRequest,
) => { status?: number; body: unknown } | Promise<{ status?: number; body: unknown }>;

export function ok(payload: unknown) {
  return { status: 200, body: { ok: true, payload } };
}

export function fail(status: number, code: string, message: string) {
  return { status, body: { ok: false, error: { code, message } } };
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  requests: RpcRequest[];
  /** Every `ms` the CLI slept for, in order. */
  sleeps: number[];
}

export interface RunCliOptions {
  env?: Record<string, string | undefined>;
  /** Presses Ctrl-C when the CLI starts its n-th sleep (1-based). */
  interruptAtSleep?: number;
  now?: () => number;
}

export const FAKE_URL = "http://gateway.test";

export async function runCli(argv: string[], handler: RpcHandler, opts: RunCliOptions = {}): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  const requests: RpcRequest[] = [];
  const sleeps: number[] = [];
  const interrupts = new Set<() => void>();
  const code = await run(argv, {
    env: opts.env ?? { SWITCHBOARD_URL: FAKE_URL, SWITCHBOARD_TOKEN: "t0ken" },
    stdout: (text) => {
      stdout += text;
    },
    stderr: (text) => {
      stderr += text;
    },
    fetch: async (input, init) => {
      const url = String(input);
      const req: RpcRequest = {
        url,
        method: url.replace(/^.*\/rpc\//, ""),
        params: JSON.parse(String(init?.body ?? "{}")) as Record<string, unknown>,
        authorization: new Headers(init?.headers).get("authorization"),
      };
      requests.push(req);
      const answer = await handler(req);
      const body = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
      return new Response(body, { status: answer.status ?? 200 });
    },
    now: opts.now ?? (() => Date.now()),
    sleep: async (ms) => {
      sleeps.push(ms);
      if (sleeps.length === opts.interruptAtSleep) for (const h of interrupts) h();
      // Let other microtasks run, like a real timer would.
      await new Promise((r) => setImmediate(r));
    },
    onInterrupt(handler) {
      interrupts.add(handler);
      return () => interrupts.delete(handler);
    },
  });
  return { code, stdout, stderr, requests, sleeps };
}

export interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cliEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const base = { ...process.env };
  delete base.SWITCHBOARD_URL;
  delete base.SWITCHBOARD_TOKEN;
  return { ...base, ...env };
}

/** Runs `node bin/switchboard.ts …` to the end (killed after `timeoutMs`). */
export function execCli(
  args: string[],
  env: Record<string, string | undefined>,
  timeoutMs = 60_000,
): Promise<ExecResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: root, env: cliEnv(env), timeout: timeoutMs, killSignal: "SIGKILL" },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export interface RunningCli {
  child: ChildProcess;
  output(): { stdout: string; stderr: string };
  /** Resolves with the exit code (null when killed by a signal) and the signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `node bin/switchboard.ts …` and keeps it running (a `tail`); stop it by its PID. */
export function spawnCli(args: string[], env: Record<string, string | undefined>): RunningCli {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: root, env: cliEnv(env) });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => {
    stdout += d.toString("utf8");
  });
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString("utf8");
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
  return { child, output: () => ({ stdout, stderr }), exited };
}
