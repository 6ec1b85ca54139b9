/**
 * `tail <key>`: prints a session's newest messages, then follows its transcript until Ctrl-C
 * (exit 0). `chat.history` pages backwards from the newest message; each poll reads pages until
 * it reaches the newest `seq` already printed, so a burst of messages between two polls is
 * printed whole and in order. A reset (a new sessionId under the key) restarts from the new
 * transcript's beginning, announced on stderr. The poll interval and the sleep are injected.
 */
import type { Command } from "commander";
import type { RpcClient } from "../client.ts";
import {
  type CliIo,
  clientFor,
  type GlobalOptions,
  nonNegativeInt,
  positiveSeconds,
  print,
} from "../context.ts";
import { type HistoryMessage, messageLines } from "../format.ts";
import type { HistoryPage } from "./sessions.ts";

/** Messages one poll reads per page, and how many pages at most. */
const PAGE = 200;
const MAX_PAGES = 10;

export interface FollowOptions {
  key: string;
  /** How many of the newest messages to print first (0: only new ones). */
  lines: number;
  intervalMs: number;
  tools: boolean;
  /** One JSON message per line instead of formatted lines. */
  json: boolean;
}

interface Cursor {
  sessionId: string;
  /** The newest seq printed (or skipped) so far. */
  lastSeq: number;
}

function seqOf(m: HistoryMessage): number {
  return m.seq ?? 0;
}

async function history(client: RpcClient, key: string, tools: boolean, signal: AbortSignal, extra = {}) {
  return client.call<HistoryPage>(
    "chat.history",
    { sessionKey: key, includeTools: tools, ...extra },
    { signal },
  );
}

/**
 * The messages newer than the cursor, oldest first, and the cursor after them. When the
 * sessionId changed (a reset), everything of the new transcript is new.
 */
export async function newMessages(
  client: RpcClient,
  opts: Pick<FollowOptions, "key" | "tools">,
  cursor: Cursor,
  signal: AbortSignal,
): Promise<{ messages: HistoryMessage[]; cursor: Cursor; reset: boolean }> {
  const fresh: HistoryMessage[] = [];
  let from = cursor;
  let reset = false;
  let before: number | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const answer = await history(client, opts.key, opts.tools, signal, {
      limit: PAGE,
      ...(before !== undefined ? { before } : {}),
    });
    if (page === 0 && answer.sessionId !== from.sessionId) {
      from = { sessionId: answer.sessionId, lastSeq: 0 };
      reset = true;
    }
    const newer = answer.messages.filter((m) => seqOf(m) > from.lastSeq);
    fresh.unshift(...newer);
    if (newer.length < answer.messages.length || !answer.hasMore || answer.nextBefore === undefined) break;
    before = answer.nextBefore;
  }
  const lastSeq = Math.max(from.lastSeq, ...fresh.map(seqOf));
  return { messages: fresh, cursor: { sessionId: from.sessionId, lastSeq }, reset };
}

/** Prints the newest messages, then new ones every `intervalMs`, until `signal` is aborted. */
export async function follow(
  client: RpcClient,
  opts: FollowOptions,
  io: Pick<CliIo, "stdout" | "stderr" | "sleep">,
  signal: AbortSignal,
): Promise<void> {
  const show = (messages: HistoryMessage[]) => {
    for (const m of messages) {
      if (opts.json) io.stdout(`${JSON.stringify(m)}\n`);
      else for (const line of messageLines(m, { tools: opts.tools })) print(io, line);
    }
  };
  const first = await history(client, opts.key, opts.tools, signal, { limit: Math.max(1, opts.lines) });
  show(opts.lines > 0 ? first.messages : []);
  let cursor: Cursor = { sessionId: first.sessionId, lastSeq: Math.max(0, ...first.messages.map(seqOf)) };
  while (!signal.aborted) {
    await io.sleep(opts.intervalMs, signal);
    if (signal.aborted) break;
    const next = await newMessages(client, opts, cursor, signal);
    if (next.reset) io.stderr(`switchboard: ${opts.key} was reset: new sessionId ${next.cursor.sessionId}\n`);
    show(next.messages);
    cursor = next.cursor;
  }
}

interface TailOptions extends GlobalOptions {
  lines: number;
  interval: number;
  tools?: boolean;
}

export function registerTailCommand(program: Command, io: CliIo): void {
  program
    .command("tail")
    .description("print a session's newest messages, then follow new ones until Ctrl-C")
    .argument("<key>", "session key")
    .option("-n, --lines <n>", "how many of the newest messages to print first", nonNegativeInt, 10)
    .option("--interval <seconds>", "how often to poll the transcript", positiveSeconds, 2)
    .option("--tools", "show tool calls and tool results")
    .option("--json", "print one JSON message per line")
    .action(async (key: string, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<TailOptions>();
      const client = clientFor(opts, io);
      const controller = new AbortController();
      const stop = io.onInterrupt(() => controller.abort());
      try {
        await follow(
          client,
          {
            key,
            lines: opts.lines,
            intervalMs: opts.interval * 1000,
            tools: !!opts.tools,
            json: !!opts.json,
          },
          io,
          controller.signal,
        );
      } catch (error) {
        // Ctrl-C in the middle of a poll aborts its request: that is the way out, not an error.
        if (!controller.signal.aborted) throw error;
      } finally {
        stop();
      }
    });
}
