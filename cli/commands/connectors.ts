/**
 * `connectors setup <channel> --url <base>` (RPC `connectors.setup`: Telegram's setWebhook,
 * Discord's command registration, what to paste for Slack and WhatsApp), `connectors check`
 * (RPC `connectors.check`: each platform's identity endpoint), and `pairing list|approve|revoke`
 * (RPC `pairing.*`): approving the senders a connector does not know yet.
 */
import type { Command } from "commander";
import { CliError, EXIT } from "../client.ts";
import { type CliIo, clientFor, type GlobalOptions, output, timeStyle } from "../context.ts";
import { table, when } from "../format.ts";

interface Report {
  channel: string;
  type: string;
  accountId: string;
  ok: boolean;
  detail: string;
}

interface Reports {
  ok: boolean;
  reports: Report[];
}

export function reportsText(answer: Reports): string {
  if (answer.reports.length === 0) return "no platform connectors are configured";
  return answer.reports
    .map((r) => {
      const [first = "", ...rest] = r.detail.split("\n");
      const head = `${r.ok ? "ok  " : "FAIL"} ${r.channel} (${r.type}${r.accountId === "default" ? "" : `, account ${r.accountId}`}): ${first}`;
      return [head, ...rest.map((l) => `     ${l}`)].join("\n");
    })
    .join("\n");
}

/** Exit 1 when a platform said no, after the reports are printed. */
function failedReports(answer: Reports): void {
  const failed = answer.reports.filter((r) => !r.ok).length;
  if (failed) throw new CliError(EXIT.api, `${failed} of ${answer.reports.length} failed`);
}

interface Pending {
  channel: string;
  code: string;
  accountId: string;
  peerId: string;
  createdAt: number;
  expiresAt: number;
}

interface Approved {
  channel: string;
  peerId: string;
  approvedAt: number;
}

export function registerConnectorCommands(program: Command, io: CliIo): void {
  const connectors = program
    .command("connectors")
    .description("chat platform connectors: set them up and check them");

  connectors
    .command("setup")
    .description(
      "register the webhook where the platform has an API for it, or print what to paste where (RPC connectors.setup)",
    )
    .argument("<channel>", "the connector's channel (connectors.<channel> in the config)")
    .argument(
      "[base]",
      "the public base URL the platform posts to (default: the gateway's --url, which is that URL for a deployed Worker)",
    )
    .option("--json", "print the raw payload as JSON")
    .addHelpText(
      "after",
      "\nThe gateway's --url (or SWITCHBOARD_URL) is also the public base URL unless [base] is given:\n  switchboard connectors setup telegram --url https://switchboard.example.workers.dev\n  switchboard --url http://127.0.0.1:8787 connectors setup telegram https://my-tunnel.example.com",
    )
    .action(async (channel: string, base: string | undefined, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const url = base ?? opts.url ?? io.env.SWITCHBOARD_URL;
      if (!url) throw new CliError(EXIT.usage, "no public base URL: pass --url <base> (or [base])");
      const answer = await clientFor(opts, io).call<Reports>("connectors.setup", { channel, url });
      output(io, opts, answer, () => reportsText(answer));
      failedReports(answer);
    });

  connectors
    .command("check")
    .description("ask each platform who the bot is (RPC connectors.check)")
    .argument("[channel]", "only this connector")
    .option("--json", "print the raw payload as JSON")
    .action(async (channel: string | undefined, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const answer = await clientFor(opts, io).call<Reports>("connectors.check", channel ? { channel } : {});
      output(io, opts, answer, () => reportsText(answer));
      failedReports(answer);
    });

  const pairing = program
    .command("pairing")
    .description("senders waiting for approval, and the approved ones");

  pairing
    .command("list")
    .description("pending pairing codes and approved senders (RPC pairing.list)")
    .option("--channel <channel>", "only this connector")
    .option("--json", "print the raw payload as JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions & { channel?: string }>();
      const answer = await clientFor(opts, io).call<{ pending: Pending[]; approved: Approved[] }>(
        "pairing.list",
        opts.channel ? { channel: opts.channel } : {},
      );
      output(io, opts, answer, () => {
        const style = timeStyle(opts, io);
        const pending = answer.pending.length
          ? table(answer.pending, [
              { header: "CHANNEL", value: (p) => p.channel },
              { header: "CODE", value: (p) => p.code },
              { header: "SENDER", value: (p) => p.peerId },
              { header: "ASKED", value: (p) => when(p.createdAt, style) },
              { header: "EXPIRES", value: (p) => when(p.expiresAt, style) },
            ])
          : "no pending codes";
        const approved = answer.approved.length
          ? table(answer.approved, [
              { header: "CHANNEL", value: (a) => a.channel },
              { header: "SENDER", value: (a) => a.peerId },
              { header: "APPROVED", value: (a) => when(a.approvedAt, style) },
            ])
          : "no approved senders";
        return `${pending}\n\n${approved}`;
      });
    });

  pairing
    .command("approve")
    .description("approve a sender by the code its pairing notice showed (RPC pairing.approve)")
    .argument("<channel>", "the connector's channel")
    .argument("<code>", "the 8-character code")
    .option("--json", "print the raw payload as JSON")
    .action(async (channel: string, code: string, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const answer = await clientFor(opts, io).call<{ channel: string; peerId: string }>("pairing.approve", {
        channel,
        code,
      });
      output(
        io,
        opts,
        answer,
        () => `approved ${answer.peerId} on ${answer.channel}: their next message runs`,
      );
    });

  pairing
    .command("revoke")
    .description("forget an approved sender (RPC pairing.revoke)")
    .argument("<channel>", "the connector's channel")
    .argument("<peerId>", "the sender's id, as pairing list shows it")
    .option("--json", "print the raw payload as JSON")
    .action(async (channel: string, peerId: string, _opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const answer = await clientFor(opts, io).call<{ revoked: boolean }>("pairing.revoke", {
        channel,
        peerId,
      });
      output(io, opts, answer, () =>
        answer.revoked ? `revoked ${peerId} on ${channel}` : `${peerId} was not approved on ${channel}`,
      );
    });
}
