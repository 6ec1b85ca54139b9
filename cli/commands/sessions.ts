/**
 * Commands on sessions: `sessions list` and `sessions show` (RPC `sessions.list`,
 * `sessions.get`), `history` (`chat.history`) and `reset` (`sessions.reset`). A listing longer
 * than one RPC page (200 rows) pages through `sessions.list`, newest first.
 */
import type { Command } from "commander";
import type { RpcClient } from "../client.ts";
import {
  type CliIo,
  clientFor,
  collectList,
  type GlobalOptions,
  output,
  positiveInt,
  timeStyle,
} from "../context.ts";
import {
  type HistoryMessage,
  isoTime,
  keyValues,
  messageLines,
  type TimeStyle,
  table,
  when,
} from "../format.ts";

export interface SessionRow {
  key: string;
  kind: string;
  channel: string;
  displayName?: string;
  label?: string;
  updatedAt: number;
  sessionId: string;
  agentId?: string;
  model?: string;
  contextTokens?: number;
  totalTokens?: number;
  thinkingLevel?: string;
  verboseLevel?: string;
  sendPolicy?: string;
  lastChannel?: string;
  lastTo?: string;
  deliveryContext?: unknown;
  spawnedBy?: string;
  archivedAt?: number;
  runStatus?: string;
  abortedLastRun?: boolean;
  expired?: boolean;
  expiredAt?: number;
  expiresAt?: number;
  transcriptPath?: string;
}

export interface SessionPage {
  count: number;
  sessions: SessionRow[];
  nextCursor?: string;
}

export interface HistoryPage {
  sessionKey: string;
  sessionId: string;
  messages: HistoryMessage[];
  hasMore: boolean;
  nextBefore?: number;
}

/** The most rows one `sessions.list` call returns. */
const PAGE_MAX = 200;

/**
 * Up to `want` sessions, newest first, paging `sessions.list` with `params` from `cursor` on;
 * pages are sized to stop exactly at `want`, so `nextCursor` continues the listing.
 */
export async function collectSessions(
  client: RpcClient,
  params: Record<string, unknown>,
  want: number,
  cursor?: string,
): Promise<{ sessions: SessionRow[]; nextCursor?: string }> {
  const sessions: SessionRow[] = [];
  while (sessions.length < want) {
    const answer = await client.call<SessionPage>("sessions.list", {
      ...params,
      limit: Math.min(PAGE_MAX, want - sessions.length),
      ...(cursor ? { cursor } : {}),
    });
    sessions.push(...answer.sessions.slice(0, want - sessions.length));
    cursor = answer.nextCursor;
    if (!cursor || answer.sessions.length === 0) return { sessions };
  }
  return cursor ? { sessions, nextCursor: cursor } : { sessions };
}

function state(row: SessionRow): string {
  if (row.archivedAt) return "archived";
  if (row.expired) return "expired";
  return row.runStatus ?? "-";
}

export function sessionsTable(rows: SessionRow[], style: TimeStyle): string {
  if (rows.length === 0) return "no sessions";
  return table(rows, [
    { header: "KEY", value: (r) => r.key, max: 56 },
    { header: "KIND", value: (r) => r.kind },
    { header: "CHANNEL", value: (r) => r.channel, max: 16 },
    { header: "LABEL", value: (r) => r.label ?? r.displayName ?? "-", max: 24 },
    { header: "MODEL", value: (r) => r.model ?? "-", max: 28 },
    { header: "TOKENS", value: (r) => String(r.totalTokens ?? 0), align: "right" },
    { header: "STATE", value: state },
    { header: "UPDATED", value: (r) => when(r.updatedAt, style) },
  ]);
}

function at(ms: number | undefined, style: TimeStyle): string | undefined {
  if (ms === undefined) return undefined;
  return style.iso ? isoTime(ms) : `${isoTime(ms)} (${when(ms, style)})`;
}

export function sessionText(row: SessionRow, style: TimeStyle): string {
  return keyValues([
    ["key", row.key],
    ["sessionId", row.sessionId],
    ["kind", row.kind],
    ["channel", row.channel],
    ["agent", row.agentId],
    ["label", row.label],
    ["displayName", row.displayName],
    ["model", row.model],
    [
      "tokens",
      row.totalTokens !== undefined
        ? `${row.totalTokens}${row.contextTokens ? ` of a ${row.contextTokens}-token window` : ""}`
        : undefined,
    ],
    ["state", state(row)],
    ["abortedLastRun", row.abortedLastRun ? "yes" : undefined],
    ["updated", at(row.updatedAt, style)],
    ["expires", at(row.expiresAt, style)],
    ["expired", at(row.expiredAt, style)],
    ["archived", at(row.archivedAt, style)],
    ["sendPolicy", row.sendPolicy],
    ["thinkingLevel", row.thinkingLevel],
    ["verboseLevel", row.verboseLevel],
    ["lastTo", row.lastTo ? `${row.lastChannel ?? "?"}:${row.lastTo}` : undefined],
    ["deliveryContext", row.deliveryContext ? JSON.stringify(row.deliveryContext) : undefined],
    ["spawnedBy", row.spawnedBy],
    ["transcript", row.transcriptPath],
  ]);
}

