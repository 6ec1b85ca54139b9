/**
 * A run an operator starts, waits for and reads, on any surface (the RPC, the OpenAI-compatible
 * API, hooks): its message queued as an ordinary run of the session (send policy, idempotency
 * keys scoped to the surface), a server-side wait for its end, and its row, read through its
 * session's actor while D1 does not show it yet.
 */
import { stableUuid } from "../auth/signature";
import { getSession, type RunRow, type SessionRow } from "../db/queries";
import { keysOfRunPrefix } from "../db/run-records";
import { getRun, getRunByIdempotencyKey, withDeliveryOutcomes } from "../db/runs";
import { ApiError, actorError } from "../http/errors";
import { runIdPrefix } from "../keys/run-id";
import { chatTypeOfKey } from "../keys/session-key";
import { evaluateSendPolicy, sessionChannel } from "../policy/send-policy";
import { entryInitOf, initFromKey } from "../runs/entry-init";
import { type EnqueueRequest, type EntryInit, TERMINAL, type WaitResult } from "../runs/types";
import { actorFor } from "../session/client";
import type { RpcContext } from "./method";

/** An operator's message to a session, as the RPC and the OpenAI-compatible API send it. */
export interface OperatorMessage {
  deliver: boolean;
  idempotencyKey?: string;
  timeoutSeconds?: number;
  /** Run past the agent's budgets (SPEC §21), for this message only. */
  overrideBudget?: boolean | undefined;
  /** The session's row, when the caller has read it already. */
  existing?: SessionRow;
  /** The entry a session this message creates gets (default: derived from its key). */
  init?: EntryInit;
  /** The surface sending it: scopes idempotency keys and marks the message's provenance. */
  surface?: "rpc" | "openai";
}

/**
 * The run an idempotency key already names (SPEC §5: the same key from the same caller is the
 * same run), when it was used for this same session. A key used for another session is a 409
 * naming it: answering with the other session's run would drop this message without a word.
 */
export async function priorRunOf(
  env: Env,
  idempotencyKey: { given: string; scoped: string },
  sessionKey: string,
): Promise<RunRow | undefined> {
  const prior = await getRunByIdempotencyKey(env, idempotencyKey.scoped);
  if (prior && prior.sessionKey !== sessionKey) {
    throw new ApiError(
      "CONFLICT",
      `\`idempotencyKey\` "${idempotencyKey.given}" was already used for session ${prior.sessionKey} (run ${prior.runId}); use a new key for a message to ${sessionKey}`,
    );
  }
  return prior;
}

/**
 * Queues an operator's message as an ordinary run of the session `key` (trigger `rpc`), under
 * send policy when it is to be delivered. An idempotency key already used on the same surface
 * returns that earlier run instead.
 */
export async function enqueueOperatorRun(
  ctx: RpcContext,
  key: string,
  message: string,
  opts: OperatorMessage,
) {
  const { env, config } = ctx;
  const surface = opts.surface ?? "rpc";
  // Keys are scoped to the caller (SPEC §5): each operator surface is one caller, stored as
  // `rpc:<key>` / `openai:<key>` next to the hooks' `hook:<key>` and `wake:<key>`, so no other
  // surface's key can name an operator run, nor an operator key another surface's run.
  const scopedKey = opts.idempotencyKey ? `${surface}:${opts.idempotencyKey}` : undefined;
  if (opts.idempotencyKey && scopedKey) {
    const prior = await priorRunOf(env, { given: opts.idempotencyKey, scoped: scopedKey }, key);
    if (prior)
      return {
        runId: prior.runId,
        sessionKey: prior.sessionKey,
        sessionId: prior.sessionId,
        status: "queued",
      };
  }
  const entry = opts.existing ?? (await getSession(env, key));
  if (opts.deliver) {
    if (!entry?.deliveryContext) {
      throw new ApiError(
        "INVALID_REQUEST",
        `session ${key} has no delivery route yet; send with deliver: false`,
      );
    }
    const { chatType, thread } = chatTypeOfKey(key, !!entry.lastThreadId);
    const verdict = evaluateSendPolicy(
      { key, channel: sessionChannel(entry), chatType, thread, override: entry.sendPolicy },
      config.session.sendPolicy,
    );
    if (verdict === "deny") throw new ApiError("FORBIDDEN", "send blocked by session policy");
  }
  const runId = scopedKey ? await stableUuid(scopedKey) : crypto.randomUUID();
  const init = entry ? entryInitOf(entry) : (opts.init ?? initFromKey(key, config));
  const req: EnqueueRequest = {
    sessionKey: key,
    runId,
    trigger: "rpc",
    inputs: [
      { text: message, provenance: { kind: "external_user", sourceTool: surface }, timestamp: Date.now() },
    ],
    deliver: opts.deliver,
    init,
    userInteraction: true,
    hasThread: !!entry?.lastThreadId,
  };
  if (scopedKey) req.idempotencyKey = scopedKey;
  if (opts.timeoutSeconds) req.timeoutSeconds = opts.timeoutSeconds;
  if (opts.overrideBudget) req.overrideBudget = true;
  const result = await actorFor(env, key).enqueue(req);
  if (!result.ok) throw actorError(result);
  return { runId: result.runId, sessionKey: key, sessionId: result.sessionId, status: "queued" as const };
}

