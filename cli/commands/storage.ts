/**
 * `storage rebalance`: moves the sessions whose D1 database changed with `storage.d1` (SPEC
 * §19) by calling `storage.rebalance` until it is done, one line of progress per call, then
 * prints its verify step; `storage verify` runs that step alone (`storage.verify`). Each call
 * is a bounded step that the gateway can resume: a run that stops (Ctrl-C, a lost connection)
 * is finished by running the command again.
 */
import type { Command } from "commander";
import { CliError, EXIT } from "../client.ts";
import { type CliIo, clientFor, type GlobalOptions, positiveInt, print, printJson } from "../context.ts";

interface DatabaseProgress {
  scanned: number;
  moved: number;
  left: number;
  leftToMove: number;
}

interface VerifyReport {
  ok: boolean;
  to: string[];
  databases: string[];
  rows: Record<string, { found: number; atStart?: number }>;
  problems: Array<{ problem: string; message: string }>;
  problemCount: number;
  notes: string[];
  recorded: boolean;
}

export interface RebalanceProgress {
  from: string[];
  to: string[];
  dryRun: boolean;
  databases: Record<string, DatabaseProgress>;
  rows: Record<string, number>;
  remaining: { sessions: number; toMove: number };
  conflicts: Array<{ table: string; key: string; database: string; target: string }>;
  done: boolean;
  cursor?: string;
  verify?: VerifyReport;
}

/** A verify or rebalance step reads every database: more than the default 30 s is fine. */
const CALL_TIMEOUT_MS = 300_000;

const list = (names: string[]) => `[${names.join(", ")}]`;

/** One call's line: what each database had looked at and moved, and what is left. */
export function progressLine(p: RebalanceProgress): string {
  const verb = p.dryRun ? "would move" : "moved";
  const parts = Object.entries(p.databases).map(
    ([name, d]) => `${name}: scanned ${d.scanned}, ${verb} ${d.moved}`,
  );
  const left = p.done ? "done" : `left ${p.remaining.sessions} (~${p.remaining.toMove} to move)`;
  return `${parts.length ? parts.join("; ") : "nothing to move"} — ${left}`;
}

export function verifyText(v: VerifyReport): string {
  const out = [
    v.ok
      ? `verified: every row is where ${list(v.to)} places it (${v.databases.join(", ")}); the gateway serves with it`
      : `verify found ${v.problemCount} problem(s); the gateway keeps refusing until they are fixed:`,
  ];
  for (const problem of v.problems) out.push(`  ${problem.problem}: ${problem.message}`);
  if (v.problemCount > v.problems.length) out.push(`  … and ${v.problemCount - v.problems.length} more`);
  for (const note of v.notes) out.push(`note: ${note}`);
  return out.join("\n");
}

function failed(v: VerifyReport): void {
  if (!v.ok) throw new CliError(EXIT.api, `verify found ${v.problemCount} problem(s)`);
}

interface RebalanceOptions extends GlobalOptions {
  batch?: number;
  dryRun?: boolean;
}

export function registerStorageCommands(program: Command, io: CliIo): void {
  const storage = program
    .command("storage")
    .description("the D1 databases sessions are spread over (storage.d1)");

  storage
    .command("rebalance")
    .description(
      "move the sessions whose database changed with storage.d1, then verify (RPC storage.rebalance until done)",
    )
    .option("--batch <n>", "sessions looked at per call (at most 1000)", positiveInt)
    .option("--dry-run", "count what would move, change nothing")
    .option("--json", "print each call's payload as one line of JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<RebalanceOptions>();
      const client = clientFor(opts, io);
      let cursor: string | undefined;
      let moved = 0;
      for (;;) {
        const p = await client.call<RebalanceProgress>(
          "storage.rebalance",
          {
            ...(opts.batch ? { limit: opts.batch } : {}),
            ...(cursor ? { cursor } : {}),
            ...(opts.dryRun ? { dryRun: true } : {}),
          },
          { timeoutMs: CALL_TIMEOUT_MS },
        );
        if (opts.json) printJson(io, p);
        else {
          if (cursor === undefined)
            print(io, `rebalance ${list(p.from)} → ${list(p.to)}${p.dryRun ? " (dry run)" : ""}`);
          print(io, progressLine(p));
          for (const c of p.conflicts)
            print(
              io,
              `conflict: a ${c.table} row of ${c.key} is refused by ${c.target}; left in ${c.database}`,
            );
        }
        moved += Object.values(p.databases).reduce((n, d) => n + d.moved, 0);
        cursor = p.cursor;
        if (!p.done) continue;
        if (!opts.json) {
          if (p.dryRun) print(io, `${moved} session(s) would move; nothing was changed`);
          else if (p.verify) print(io, verifyText(p.verify));
        }
        if (p.verify) failed(p.verify);
        return;
      }
    });

  storage
    .command("verify")
    .description(
      "check every row is in the database storage.d1 places it in; if so, serve with it (RPC storage.verify)",
    )
    .option("--json", "print the raw payload as JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const v = await clientFor(opts, io).call<VerifyReport>(
        "storage.verify",
        {},
        { timeoutMs: CALL_TIMEOUT_MS },
      );
      if (opts.json) printJson(io, v);
      else print(io, verifyText(v));
      failed(v);
    });
}
