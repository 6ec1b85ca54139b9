/**
 * The `switchboard` command: an operator's client for a gateway's RPC API (`POST /rpc/:method`
 * with the operator token). `run` builds the commander program over an injected `CliIo`,
 * parses, and returns the exit code (README "CLI"): every failure is one line on stderr,
 * never a stack trace. `nodeIo` is the real process.
 */
import { Command, CommanderError } from "commander";
import { CliError, EXIT } from "./client.ts";
import { registerConnectorCommands } from "./commands/connectors.ts";
import { registerDeliveryCommands } from "./commands/deliveries.ts";
import { registerGatewayCommands } from "./commands/gateway.ts";
import { registerSearchCommand } from "./commands/search.ts";
import { registerSendCommand } from "./commands/send.ts";
import { registerSessionCommands } from "./commands/sessions.ts";
import { registerStorageCommands } from "./commands/storage.ts";
import { registerTailCommand } from "./commands/tail.ts";
import { registerUsageCommand } from "./commands/usage.ts";
import type { CliIo } from "./context.ts";
import { oneLine, terminalSafe } from "./format.ts";

export function buildProgram(io: CliIo, version: string): Command {
  const program = new Command("switchboard")
    .description("Operate a Switchboard gateway over its RPC API.")
    .version(version, "-V, --version", "print the CLI's version")
    .option("--url <url>", "gateway URL (default: $SWITCHBOARD_URL)")
    .option("--token <token>", "operator token, GATEWAY_TOKEN (default: $SWITCHBOARD_TOKEN)")
    .option("--iso", "print times as ISO timestamps instead of relative ones")
    .addHelpText(
      "after",
      "\nExit codes: 0 ok, 1 gateway error, 2 usage, 3 auth, 4 not found, 5 cannot connect, 6 unavailable.",
    )
    // Set before the subcommands are added: they inherit both, so their errors map the same way.
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout(text),
      writeErr: (text) => io.stderr(text),
      // Commander's own errors ("error: unknown option '--x'") in the CLI's one-line form.
      outputError: (text, write) => write(`switchboard: ${text.replace(/^error: /, "")}`),
    });
  registerGatewayCommands(program, io);
  registerSessionCommands(program, io);
  registerSearchCommand(program, io);
  registerUsageCommand(program, io);
  registerSendCommand(program, io);
  registerTailCommand(program, io);
  registerDeliveryCommands(program, io);
  registerConnectorCommands(program, io);
  registerStorageCommands(program, io);
  return program;
}

/** Runs the CLI on `argv` (without node and script) and returns the exit code. */
export async function run(argv: string[], io: CliIo, version = "0.0.0"): Promise<number> {
  const program = buildProgram(io, version);
  try {
    await program.parseAsync(argv, { from: "user" });
    return EXIT.ok;
  } catch (error) {
    // Commander already printed its message (or the help/version it was asked for).
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (error instanceof CliError) {
      io.stderr(`switchboard: ${terminalSafe(oneLine(error.message))}\n`);
      return error.exitCode;
    }
    io.stderr(
      `switchboard: ${terminalSafe(oneLine(error instanceof Error ? error.message : String(error)))}\n`,
    );
    return EXIT.api;
  }
}

/** The real process: environment, stdout/stderr, global fetch, the clock, SIGINT. */
export function nodeIo(): CliIo {
  return {
    env: process.env,
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    fetch: globalThis.fetch,
    now: () => Date.now(),
    sleep: (ms, signal) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms);
        function done() {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          resolve();
        }
        signal.addEventListener("abort", done, { once: true });
      }),
    onInterrupt(handler) {
      process.on("SIGINT", handler);
      return () => process.off("SIGINT", handler);
    },
  };
}
