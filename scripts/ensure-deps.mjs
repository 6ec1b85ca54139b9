// Installs dependencies when they are missing or older than package-lock.json, so that
// `npm test`, `npm run dev` and `npm run bench` work on a fresh clone. Runs on any Node ≥ 18
// (the system Node may be older than the one the project brings in node_modules).
import { execSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";

const stamp = "node_modules/.package-lock.json";
const needed = ["node_modules/.bin/node", "node_modules/.bin/wrangler", "node_modules/.bin/vitest"];
const stale =
  !existsSync(stamp) ||
  needed.some((p) => !existsSync(p)) ||
  statSync("package-lock.json").mtimeMs > statSync(stamp).mtimeMs + 1000;

if (stale) {
  // `npm install` rather than `npm ci` even in CI: it follows package-lock.json all the same, and
  // `npm ci` refuses this lock because biome's optional per-platform binaries for other platforms
  // are not all resolvable from the registry this project installs from.
  const cmd = "npm install --no-audit --no-fund";
  console.log(`[switchboard] installing dependencies: ${cmd}`);
  execSync(cmd, { stdio: "inherit" });
}
