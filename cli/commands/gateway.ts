/**
 * Commands about the gateway as a whole: `status` (RPC `status`), `jobs` (`cron.list`) and
 * `audit` (`security.audit`).
 */
import type { Command } from "commander";
import { type CliIo, clientFor, type GlobalOptions, output, timeStyle } from "../context.ts";
import { keyValues, type TimeStyle, table, when } from "../format.ts";

interface Job {
  id: string;
  schedule: string;
  timezone: string;
  agentId: string;
  isolated: boolean;
  deliver?: { channel: string; to: string };
  sessionKey: string;
  nextRunAt: number | null;
  lastRun: {
    scheduledFor: number;
    runId: string;
    late?: boolean;
    skipped?: string;
    status?: string;
    error?: string;
  } | null;
}

interface TaskRun {
  at: number;
  durationMs: number;
  worked: boolean;
  [count: string]: unknown;
}

interface StatusPayload {
  version: string;
  now: number;
  config: { valid: boolean; problems?: string[] };
  defaultAgentId?: string;
  defaultModel?: string;
  agents?: string[];
  connectors?: Array<{
    channel: string;
    type?: string;
    deliverUrl?: boolean;
    secretSet?: boolean;
    accounts?: Array<{ accountId: string; secretsSet: boolean }>;
  }>;
  access?: { refused?: Record<string, Record<string, number>>; pendingPairingCodes?: number };
  queue?: { mode: string; cap?: number };
  maintenance?: Record<string, { lastRun: TaskRun; lastWork?: TaskRun }>;
  jobs?: Job[];
}

interface AuditPayload {
  ok: boolean;
  summary: Record<string, number>;
  secrets: Array<{ name: string; purpose: string; set: boolean; required: boolean }>;
  endpoints: Array<{ method: string; path: string; auth: string; enabled: boolean; reason?: string }>;
  warnings: Array<{ id: string; severity: string; setting: string; message: string }>;
}

