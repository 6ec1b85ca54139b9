/**
 * Scheduled jobs (SPEC §11, §17): `cron.jobs` run from the `* * * * *` trigger in their
 * `cron:<id>` session (kind `cron`, channel `internal`, trigger `cron`). A job's scheduled minute
 * runs at most once, however many trigger invocations see it: the invocation that inserts the
 * durable claim (job, minute) enqueues the run, with a run id derived from the claim, so even a
 * repeated enqueue is one run. A claim whose invocation stopped before the enqueue is retried by
 * the next trigger. Isolated jobs (the default) get a new sessionId per run; output goes to
 * `deliver` as a `reply`, under send policy.
 */
import { stableUuid } from "../auth/signature";
import type { Config, CronJobConfig } from "../config/schema";
import { claimJobRun, type JobRun, lastJobRun, settleJobRun, unsettledJobRuns } from "../db/maintenance";
import { getRun } from "../db/runs";
import { defaultAgentId } from "../keys/agent-binding";
import { cronSessionKey } from "../keys/session-key";
import type { EnqueueRequest } from "../runs/types";
import { actorFor } from "../session/client";
import { CATCH_UP_MS, dueSlot, type JobTiming, mayCatchUp, nextSlot } from "./schedule";

export interface JobsResult {
  /** Runs queued by this invocation, as `<jobId>@<ISO minute>`. */
  queued: string[];
  skipped: string[];
}

function timingOf(job: CronJobConfig, config: Config): JobTiming {
  return { schedule: job.schedule, timezone: job.timezone ?? config.session.timezone };
}

function runRequest(
  job: CronJobConfig,
  config: Config,
  claim: Pick<JobRun, "runId" | "sessionKey">,
): EnqueueRequest {
  const req: EnqueueRequest = {
    sessionKey: claim.sessionKey,
    runId: claim.runId,
    trigger: "cron",
    inputs: [
      {
        text: job.message,
        provenance: { kind: "internal_system", sourceTool: "cron" },
        timestamp: Date.now(),
      },
    ],
    deliver: !!job.deliver,
    init: {
      agentId: job.agentId ?? defaultAgentId(config.agents.list),
      kind: "cron",
      chatType: "direct",
      channel: null,
      displayName: `cron: ${job.id}`,
    },
    userInteraction: false,
    hasThread: false,
    freshSession: job.isolated,
  };
  if (job.deliver) {
    req.route = {
      channel: job.deliver.channel,
      to: job.deliver.to,
      accountId: job.deliver.accountId ?? "default",
    };
  }
  return req;
}

/** Enqueues a claimed run and records the outcome on the claim; idempotent by the claim's run id. */
async function startClaimed(env: Env, config: Config, job: CronJobConfig, claim: JobRun, out: JobsResult) {
  const label = `${job.id}@${new Date(claim.scheduledFor).toISOString()}`;
  const result = await actorFor(env, claim.sessionKey).enqueue(runRequest(job, config, claim));
  if (result.ok) {
    await settleJobRun(env, claim, { queuedAt: Date.now() });
    out.queued.push(label);
  } else {
    await settleJobRun(env, claim, { skipped: result.message });
    out.skipped.push(`${label}: ${result.message}`);
  }
}

async function runJob(env: Env, config: Config, job: CronJobConfig, tick: number, out: JobsResult) {
  const timing = timingOf(job, config);
  const last = mayCatchUp(timing, tick) ? await lastJobRun(env, job.id) : undefined;
  const slot = dueSlot(timing, tick, last?.scheduledFor);
  if (!slot) return;
  const claim: JobRun = {
    jobId: job.id,
    scheduledFor: slot.at,
    runId: await stableUuid(`cron:${job.id}:${slot.at}`),
    sessionKey: cronSessionKey(job.id),
    claimedAt: Date.now(),
    late: slot.late,
    queuedAt: null,
    skipped: null,
  };
  if (!(await claimJobRun(env, claim))) return; // another invocation has this minute
  await startClaimed(env, config, job, claim, out);
}

/** Runs every job due at `tick`, and retries claims left unsettled by an interrupted invocation. */
export async function runDueJobs(env: Env, config: Config, tick: number): Promise<JobsResult> {
  const out: JobsResult = { queued: [], skipped: [] };
  const jobs = config.cron.jobs;
  if (jobs.length === 0) return out;
  const settled = await Promise.allSettled(jobs.map((job) => runJob(env, config, job, tick, out)));
  for (const [i, s] of settled.entries()) {
    if (s.status === "rejected") out.skipped.push(`${jobs[i]?.id}: ${String(s.reason)}`);
  }
  // A claim is inserted before its enqueue: one whose invocation died in between is retried here
  // (same run id, so an enqueue that did land is answered as a duplicate).
  const byId = new Map(jobs.map((j) => [j.id, j]));
  for (const claim of await unsettledJobRuns(env, Date.now() - CATCH_UP_MS)) {
    const job = byId.get(claim.jobId);
    if (job && Date.now() - claim.claimedAt > 10_000) await startClaimed(env, config, job, claim, out);
  }
  return out;
}

/** Each job with its session, next run and last run (SPEC §13 `cron.list`). */
export async function listJobs(env: Env, config: Config, now: number) {
  return Promise.all(
    config.cron.jobs.map(async (job) => {
      const timing = timingOf(job, config);
      const last = await lastJobRun(env, job.id);
      const run = last ? await getRun(env, last.runId) : undefined;
      const next = nextSlot(timing, now);
      return {
        id: job.id,
        schedule: job.schedule,
        timezone: timing.timezone,
        agentId: job.agentId ?? defaultAgentId(config.agents.list),
        isolated: job.isolated,
        ...(job.deliver ? { deliver: job.deliver } : {}),
        sessionKey: cronSessionKey(job.id),
        nextRunAt: next ?? null,
        lastRun: last
          ? {
              scheduledFor: last.scheduledFor,
              runId: last.runId,
              claimedAt: last.claimedAt,
              late: last.late,
              ...(last.queuedAt ? { queuedAt: last.queuedAt } : {}),
              ...(last.skipped ? { skipped: last.skipped } : {}),
              ...(run
                ? {
                    sessionId: run.sessionId,
                    status: run.status,
                    ...(run.endedAt ? { endedAt: run.endedAt } : {}),
                    ...(run.error ? { error: run.error } : {}),
                  }
                : {}),
            }
          : null,
      };
    }),
  );
}
