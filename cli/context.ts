/**
 * What every command runs with: the process around it (`CliIo`: env, output streams, fetch,
 * clock, sleep, Ctrl-C), injected so the commands run unchanged in tests, and the helpers that
 * turn the global options into an RPC client and print a payload as JSON or for people.
 */
import { InvalidArgumentError } from "commander";
import { CliError, createClient, EXIT, normalizeUrl, type RpcClient } from "./client.ts";
import { json, type TimeStyle, terminalSafe } from "./format.ts";

export interface CliIo {
  env: Readonly<Record<string, string | undefined>>;
  /** Raw writes (no newline added). */
  stdout(text: string): void;
  stderr(text: string): void;
  fetch: typeof fetch;
  now(): number;
  /** Resolves after `ms`, or as soon as `signal` is aborted. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  /** Calls `handler` on Ctrl-C (SIGINT) until the returned function is called. */
  onInterrupt(handler: () => void): () => void;
}

/** The options every command sees (`cmd.optsWithGlobals()`). */
export interface GlobalOptions {
  url?: string;
  token?: string;
  json?: boolean;
  iso?: boolean;
}

/** Prints text for people (control characters made harmless, see terminalSafe). */
export function print(io: Pick<CliIo, "stdout">, text: string): void {
  const safe = terminalSafe(text);
  io.stdout(safe.endsWith("\n") ? safe : `${safe}\n`);
}

/** Prints a payload as JSON, exactly (JSON escapes the C0 controls itself). */
export function printJson(io: Pick<CliIo, "stdout">, payload: unknown): void {
  io.stdout(`${json(payload)}\n`);
}

/**
 * The client for the gateway the options and environment name; `--url`/`--token` win over
 * SWITCHBOARD_URL/SWITCHBOARD_TOKEN. Missing either is a usage error naming both ways to set it.
 */
export function clientFor(opts: GlobalOptions, io: CliIo): RpcClient {
  const rawUrl = opts.url ?? io.env.SWITCHBOARD_URL;
  if (!rawUrl) {
    throw new CliError(EXIT.usage, "no gateway URL: set SWITCHBOARD_URL or pass --url <url>");
  }
  const token = opts.token ?? io.env.SWITCHBOARD_TOKEN;
  if (!token) {
    throw new CliError(EXIT.usage, "no operator token: set SWITCHBOARD_TOKEN or pass --token <token>");
  }
  const url = normalizeUrl(rawUrl, opts.url !== undefined ? "--url" : "SWITCHBOARD_URL");
  return createClient({ url, token, fetch: io.fetch });
}

export function timeStyle(opts: GlobalOptions, io: CliIo): TimeStyle {
  return { now: io.now(), iso: opts.iso ?? false };
}

/** `--json`: the payload as the gateway sent it; otherwise what `human` renders. */
export function output(io: CliIo, opts: GlobalOptions, payload: unknown, human: () => string): void {
  if (opts.json) printJson(io, payload);
  else print(io, human());
}

/** Option parsers: a bad value is commander's usage error (exit 2) naming the option. */
export function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError("must be a positive integer");
  }
  return n;
}

export function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) {
    throw new InvalidArgumentError("must be an integer, 0 or more");
  }
  return n;
}

export function positiveSeconds(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n <= 0) {
    throw new InvalidArgumentError("must be a number of seconds greater than 0");
  }
  return n;
}

/** Repeatable, comma-separated values: `--kind main,group --kind cron`. */
export function collectList(value: string, previous: string[] | undefined): string[] {
  const items = value
    .split(",")
    .map((v) => v.trim())
    .filter(Boolean);
  if (items.length === 0) throw new InvalidArgumentError("must name at least one value");
  return [...(previous ?? []), ...items];
}
