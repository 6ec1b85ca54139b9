/**
 * The check of the capacity model (`npm run capacity -- --simulate`, docs/capacity.md): the
 * gateway under `wrangler dev` with its sessions spread over 4 D1 databases, behind the counting
 * entry of bench/db-load.ts, takes many distinct sessions (SESSIONS new ones, then one more
 * message each, 8 acks in flight) besides the one-at-a-time, burst and tool-call workloads and
 * the reads. It passes when
 *  (a) each database receives 25% ± 5% of the statements of the many-session workloads, and
 *  (b) the statements per message (and per read, per database) are the model's inputs, within
 *      TOLERANCE; the burst's, whose coalescing depends on timing (its runs share batches only
 *      while they queue), at most the one-at-a-time count the model takes as its bound.
 * Everything on 127.0.0.1; every load loop is bounded in count (below) and in time (db-load's caps).
 */
import type { Input, Measured } from "./capacity-model.ts";
import { FOUR_DATABASES, type Load, measureDbLoad, type Workload } from "./db-load.ts";

/** Distinct sessions of the many-session workloads (100 per database). */
export const SESSIONS = 400;
const ISOLATED = 5;
const BURST = 30;
const SHARE = 0.25;
const SHARE_TOLERANCE = 0.05;
const TOLERANCE = 0.05;

export interface Check {
  pass: boolean;
  line: string;
}

export interface SimulationResult {
  checks: Check[];
  /** What the run showed besides the checks (shares per workload, stored bytes, problems). */
  notes: string[];
}

const pct = (v: number) => `${(100 * v).toFixed(1)}%`;
const num = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(2));

function close(name: string, simulated: number, model: Input, tolerance: number): Check {
  const pass = Math.abs(simulated - model.value) <= tolerance * model.value;
  return {
    pass,
    line: `(b) ${name}: ${num(simulated)} simulated, ${num(model.value)} the model's input (± ${tolerance * 100}%)`,
  };
}

/** Each binding's share of the statements of `loads` together. */
export function sharesOf(loads: Load[]): Map<string, number> {
  const statements = new Map<string, number>();
  let total = 0;
  for (const l of loads)
    for (const [name, b] of Object.entries(l.byBinding)) {
      statements.set(name, (statements.get(name) ?? 0) + b.statements);
      total += b.statements;
    }
  return new Map([...statements].sort(([a], [b]) => a.localeCompare(b)).map(([n, s]) => [n, s / total]));
}

export async function simulate(
  repo: string,
  model: Measured,
  log: (m: string) => void,
): Promise<SimulationResult> {
  const started = performance.now();
  const result = await measureDbLoad(repo, {
    d1: FOUR_DATABASES,
    isolated: ISOLATED,
    burst: BURST,
    spread: SESSIONS,
    log,
  });
  const seconds = (performance.now() - started) / 1000;
  const byId = new Map<Workload["id"], Workload>(result.workloads.map((w) => [w.id, w]));
  const checks: Check[] = [];
  const notes: string[] = [
    `Simulation: the gateway under wrangler dev with storage.d1 = [${result.databases.join(", ")}], ${SESSIONS} sessions (a new one each, then one more message each), ${ISOLATED} messages one at a time per workload, a burst of ${BURST}; ${seconds.toFixed(0)} s.`,
  ];

  // (a) The many-session workloads: each database's share of their statements.
  const spread = [byId.get("spread-new"), byId.get("spread-existing")].filter((w) => w !== undefined);
  const shares = sharesOf(spread.map((w) => w.load));
  for (const name of result.databases) {
    const share = shares.get(name) ?? 0;
    checks.push({
      pass: Math.abs(share - SHARE) <= SHARE_TOLERANCE,
      line: `(a) ${name} received ${pct(share)} of the statements of the ${SESSIONS}-session workloads (${pct(SHARE)} ± ${pct(SHARE_TOLERANCE)})`,
    });
  }
  notes.push(
    `Sessions by database: ${Object.entries(result.sessionsByBinding)
      .map(([n, v]) => `${n} ${v}`)
      .join(", ")}.`,
  );

  // (b) Statements per message: the simulation's against the model's inputs.
  const perMessage = (id: Workload["id"]) => {
    const w = byId.get(id);
    return w ? w.load.d1Statements / w.messages : Number.NaN;
  };
  checks.push(
    close("new session, one at a time (a)", perMessage("a"), model.statementsNew, TOLERANCE),
    close(
      `new session, ${SESSIONS} sessions at once`,
      perMessage("spread-new"),
      model.statementsNew,
      TOLERANCE,
    ),
    close("existing session, one at a time (b1)", perMessage("b1"), model.statementsExisting, TOLERANCE),
    close(
      `existing session, ${SESSIONS} sessions at once`,
      perMessage("spread-existing"),
      model.statementsExisting,
      TOLERANCE,
    ),
    // A burst's runs share batches only while they queue, so its count moves with timing: it
    // is checked against the bound the model takes, one at a time (b1), which it never exceeds.
    {
      pass: perMessage("b") <= model.statementsExisting.value * (1 + TOLERANCE),
      line: `(b) burst of ${BURST} to an existing session (b): ${num(perMessage("b"))} simulated, at most ${num(model.statementsExisting.value)} (one at a time, the model's input)`,
    },
    close("one tool call (c)", perMessage("c"), model.statementsTool, TOLERANCE),
  );
  // Reads: statements on each database a listing reads, and a runs.get's.
  const read = (id: "sessions.list" | "runs.list" | "runs.get") => result.reads.find((r) => r.id === id);
  const list = read("sessions.list");
  if (list) {
    const each = result.databases.map((n) => (list.load.byBinding[n]?.statements ?? 0) / list.calls);
    checks.push({
      pass: each.every(
        (v) => Math.abs(v - model.listPerDatabase.value) <= TOLERANCE * model.listPerDatabase.value,
      ),
      line: `(b) sessions.list: ${each.map(num).join(", ")} statements on each database, ${num(model.listPerDatabase.value)} the model's input`,
    });
  }
  const get = read("runs.get");
  if (get)
    checks.push(
      close("runs.get, statements per call", get.load.d1Statements / get.calls, model.runsGet, TOLERANCE),
    );

  const spreadNew = byId.get("spread-new");
  const spreadExisting = byId.get("spread-existing");
  if (spreadNew && spreadExisting && spreadNew.sessionsCreated > 0)
    notes.push(
      `Stored with 4 databases: ${num(spreadNew.storedBytes / spreadNew.sessionsCreated)} bytes per new session (model ${num(model.bytesNewSession.value)}), ${num(spreadExisting.storedBytes / spreadExisting.messages)} bytes per turn (model ${num(model.bytesPerTurn.value)}).`,
    );
  for (const w of result.workloads) {
    const s = sharesOf([w.load]);
    notes.push(
      `(${w.id}) ${w.name}: ${num(w.load.d1Statements / w.messages)} statements/msg; by database ${[...s]
        .map(([n, v]) => `${n} ${pct(v)}`)
        .join(", ")}`,
    );
  }
  if (result.problems.length) notes.push("Problems seen:", ...result.problems.map((p) => `- ${p}`));
  return { checks, notes };
}
