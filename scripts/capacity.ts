/**
 * `npm run capacity`: the deployment's projected ceilings for 1, 4, 16 and 64 D1 databases, from
 * the measured storage load of a message and of a read and Cloudflare's published limits, and
 * what a message costs at Cloudflare's published prices, by billed unit, for a new session, an
 * existing one and a tool call with a model answering in 3 s (bench/capacity-model.ts;
 * docs/capacity.md explains the model and its limits), with the check of SPEC §21's bar on
 * usage recording (no D1 round trip of its own, at most 2 rows written per message).
 *
 *   npm run capacity                       the model, from bench/results/db-load.json
 *   npm run capacity -- --measure          measure first (bench/db-load.ts, 1 database), write the file, then the model
 *   npm run capacity -- --simulate         the model, then its check under wrangler dev with 4 databases
 *   Options: --turns N (20)  --retention-days N (none, as the product's
 *            default)  --statement-ms MS (published: 1)  --local-cost (the measured local cost)
 *            --file PATH (bench/results/db-load.json)
 *
 * The measurement and the simulation talk to 127.0.0.1 only. Exit code 1 when a check fails.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import {
  type Assumed,
  type CostedWorkload,
  costReport,
  type Input,
  type Measured,
  type ModelInputs,
  published,
  report,
  usageRollupCheck,
} from "../bench/capacity-model.ts";
import { SESSIONS, simulate } from "../bench/capacity-simulation.ts";
import {
  type DbLoadMeasurement,
  measureDbLoad,
  measurementOf,
  RESULT_FILE,
  writeMeasurement,
} from "../bench/db-load.ts";

const repo = path.resolve(import.meta.dirname, "..");
const log = (m: string) => process.stderr.write(`[capacity] ${m}\n`);

const { values } = parseArgs({
  options: {
    measure: { type: "boolean", default: false },
    simulate: { type: "boolean", default: false },
    turns: { type: "string", default: "20" },
    "retention-days": { type: "string" },
    "statement-ms": { type: "string" },
    "local-cost": { type: "boolean", default: false },
    file: { type: "string", default: RESULT_FILE },
  },
});

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

const turns = Number(values.turns);
if (!Number.isFinite(turns) || turns < 1) fail(`--turns takes a number of turns ≥ 1 (got ${values.turns})`);
const retentionDays = values["retention-days"] === undefined ? undefined : Number(values["retention-days"]);
if (retentionDays !== undefined && !(retentionDays > 0))
  fail(`--retention-days takes days > 0 (got ${values["retention-days"]})`);
const statementMs = values["statement-ms"] === undefined ? undefined : Number(values["statement-ms"]);
if (statementMs !== undefined && !(statementMs > 0))
  fail(`--statement-ms takes milliseconds > 0 (got ${values["statement-ms"]})`);

/** The model's measured inputs from a result file, each naming the run it comes from. */
function measuredOf(m: DbLoadMeasurement, file: string): Measured {
  const run = `${file} (${m.measuredAt.slice(0, 10)}, commit ${m.source.commit.slice(0, 7)}${
    m.source.changed ? " with uncommitted changes" : ""
  }, ${m.databases.length} D1 database${m.databases.length > 1 ? "s" : ""})`;
  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined)
      fail(`${file} has no ${what}: measure again (npm run capacity -- --measure, or npm run bench)`);
    return value;
  };
  const w = (id: keyof DbLoadMeasurement["workloads"]) => need(m.workloads[id], `workload (${id})`);
  const r = (id: keyof DbLoadMeasurement["reads"]) => need(m.reads[id], `read ${id}`);
  const input = (label: string, value: number, unit: string, what: string): Input => ({
    label,
    value,
    unit,
    source: "measured",
    from: `${run}: ${what}`,
  });
  const perDatabase = (read: { d1StatementsByBinding: Record<string, number> }) =>
    Math.max(...Object.values(read.d1StatementsByBinding));
  const burst = w("b");
  const spreadNew = w("spread-new");
  const spreadExisting = w("spread-existing");
  if (burst.cpuMsPerMessage === undefined) fail(`${file} has no CPU per message of the burst: measure again`);
  return {
    statementsBurst: input(
      "D1 statements per message, sustained burst to an existing session (b)",
      burst.d1StatementsPerMessage,
      "statements",
      burst.name,
    ),
    statementsExisting: input(
      "D1 statements per message, existing session, one at a time (b1)",
      w("b1").d1StatementsPerMessage,
      "statements",
      w("b1").name,
    ),
    statementsNew: input(
      "D1 statements per message to a new session (a)",
      w("a").d1StatementsPerMessage,
      "statements",
      w("a").name,
    ),
    statementsTool: input(
      "D1 statements per message whose turn makes one tool call (c)",
      w("c").d1StatementsPerMessage,
      "statements",
      w("c").name,
    ),
    listPerDatabase: input(
      "D1 statements per sessions.list, on each database",
      perDatabase(r("sessions.list")),
      "statements",
      r("sessions.list").name,
    ),
    runsListPerDatabase: input(
      "D1 statements per runs.list, on each database",
      perDatabase(r("runs.list")),
      "statements",
      r("runs.list").name,
    ),
    runsGet: input(
      "D1 statements per runs.get (one database)",
      r("runs.get").d1StatementsPerCall,
      "statements",
      "runs.get",
    ),
    doRequestsPerMessage: input(
      "Durable Object requests per message",
      burst.doRequestsPerMessage,
      "requests",
      `${burst.name} (stub calls and alarms)`,
    ),
    cpuMsPerMessage: input(
      "workerd CPU per message (Worker + actor + local D1 and DO SQLite)",
      burst.cpuMsPerMessage,
      "ms",
      `${burst.name}, the bench's polls taken out; an upper bound of the production figure`,
    ),
    bytesNewSession: input(
      "D1 bytes a new session stores with its first turn (B_new)",
      (spreadNew.storedBytesPerMessage * spreadNew.messages) / Math.max(1, spreadNew.sessionsCreated),
      "bytes",
      `${spreadNew.name}: growth of D1's size_after ÷ sessions created`,
    ),
    bytesPerTurn: input(
      "D1 bytes a further turn stores (B_turn)",
      spreadExisting.storedBytesPerMessage,
      "bytes",
      `${spreadExisting.name}, ${Math.round(spreadExisting.textBytesPerMessage ?? Number.NaN)} bytes of text and reply per turn`,
    ),
    localStatementMs: input(
      "Local D1 busy time per statement (wrangler dev, tmpfs)",
      m.localD1MsPerStatement,
      "ms",
      "every message workload: time with a D1 call waiting, ÷ statements",
    ),
  };
}

