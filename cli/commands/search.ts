/**
 * `search <query>`: transcript search over every session (RPC `sessions.search`), best match
 * first, as a table of hits with the `history` command that reopens each one at its message.
 */
import { type Command, InvalidArgumentError } from "commander";
import { type CliIo, clientFor, type GlobalOptions, output, positiveInt, timeStyle } from "../context.ts";
import { table, when } from "../format.ts";

export interface SearchHit {
  sessionKey: string;
  sessionId: string;
  seq: number;
  role: string;
  timestamp: number;
  agentId: string;
  channel: string | null;
  excerpt: string;
}

export interface SearchAnswer {
  query: string;
  count: number;
  results: SearchHit[];
  nextCursor?: string;
}

const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--since`: an ISO date or time, or a span back from now (`30m`, `12h`, `7d`). */
export function sinceOption(value: string, now = Date.now()): number {
  const span = /^(\d+)([mhd])$/.exec(value.trim());
  if (span) return now - Number(span[1]) * (UNIT_MS[span[2] as string] as number);
  const at = Date.parse(value);
  if (Number.isNaN(at))
    throw new InvalidArgumentError("must be an ISO date or time, or a span like 30m, 12h, 7d");
  return at;
}

export function searchTable(answer: SearchAnswer, now: number, iso: boolean): string {
  if (answer.results.length === 0) return `no messages match ${JSON.stringify(answer.query)}`;
  const lines = [
    table(answer.results, [
      { header: "SESSION", value: (h) => h.sessionKey, max: 48 },
      { header: "SEQ", value: (h) => String(h.seq), align: "right" },
      { header: "ROLE", value: (h) => h.role },
      { header: "WHEN", value: (h) => when(h.timestamp, { now, iso }) },
      { header: "EXCERPT", value: (h) => h.excerpt, max: 100 },
    ]),
    "",
    `open a hit: switchboard history <session> --session-id <sessionId> --around <seq>`,
  ];
  const first = answer.results[0];
  if (first) {
    lines.push(
      `  e.g. switchboard history ${first.sessionKey} --session-id ${first.sessionId} --around ${first.seq}`,
    );
  }
  if (answer.nextCursor)
    lines.push("", `more: switchboard search ${JSON.stringify(answer.query)} --cursor ${answer.nextCursor}`);
  return lines.join("\n");
}

interface SearchOptions extends GlobalOptions {
  agent?: string;
  session?: string;
  since?: number;
  limit: number;
  cursor?: string;
}

export function registerSearchCommand(program: Command, io: CliIo): void {
  program
    .command("search")
    .description("search every session's transcripts, best match first (RPC sessions.search)")
    .argument("<query>", 'words to find; "quoted words" match as a phrase')
    .option("--agent <id>", "only this agent's sessions")
    .option("--session <key>", "only this session (every transcript it had)")
    .option("--since <when>", "only messages since an ISO date or a span back (30m, 12h, 7d)", (v) =>
      sinceOption(v, io.now()),
    )
    .option("--limit <n>", "at most <n> hits (at most 50)", positiveInt, 10)
    .option("--cursor <cursor>", "continue from the cursor a search printed")
    .option("--json", "print the raw payload as JSON")
    .action(async (query: string, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<SearchOptions>();
      const answer = await clientFor(opts, io).call<SearchAnswer>("sessions.search", {
        query,
        limit: Math.min(opts.limit, 50),
        archived: "all",
        ...(opts.agent ? { agentId: opts.agent } : {}),
        ...(opts.session ? { sessionKey: opts.session } : {}),
        ...(opts.since !== undefined ? { since: opts.since } : {}),
        ...(opts.cursor ? { cursor: opts.cursor } : {}),
      });
      const style = timeStyle(opts, io);
      output(io, opts, answer, () => searchTable(answer, style.now, style.iso));
    });
}
