/**
 * `send <key> <message>`: queues a run in the session (RPC `agent` with `sessionKey`, which
 * starts the session when the key is new) and, with `--wait`, waits for it (`agent.wait`,
 * repeated until the run ends or `--timeout` passes) and prints the reply, read back from the
 * transcript (`chat.history`, the run's last assistant text).
 */
import type { Command } from "commander";
import { CliError, EXIT, type RpcClient } from "../client.ts";
import { type CliIo, clientFor, type GlobalOptions, output, positiveSeconds, printJson } from "../context.ts";
import { type HistoryMessage, messageText } from "../format.ts";

interface Queued {
  runId: string;
  sessionKey: string;
  sessionId: string;
  status: string;
}

export interface WaitResult {
  runId: string;
  status: "ok" | "error" | "aborted" | "timeout";
  runStatus: string;
  startedAt?: number;
  endedAt?: number;
  error?: string;
}

const TERMINAL = new Set(["ok", "error", "aborted", "timeout"]);
/** One `agent.wait` call waits at most this long server-side; the CLI calls again until its deadline. */
const WAIT_SLICE_MS = 30_000;
/** Headroom for the HTTP request around a server-side wait. */
const REQUEST_SLACK_MS = 15_000;

/** Waits for a run to end, at most `timeoutMs`; `undefined` when it is still going then. */
export async function waitForRun(
  client: RpcClient,
  runId: string,
  timeoutMs: number,
  now: () => number,
): Promise<WaitResult | undefined> {
  const deadline = now() + timeoutMs;
  for (;;) {
    const remaining = Math.max(0, deadline - now());
    const slice = Math.min(WAIT_SLICE_MS, remaining);
    const result = await client.call<WaitResult>(
      "agent.wait",
      { runId, timeoutMs: slice },
      { timeoutMs: slice + REQUEST_SLACK_MS },
    );
    if (TERMINAL.has(result.runStatus)) return result;
    if (now() >= deadline) return undefined;
  }
}

/** The run's answer: its last assistant message with text. */
export async function replyOf(
  client: RpcClient,
  sessionKey: string,
  runId: string,
): Promise<string | undefined> {
  const page = await client.call<{ messages: HistoryMessage[] }>("chat.history", {
    sessionKey,
    limit: 50,
    includeTools: false,
  });
  const texts = page.messages
    .filter((m) => m.runId === runId && m.role === "assistant")
    .map(messageText)
    .filter((t) => t.trim() !== "");
  return texts[texts.length - 1];
}

interface SendOptions extends GlobalOptions {
  wait?: boolean;
  timeout: number;
  deliver?: boolean;
  idempotencyKey?: string;
}

export function registerSendCommand(program: Command, io: CliIo): void {
  program
    .command("send")
    .description("send a message to a session as the operator (RPC agent); --wait prints the reply")
    .argument("<key>", "session key (a new key starts a session)")
    .argument("<message...>", "the message (several words are joined with spaces)")
    .option("--wait", "wait for the run to end and print the reply")
    .option("--timeout <seconds>", "with --wait, give up waiting after this long", positiveSeconds, 120)
    .option("--deliver", "also deliver the reply to the session's chat route")
    .option("--idempotency-key <key>", "the same key sends once (a retry returns the same run)")
    .option("--json", "print the raw payload as JSON")
    .action(async (key: string, words: string[], _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<SendOptions>();
      const client = clientFor(opts, io);
      const queued = await client.call<Queued>("agent", {
        sessionKey: key,
        message: words.join(" "),
        ...(opts.deliver ? { deliver: true } : {}),
        ...(opts.idempotencyKey ? { idempotencyKey: opts.idempotencyKey } : {}),
      });
      if (!opts.wait) {
        output(io, opts, queued, () => `queued run ${queued.runId} in ${queued.sessionKey}`);
        return;
      }
      const result = await waitForRun(client, queued.runId, opts.timeout * 1000, io.now);
      if (!result) {
        throw new CliError(
          EXIT.api,
          `run ${queued.runId} is still running after ${opts.timeout}s (it goes on; see switchboard history ${queued.sessionKey})`,
        );
      }
      const reply = await replyOf(client, queued.sessionKey, queued.runId);
      const payload = { ...result, sessionKey: queued.sessionKey, sessionId: queued.sessionId, reply };
      if (result.runStatus !== "ok") {
        if (opts.json) printJson(io, payload);
        throw new CliError(
          EXIT.api,
          `run ${queued.runId} ended ${result.runStatus}${result.error ? `: ${result.error}` : ""}`,
        );
      }
      output(io, opts, payload, () => reply ?? "(the run ended without a text reply)");
    });
}