function readMeasurement(file: string): DbLoadMeasurement {
  const target = path.resolve(repo, file);
  if (!existsSync(target))
    fail(`${file} does not exist: run npm run capacity -- --measure (or npm run bench) to write it`);
  const m = JSON.parse(readFileSync(target, "utf8")) as DbLoadMeasurement;
  if (m.version !== 1) fail(`${file} is of version ${m.version}; this model reads version 1`);
  return m;
}

let file = values.file;
if (values.measure) {
  log(
    "measuring the storage load (bench/db-load.ts: 1 database, 10 messages one at a time, a burst of 60, 100 sessions)",
  );
  const result = await measureDbLoad(repo, { log });
  const measurement = measurementOf(result, repo);
  file = path.relative(repo, writeMeasurement(repo, measurement));
  log(`wrote ${file}`);
  for (const p of result.problems) log(`problem: ${p}`);
}
const measurement = readMeasurement(file);
if (measurement.source.changed || measurement.problems.length)
  log(
    `note: ${file} ${measurement.source.changed ? "was measured with uncommitted changes to the gateway" : ""}${
      measurement.problems.length
        ? ` reports ${measurement.problems.length} problem(s): ${measurement.problems.join("; ")}`
        : ""
    }`,
  );
const measured = measuredOf(measurement, file);
const assumed: Assumed = {
  turnsPerSession: {
    label: "Turns per session (T)",
    value: turns,
    unit: "turns",
    source: "assumed",
    from: values.turns === "20" ? "a chat of 20 exchanges; --turns N to change" : "--turns",
  },
  ...(retentionDays !== undefined
    ? {
        retentionDays: {
          label: "Days of turns kept (session.retention.days, R)",
          value: retentionDays,
          unit: "days",
          source: "assumed",
          from: "--retention-days",
        },
      }
    : {}),
};
const pub = published();
const inputs: ModelInputs = {
  published: pub,
  measured,
  assumed,
  statementMs:
    statementMs !== undefined
      ? { ...pub.d1StatementMs, value: statementMs, source: "assumed", from: "--statement-ms" }
      : values["local-cost"]
        ? { ...measured.localStatementMs, label: pub.d1StatementMs.label }
        : pub.d1StatementMs,
};
console.log(report(inputs).join("\n"));