export function historyText(page: HistoryPage, opts: { tools: boolean; key: string }): string {
  const lines = page.messages.flatMap((m) => messageLines(m, { tools: opts.tools }));
  if (lines.length === 0) lines.push(`no messages${page.messages.length ? " without --tools" : ""}`);
  if (page.hasMore && page.nextBefore !== undefined) {
    lines.push("", `older messages: switchboard history ${opts.key} --before ${page.nextBefore}`);
  }
  return lines.join("\n");
}

interface ListOptions extends GlobalOptions {
  kind?: string[];
  agent?: string;
  label?: string;
  channel?: string;
  active?: number;
  archived?: boolean;
  limit: number;
  cursor?: string;
}

export function registerSessionCommands(program: Command, io: CliIo): void {
  const sessions = program.command("sessions").description("list and inspect sessions");

  sessions
    .command("list")
    .description("sessions, most recently updated first (RPC sessions.list)")
    .option(
      "--kind <kinds>",
      "only these kinds: main, group, cron, hook, node, other (comma-separated)",
      collectList,
    )
    .option("--agent <id>", "only this agent's sessions")
    .option("--label <label>", "only the session with this label")
    .option("--channel <channel>", "only sessions on this channel (e.g. telegram, internal)")
    .option("--active <minutes>", "only sessions updated in the last <minutes>", positiveInt)
    .option("--archived", "include archived sessions")
    .option("--limit <n>", "at most <n> sessions", positiveInt, 50)
    .option("--cursor <cursor>", "continue a listing from the cursor it printed")
    .option("--json", "print the raw payload as JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<ListOptions>();
      const client = clientFor(opts, io);
      const params: Record<string, unknown> = {};
      if (opts.kind) params.kinds = opts.kind;
      if (opts.agent) params.agentId = opts.agent;
      if (opts.label) params.label = opts.label;
      if (opts.active) params.activeMinutes = opts.active;
      if (opts.archived) params.archived = "all";
      if (opts.channel) params.channel = opts.channel;
      const found = await collectSessions(client, params, opts.limit, opts.cursor);
      const payload: SessionPage = {
        count: found.sessions.length,
        sessions: found.sessions,
        ...(found.nextCursor ? { nextCursor: found.nextCursor } : {}),
      };
      output(io, opts, payload, () => {
        const text = [sessionsTable(payload.sessions, timeStyle(opts, io))];
        if (payload.nextCursor) {
          text.push("", `more: switchboard sessions list --cursor ${payload.nextCursor}`);
        }
        return text.join("\n");
      });
    });

  sessions
    .command("show")
    .description("one session's entry: kind, model, tokens, state, delivery route (RPC sessions.get)")
    .argument("<key>", "session key (e.g. agent:main:main, or main)")
    .option("--json", "print the session row as JSON")
    .action(async (key: string, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const row = await clientFor(opts, io).call<SessionRow>("sessions.get", { key });
      output(io, opts, row, () => sessionText(row, timeStyle(opts, io)));
    });

  program
    .command("history")
    .description("a session's transcript, oldest first (RPC chat.history)")
    .argument("<key>", "session key")
    .option("--limit <n>", "the newest <n> messages (at most 1000)", positiveInt, 20)
    .option("--before <seq>", "messages before this seq (the cursor printed under a page)", positiveInt)
    .option("--session-id <id>", "a transcript of the session from before a reset (a search hit's sessionId)")
    .option("--around <seq>", "messages around this seq (a search hit's seq)", positiveInt)
    .option("--tools", "show tool calls and tool results")
    .option("--json", "print the raw payload as JSON")
    .action(async (key: string, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<
        GlobalOptions & {
          limit: number;
          before?: number;
          tools?: boolean;
          sessionId?: string;
          around?: number;
        }
      >();
      const page = await clientFor(opts, io).call<HistoryPage>("chat.history", {
        sessionKey: key,
        limit: opts.limit,
        includeTools: !!opts.tools,
        ...(opts.before ? { before: opts.before } : {}),
        ...(opts.sessionId ? { sessionId: opts.sessionId } : {}),
        ...(opts.around ? { aroundSeq: opts.around } : {}),
      });
      output(io, opts, page, () => historyText(page, { tools: !!opts.tools, key: page.sessionKey }));
    });

  program
    .command("reset")
    .description(
      "start a new sessionId under the key; the old transcript stays readable (RPC sessions.reset)",
    )
    .argument("<key>", "session key")
    .option("--json", "print the raw payload as JSON")
    .action(async (key: string, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const payload = await clientFor(opts, io).call<{ key: string; sessionId: string }>("sessions.reset", {
        key,
      });
      output(io, opts, payload, () => `reset ${payload.key}: new sessionId ${payload.sessionId}`);
    });
}
