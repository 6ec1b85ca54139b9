/**
 * `npm run soak [-- --messages N --sessions M --kills K --seed S --d1 D --keep-state]`: the fault-injection soak
 * (scripts/lib/soak.ts) with the defaults of the bar (2,000 messages, 50 sessions, 20 kills),
 * everything on 127.0.0.1; `--d1 4` spreads the sessions over four D1 databases (storage.d1).
 * Progress goes to stderr, the table to stdout; exit code 1 on FAIL.
 */
import { parseArgs } from "node:util";
import { runSoak } from "./lib/soak.ts";

const { values } = parseArgs({
  options: {
    messages: { type: "string", default: "2000" },
    sessions: { type: "string", default: "50" },
    kills: { type: "string", default: "20" },
    seed: { type: "string" },
    // Spread the sessions over this many D1 databases (DB, DB_1, …; storage.d1).
    d1: { type: "string", default: "1" },
    "keep-state": { type: "boolean", default: false },
  },
  strict: true,
});

function positive(name: string, raw: string | undefined, min: number): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    process.stderr.write(`--${name} must be an integer ≥ ${min} (got ${raw})\n`);
    process.exit(2);
  }
  return n;
}

const messages = positive("messages", values.messages, 1);
const sessions = positive("sessions", values.sessions, 2);
const kills = positive("kills", values.kills, 0);
const databases = positive("d1", values.d1, 1);
const d1 = Array.from({ length: databases }, (_, i) => (i === 0 ? "DB" : `DB_${i}`));
const seed =
  values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : positive("seed", values.seed, 0);
process.stderr.write(`soak seed ${seed} (repeat with --seed ${seed})\n`);

// The bar is fixed: a smaller run can be made, but it does not pass the soak's bar.
const report = await runSoak({
  messages,
  sessions,
  kills,
  seed,
  d1,
  minMessages: 2_000,
  minKills: 20,
  keepStateOnFail: values["keep-state"],
});
process.stdout.write(`${report.markdown}\n`);
process.exit(report.pass ? 0 : 1);