/** The workloads the cost table prices: the 3 s model's three, and the instant existing-session one. */
const COSTED: Array<{ id: keyof DbLoadMeasurement["workloads"]; label: string; modelCalls: number }> = [
  { id: "a-3s", label: "new session (a-3s)", modelCalls: 1 },
  { id: "b1-3s", label: "existing session (b1-3s)", modelCalls: 1 },
  { id: "c-3s", label: "one tool call (c-3s)", modelCalls: 2 },
  { id: "b1", label: "existing session, instant model (b1)", modelCalls: 1 },
];

function costedOf(m: DbLoadMeasurement): CostedWorkload[] {
  return COSTED.flatMap(({ id, label, modelCalls }) => {
    const w = m.workloads[id];
    const b = w?.billing;
    if (!w || !b) return [];
    return [
      {
        label,
        modelMs: w.modelMs ?? 0,
        modelCalls,
        searchIndexRows: w.searchIndexRowsPerMessage,
        usageRollup: w.usageRollup && {
          rowsWritten: w.usageRollup.rowsWritten,
          roundTrips: w.usageRollup.roundTrips,
        },
        units: {
          workerRequests: b.workerRequests,
          workerCpuMs: b.cpuMs ?? w.cpuMsPerMessage ?? 0,
          doRequests: b.doRequests,
          doGbSeconds: b.doGbSeconds,
          doRowsWritten: b.doRowsWritten,
          doRowsRead: b.doRowsRead,
          d1RowsWritten: b.d1RowsWritten,
          d1RowsRead: b.d1RowsRead,
        },
      },
    ];
  });
}

const costed = costedOf(measurement);
if (costed.length) {
  const run = `${file} (${measurement.measuredAt.slice(0, 10)}, commit ${measurement.source.commit.slice(0, 7)}${
    measurement.source.changed ? " with uncommitted changes" : ""
  })${
    Object.values(measurement.workloads).some((w) => w?.attribution === "session")
      ? "; each workload's units are its sessions', a conversation's deferred delivery-outcome write included"
      : ""
  }; Workers CPU is workerd's over the message (Worker, actors, local D1 and SQLite, the local request path): an upper bound`;
  console.log(
    [
      "",
      ...costReport(costed, run, {
        d1BytesPerMessage: measured.bytesPerTurn.value,
        from: measured.bytesPerTurn.from,
      }),
    ].join("\n"),
  );
  const usage = usageRollupCheck(costed);
  if (usage) {
    console.log(`\n${usage.pass ? "PASS" : "FAIL"}  ${usage.line}`);
    if (!usage.pass) process.exitCode = 1;
  } else
    log(
      `${file} has no usage rollup counts (measured before they were counted): measure again for its check`,
    );
} else
  log(
    `${file} has no billable units per message (measured before they were counted): measure again for the cost table`,
  );

if (values.simulate) {
  console.log("");
  log(`simulating: 4 databases, ${SESSIONS} sessions, under wrangler dev on 127.0.0.1`);
  const sim = await simulate(repo, measured, log);
  console.log(sim.notes.join("\n"));
  console.log("");
  for (const c of sim.checks) console.log(`${c.pass ? "PASS" : "FAIL"}  ${c.line}`);
  const failed = sim.checks.filter((c) => !c.pass).length;
  console.log(
    failed ? `\n${failed} of ${sim.checks.length} checks failed` : `\nall ${sim.checks.length} checks passed`,
  );
  process.exit(failed || process.exitCode === 1 ? 1 : 0);
}
