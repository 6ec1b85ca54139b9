#!/usr/bin/env node
/**
 * The `switchboard` executable (package.json `bin`): runs the CLI in cli/ on this process and
 * exits with its code. Needs Node 22.18+ (TypeScript type stripping), which the project brings
 * as its `node` dev dependency, first on PATH under npm and npx.
 */
import { readFileSync } from "node:fs";
import { nodeIo, run } from "../cli/main.ts";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  version: string;
};
// A reader that goes away (`switchboard tail … | head -3`) ends the CLI quietly, like any
// Unix filter, instead of an unhandled EPIPE with a stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(0);
});
process.exitCode = await run(process.argv.slice(2), nodeIo(), pkg.version);
