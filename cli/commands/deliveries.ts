/**
 * `deliveries`: the outbox, newest first (RPC `deliveries.list`), and `deliveries retry <id>`,
 * which queues a dead delivery again (`deliveries.retry`).
 */
import type { Command } from "commander";
import { type CliIo, clientFor, type GlobalOptions, output, positiveInt, timeStyle } from "../context.ts";
import { type TimeStyle, table, when } from "../format.ts";

export interface DeliveryRow {
  deliveryId: string;
  kind: string;
  sessionKey: string;
  runId?: string;
  channel: string;
  accountId?: string;
  to: string;
  threadId?: string;
  text: string;
  status: string;
  attempts: number;
  nextAttemptAt?: number;
  lastError?: string;
  createdAt: number;
  updatedAt: number;
  deliveredAt?: number;
}

interface DeliveryPage {
  deliveries: DeliveryRow[];
  nextCursor?: string;
}

interface RetryAnswer {
  deliveryId: string;
  status: string;
  requeued: boolean;
}

export function deliveriesTable(rows: DeliveryRow[], style: TimeStyle): string {
  if (rows.length === 0) return "no deliveries";
  return table(rows, [
    { header: "ID", value: (d) => d.deliveryId },
    { header: "STATUS", value: (d) => d.status },
    { header: "TRIES", value: (d) => String(d.attempts), align: "right" },
    { header: "KIND", value: (d) => d.kind },
    { header: "SESSION", value: (d) => d.sessionKey, max: 40 },
    { header: "TO", value: (d) => `${d.channel}:${d.to}${d.threadId ? `#${d.threadId}` : ""}`, max: 28 },
    { header: "CREATED", value: (d) => when(d.createdAt, style) },
    {
      header: "NEXT/DONE",
      value: (d) =>
        d.deliveredAt ? when(d.deliveredAt, style) : d.nextAttemptAt ? when(d.nextAttemptAt, style) : "-",
    },
    { header: "LAST ERROR", value: (d) => d.lastError ?? "-", max: 48 },
  ]);
}

export function retryText(answer: RetryAnswer): string {
  return answer.requeued
    ? `queued delivery ${answer.deliveryId} again (${answer.status})`
    : `delivery ${answer.deliveryId} is still ${answer.status}: left as it is`;
}

interface ListOptions extends GlobalOptions {
  status?: string;
  session?: string;
  limit: number;
  cursor?: string;
}

export function registerDeliveryCommands(program: Command, io: CliIo): void {
  const deliveries = program
    .command("deliveries")
    .description("the outbox of replies to connectors, newest first (RPC deliveries.list)")
    .option("--status <status>", "only pending, retrying, delivered or dead ones")
    .option("--session <key>", "only this session's deliveries")
    .option("--limit <n>", "at most <n> deliveries (at most 200)", positiveInt, 50)
    .option("--cursor <cursor>", "continue a listing from the cursor it printed")
    .option("--json", "print the raw payload as JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<ListOptions>();
      const page = await clientFor(opts, io).call<DeliveryPage>("deliveries.list", {
        limit: opts.limit,
        ...(opts.status ? { status: opts.status } : {}),
        ...(opts.session ? { sessionKey: opts.session } : {}),
        ...(opts.cursor ? { cursor: opts.cursor } : {}),
      });
      output(io, opts, page, () => {
        const text = [deliveriesTable(page.deliveries, timeStyle(opts, io))];
        if (page.nextCursor) text.push("", `more: switchboard deliveries --cursor ${page.nextCursor}`);
        return text.join("\n");
      });
    });

  deliveries
    .command("retry")
    .description("queue a dead delivery again for a fresh round of attempts (RPC deliveries.retry)")
    .argument("<id>", "the delivery's id (first column of `switchboard deliveries`)")
    .option("--json", "print the raw payload as JSON")
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const answer = await clientFor(opts, io).call<RetryAnswer>("deliveries.retry", { deliveryId: id });
      output(io, opts, answer, () => retryText(answer));
    });
}