/** The counts a task run reported (`closed=1 deleted=3`), without its bookkeeping fields. */
function taskCounts(run: TaskRun): string {
  const counts = Object.entries(run).filter(
    ([k, v]) => !["at", "durationMs", "worked"].includes(k) && v !== undefined,
  );
  return counts.map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : String(v)}`).join(" ");
}

function lastRunText(job: Job, style: TimeStyle): string {
  const last = job.lastRun;
  if (!last) return "-";
  return when(last.scheduledFor, style);
}

function lastStatusText(job: Job): string {
  const last = job.lastRun;
  if (!last) return "-";
  if (last.skipped) return `skipped: ${last.skipped}`;
  const status = last.status ?? "queued";
  return `${status}${last.late ? " (late)" : ""}${last.error ? `: ${last.error}` : ""}`;
}

/** Refused messages per channel and reason, and codes waiting for approval. */
function accessText(access: StatusPayload["access"]): string | undefined {
  if (!access) return undefined;
  const refused = Object.entries(access.refused ?? {}).map(
    ([channel, reasons]) =>
      `${channel}: ${Object.entries(reasons)
        .map(([reason, n]) => `${n} ${reason}`)
        .join(", ")}`,
  );
  const pending = access.pendingPairingCodes ?? 0;
  return `${refused.length ? `refused ${refused.join("; ")}` : "nothing refused"}${pending ? `; ${pending} pairing code${pending === 1 ? "" : "s"} waiting (switchboard pairing list)` : ""}`;
}

export function jobsTable(jobs: Job[], style: TimeStyle): string {
  if (jobs.length === 0) return "no scheduled jobs (cron.jobs is empty)";
  return table(jobs, [
    { header: "ID", value: (j) => j.id, max: 32 },
    { header: "SCHEDULE", value: (j) => j.schedule },
    { header: "TZ", value: (j) => j.timezone },
    { header: "AGENT", value: (j) => j.agentId },
    { header: "DELIVER", value: (j) => (j.deliver ? `${j.deliver.channel}:${j.deliver.to}` : "-"), max: 32 },
    { header: "NEXT RUN", value: (j) => when(j.nextRunAt, style) },
    { header: "LAST RUN", value: (j) => lastRunText(j, style) },
    { header: "LAST STATUS", value: lastStatusText, max: 60 },
  ]);
}

export function statusText(p: StatusPayload, url: string, style: TimeStyle): string {
  const head: Array<[string, string | undefined]> = [
    ["gateway", url],
    ["version", p.version],
    ["config", p.config.valid ? "valid" : `INVALID (${p.config.problems?.length ?? 0} problems)`],
  ];
  if (!p.config.valid) {
    return [keyValues(head), "", ...(p.config.problems ?? []).map((problem) => `  - ${problem}`)].join("\n");
  }
  const agents = p.agents?.length ? p.agents : [p.defaultAgentId ?? "main"];
  head.push(
    ["agents", agents.map((a) => (a === p.defaultAgentId ? `${a} (default)` : a)).join(", ")],
    ["model", p.defaultModel],
    [
      "queue",
      p.queue ? `${p.queue.mode}${p.queue.cap !== undefined ? `, cap ${p.queue.cap}` : ""}` : undefined,
    ],
    [
      "connectors",
      p.connectors?.length
        ? p.connectors
            .map((c) =>
              c.type && c.type !== "webhook"
                ? `${c.channel} (${c.type}, ${c.accounts?.every((a) => a.secretsSet) ? "secrets set" : "SECRETS MISSING"})`
                : `${c.channel} (${c.deliverUrl ? "deliverUrl set" : "no deliverUrl"}, ${c.secretSet ? "secret set" : "SECRET MISSING"})`,
            )
            .join(", ")
        : "none",
    ],
    ["jobs", `${p.jobs?.length ?? 0}${p.jobs?.length ? " (switchboard jobs)" : ""}`],
    ["access", accessText(p.access)],
  );
  const out = [keyValues(head)];
  const tasks = Object.entries(p.maintenance ?? {});
  out.push(
    "",
    tasks.length
      ? table(tasks, [
          { header: "MAINTENANCE", value: ([task]) => task },
          { header: "LAST RUN", value: ([, t]) => when(t.lastRun.at, style) },
          { header: "TOOK", value: ([, t]) => `${t.lastRun.durationMs}ms`, align: "right" },
          { header: "LAST WORK", value: ([, t]) => (t.lastWork ? when(t.lastWork.at, style) : "-") },
          { header: "DID", value: ([, t]) => (t.lastWork ? taskCounts(t.lastWork) : "-"), max: 80 },
        ])
      : "maintenance  has not run yet (the cron trigger runs it every minute)",
  );
  return out.join("\n");
}

export function auditText(p: AuditPayload): string {
  const summary = Object.entries(p.summary)
    .map(([severity, n]) => `${n} ${severity}`)
    .join(", ");
  const out = [`audit: ${p.ok ? "ok" : "NOT OK (high-severity warnings)"} — ${summary}`, ""];
  out.push(
    p.warnings.length
      ? table(p.warnings, [
          { header: "SEVERITY", value: (w) => w.severity },
          { header: "SETTING", value: (w) => w.setting, max: 48 },
          { header: "WHAT TO CHANGE", value: (w) => w.message },
        ])
      : "no warnings",
    "",
    table(p.secrets, [
      { header: "SECRET", value: (s) => s.name },
      { header: "SET", value: (s) => (s.set ? "yes" : s.required ? "MISSING" : "no") },
      { header: "REQUIRED", value: (s) => (s.required ? "yes" : "no") },
      { header: "PURPOSE", value: (s) => s.purpose, max: 80 },
    ]),
    "",
    table(p.endpoints, [
      { header: "METHOD", value: (e) => e.method },
      { header: "PATH", value: (e) => e.path },
      { header: "AUTH", value: (e) => e.auth },
      { header: "ENABLED", value: (e) => (e.enabled ? "yes" : `no${e.reason ? ` (${e.reason})` : ""}`) },
    ]),
  );
  return out.join("\n");
}

export function registerGatewayCommands(program: Command, io: CliIo): void {
  program
    .command("status")
    .description("gateway version, config validity, agents, connectors, maintenance (RPC status)")
    .option("--json", "print the raw payload as JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const client = clientFor(opts, io);
      const payload = await client.call<StatusPayload>("status");
      output(io, opts, payload, () => statusText(payload, client.url, timeStyle(opts, io)));
    });

  program
    .command("jobs")
    .description("scheduled jobs with their last and next run (RPC cron.list)")
    .option("--json", "print the raw payload as JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const payload = await clientFor(opts, io).call<{ jobs: Job[] }>("cron.list");
      output(io, opts, payload, () => jobsTable(payload.jobs, timeStyle(opts, io)));
    });

  program
    .command("audit")
    .description("security report: warnings, secrets set or missing, endpoints (RPC security.audit)")
    .option("--json", "print the raw payload as JSON")
    .action(async (_opts: unknown, cmd: Command) => {
      const opts = cmd.optsWithGlobals<GlobalOptions>();
      const payload = await clientFor(opts, io).call<AuditPayload>("security.audit");
      output(io, opts, payload, () => auditText(payload));
    });
}
