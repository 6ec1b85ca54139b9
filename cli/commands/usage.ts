/**
 * `usage`: what the gateway's model calls cost (RPC `usage.summary`), grouped by day, agent,
 * model, channel or session over a range of days, as a table with its total.
 */
import { type Command, InvalidArgumentError } from "commander";
import { type CliIo, clientFor, type GlobalOptions, output, positiveInt } from "../context.ts";
import { table } from "../format.ts";

export interface UsageRow {
  group: string;
  runs: number;
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Null when every model call was unpriced. */
  costUsd: number | null;
  unpricedCalls: number;
}

export interface UsageAnswer {
  from: string;
  to: string;
  groupBy: string;
  timezone: string;
  rows: UsageRow[];
  more?: number;
  total: Omit<UsageRow, "group">;
}

const GROUPS = ["day", "agent", "model", "channel", "session"] as const;

function groupOption(value: string): (typeof GROUPS)[number] {
  const found = GROUPS.find((g) => g === value);
  if (!found) throw new InvalidArgumentError(`must be one of ${GROUPS.join(", ")}`);
  return found;
}

function dayOption(value: string): string {
  if (!/^\d{4}-\d\d-\d\d$/.test(value)) throw new InvalidArgumentError("must be a day, YYYY-MM-DD");
  return value;
}

const usd = (n: number | null) => (n === null ? "—" : `$${n.toFixed(n !== 0 && Math.abs(n) < 0.01 ? 4 : 2)}`);
const count = (n: number) => n.toLocaleString("en-US");

export function usageTable(answer: UsageAnswer): string {
  const title = `${answer.from} to ${answer.to} (${answer.timezone}), by ${answer.groupBy}`;
  if (answer.rows.length === 0) return `${title}: no model calls`;
  const all = [...answer.rows, { group: "TOTAL", ...answer.total }];
  const lines = [
    title,
    table(all, [
      { header: answer.groupBy.toUpperCase(), value: (r) => r.group || "(none)", max: 56 },
      { header: "RUNS", value: (r) => count(r.runs), align: "right" },
      { header: "CALLS", value: (r) => count(r.modelCalls), align: "right" },
      { header: "IN", value: (r) => count(r.inputTokens), align: "right" },
      { header: "OUT", value: (r) => count(r.outputTokens), align: "right" },
      { header: "CACHED", value: (r) => count(r.cacheReadTokens + r.cacheWriteTokens), align: "right" },
      { header: "COST", value: (r) => usd(r.costUsd), align: "right" },
      { header: "UNPRICED", value: (r) => count(r.unpricedCalls), align: "right" },
    ]),
  ];
  if (answer.more)
    lines.push(`(${answer.more} more ${answer.groupBy} rows in the total; --limit to see them)`);
  if (answer.total.unpricedCalls > 0)
    lines.push(
      "unpriced calls are not in COST (— when none was priced): give their models a price in models.pricing",
    );
  return lines.join("\n");
}

interface UsageOptions extends GlobalOptions {
  by: (typeof GROUPS)[number];
  from?: string;
  to?: string;
  agent?: string;
  channel?: string;
  session?: string;
  limit: number;
}

export function registerUsageCommand(program: Command, io: CliIo): void {
  program
    .command("usage")
    .description("what model calls cost, by day, agent, model, channel or session (RPC usage.summary)")
    .option("--by <group>", `group by ${GROUPS.join(", ")}`, groupOption, "day")
    .option("--from <day>", "first day, YYYY-MM-DD (default: 29 days before --to)", dayOption)
    .option("--to <day>", "last day, YYYY-MM-DD (default: today in session.timezone)", dayOption)
    .option("--agent <id>", "only this agent")
    .option("--channel <id>", "only this channel")
    .option("--session <key>", "only this session")
    .option("--limit <n>", "at most <n> rows (the total counts them all)", positiveInt, 50)
    .option("--json", "print the raw payload as JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<UsageOptions>();
      const answer = await clientFor(opts, io).call<UsageAnswer>("usage.summary", {
        groupBy: opts.by,
        limit: Math.min(opts.limit, 1000),
        ...(opts.from ? { from: opts.from } : {}),
        ...(opts.to ? { to: opts.to } : {}),
        ...(opts.agent ? { agentId: opts.agent } : {}),
        ...(opts.channel ? { channel: opts.channel } : {}),
        ...(opts.session ? { sessionKey: opts.session } : {}),
      });
      output(io, opts, answer, () => usageTable(answer));
    });
}