/**
 * The sessions a run id that D1 does not show yet may belong to: a connector's message is
 * acknowledged before its run is recorded (session/d1/records.ts), and its run id names its
 * session (keys/run-id.ts). Usually one key; none for an id nobody handed out.
 */
function sessionsOfRunId(env: Env, runId: string): Promise<string[]> {
  return keysOfRunPrefix(env, runIdPrefix(runId));
}

/**
 * A run's row: D1's once the run has ended there (its delivery's outcome, if its actor still
 * holds it, recorded first); until then its session's actor's view of it, since a run reaches
 * D1 with its finalize. So a run id is readable as soon as it was handed out.
 */
export async function readRun(env: Env, runId: string): Promise<RunRow | undefined> {
  const run = await getRun(env, runId);
  if (run && TERMINAL.has(run.status)) {
    // Its delivery's outcome may still wait in its actor for the session's next write.
    if (run.deliver && run.delivered === null)
      await actorFor(env, run.sessionKey).recordOutcomes(run.sessionKey);
    return (await withDeliveryOutcomes(env, [run]))[0];
  }
  // Not ended in D1: its session's actor holds it (a run reaches D1 with its finalize).
  for (const key of run ? [run.sessionKey] : await sessionsOfRunId(env, runId)) {
    const held = await actorFor(env, key).runView(key, runId);
    if (held === "unknown") continue;
    if (held === "ended") {
      await actorFor(env, key).recordOutcomes(key);
      const ended = await getRun(env, runId);
      return ended && (await withDeliveryOutcomes(env, [ended]))[0];
    }
    return { ...EMPTY_RUN, ...run, ...(held as object) } as RunRow;
  }
  return run;
}

/** A run row's optional columns, as a run the actor holds lacks them. */
const EMPTY_RUN = {
  startedAt: null,
  endedAt: null,
  error: null,
  reply: null,
  usage: null,
  timeline: null,
  model: null,
  deliver: false,
  delivered: null,
  idempotencyKey: null,
} satisfies Partial<RunRow>;

/**
 * Waits server-side for a run to end (at most `timeoutMs`): an ended run answers from its D1
 * row, a queued or running one from its session's actor, also before D1 shows it. Status
 * `timeout` means the wait ended first (`runStatus` says where the run is). Includes the reply
 * when there is one.
 */
export async function waitForOperatorRun(env: Env, runId: string, timeoutMs: number): Promise<WaitResult> {
  const run = await getRun(env, runId);
  if (run && TERMINAL.has(run.status)) {
    const r: WaitResult = {
      runId: run.runId,
      status: run.status === "budget_exceeded" ? "error" : (run.status as WaitResult["status"]),
      runStatus: run.status as WaitResult["runStatus"],
    };
    if (run.startedAt) r.startedAt = run.startedAt;
    if (run.endedAt) r.endedAt = run.endedAt;
    if (run.error) r.error = run.error;
    if (run.reply !== null) r.reply = run.reply;
    return r;
  }
  for (const key of run ? [run.sessionKey] : await sessionsOfRunId(env, runId)) {
    const result = await actorFor(env, key).waitForRun(key, runId, timeoutMs);
    if (!("ok" in result)) return result;
    if (result.code !== "NOT_FOUND") throw actorError(result);
  }
  throw new ApiError("NOT_FOUND", `run not found: ${runId}`);
}
