/**
 * Operator RPC methods on runs (SPEC §5, §17 "RPC parameters"): send a message to a session or
 * an agent (`chat.send`, `agent`), wait for a run server-side, read and list runs, list deliveries
 * and retry a dead one.
 */
import { z } from "zod";
import { stableUuid } from "../auth/signature";
import { findSession, getSession, type RunRow, type SessionRow } from "../db/queries";
import { keysOfRunPrefix, listDeadRecords } from "../db/run-records";
import {
  getDelivery,
  getRun,
  getRunByIdempotencyKey,
  listDeliveries,
  listRuns,
  withDeliveryOutcomes,
} from "../db/runs";
import { payloadOf } from "../delivery/rows";
import { ApiError, actorError } from "../http/errors";
import { defaultAgentId } from "../keys/agent-binding";
import { runIdPrefix } from "../keys/run-id";
import {
  agentMainKey,
  chatTypeOfKey,
  isReservedKey,
  normalizeAgentId,
  storedKeyForms,
} from "../keys/session-key";
import { evaluateSendPolicy, sessionChannel } from "../policy/send-policy";
import { entryInitOf, initFromKey } from "../runs/entry-init";
import { type EnqueueRequest, type EntryInit, TERMINAL, type WaitResult } from "../runs/types";
import { actorFor } from "../session/client";
import { decodeCursor, encodeCursor } from "../views/session";
import { clampInt } from "../views/session-page";
import {
  canonicalKey,
  Key,
  type Method,
  method,
  type RpcContext,
  requireSession,
  withoutNulls,
} from "./method";

/** An operator's message to a session, as the RPC and the OpenAI-compatible API send it. */
export interface OperatorMessage {
  deliver: boolean;
  idempotencyKey?: string;
  timeoutSeconds?: number;
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
 * A run's D1 row. A run its session's actor holds but D1 does not show yet is written first
 * (the actor writes its journal), so a run id is readable as soon as it was handed out.
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
      status: run.status === "timeout" ? "timeout" : (run.status as WaitResult["status"]),
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

/**
 * A newest-first page of rows keyed by (createdAt, id), as `runs.list` and `deliveries.list`
 * answer: `limit` clamped to 1-200 (default 50), the opaque cursor decoded (a foreign one is a
 * 400 naming `method`), one row more read to know whether a next page exists.
 */
async function newestFirst<R extends { createdAt: number }>(
  method: string,
  p: { limit?: number | undefined; cursor?: string | undefined },
  list: (limit: number, after: { createdAt: number; id: string } | undefined) => Promise<R[]>,
  idOf: (row: R) => string,
): Promise<{ rows: Record<string, unknown>[]; nextCursor?: string }> {
  const limit = clampInt(p.limit, 1, 200, 50);
  let after: { createdAt: number; id: string } | undefined;
  if (p.cursor) {
    const c = decodeCursor(p.cursor);
    if (!c) throw new ApiError("INVALID_REQUEST", `\`cursor\` is not a cursor returned by ${method}`);
    after = { createdAt: c.updatedAt, id: c.key };
  }
  const rows = await list(limit + 1, after);
  const last = rows[limit - 1];
  return {
    rows: rows.slice(0, limit).map(withoutNulls),
    ...(rows.length > limit && last ? { nextCursor: encodeCursor(last.createdAt, idOf(last)) } : {}),
  };
}

export const RUN_METHODS: Record<string, Method> = {
  "chat.send": method(
    z.strictObject({
      sessionKey: Key,
      message: z.string().trim().min(1).max(200_000),
      deliver: z.boolean().optional(),
      idempotencyKey: z.string().min(1).max(256).optional(),
    }),
    async (p, ctx) => {
      const row = await requireSession(ctx.env, ctx.config, p.sessionKey);
      return enqueueOperatorRun(ctx, row.key, p.message, {
        deliver: p.deliver ?? false,
        idempotencyKey: p.idempotencyKey,
        existing: row,
      });
    },
  ),

  agent: method(
    z
      .strictObject({
        message: z.string().trim().min(1).max(200_000),
        sessionKey: Key.optional(),
        agentId: Key.optional(),
        deliver: z.boolean().optional(),
        idempotencyKey: z.string().min(1).max(256).optional(),
        timeoutSeconds: z.number().int().min(0).max(3600).optional(),
      })
      .refine((p) => !(p.sessionKey && p.agentId), { message: "pass `sessionKey` or `agentId`, not both" }),
    async (p, ctx) => {
      const { config } = ctx;
      let key: string;
      let existing: SessionRow | undefined;
      if (p.sessionKey) {
        key = canonicalKey(p.sessionKey, config);
        // A session stored under another case of the key is that session (storedKeyForms).
        existing = await findSession(ctx.env, storedKeyForms(key));
        if (existing) key = existing.key;
      } else {
        const agentId = normalizeAgentId(p.agentId ?? defaultAgentId(config.agents.list));
        const ids = config.agents.list.map((a) => a.id);
        if (ids.length && !ids.includes(agentId)) {
          throw new ApiError(
            "INVALID_REQUEST",
            `\`agentId\` "${p.agentId}" is not a configured agent (known: ${ids.join(", ")})`,
          );
        }
        key = agentMainKey(agentId, config.session);
      }
      if (isReservedKey(key) && key !== "global")
        throw new ApiError("INVALID_REQUEST", `\`sessionKey\` ${key} is reserved`);
      return enqueueOperatorRun(ctx, key, p.message, {
        deliver: p.deliver ?? false,
        idempotencyKey: p.idempotencyKey,
        timeoutSeconds: p.timeoutSeconds,
        existing,
      });
    },
  ),

  "agent.wait": method(
    z.strictObject({ runId: Key, timeoutMs: z.number().int().min(0).max(600_000).optional() }),
    async (p, { env }): Promise<WaitResult> => {
      const {
        reply: _reply,
        delivery: _delivery,
        ...rest
      } = await waitForOperatorRun(env, p.runId, p.timeoutMs ?? 30_000);
      return rest;
    },
  ),

  "runs.get": method(z.strictObject({ runId: Key }), async (p, { env }) => {
    const run = await readRun(env, p.runId);
    if (!run) throw new ApiError("NOT_FOUND", `run not found: ${p.runId}`);
    return withoutNulls(run);
  }),

  "runs.list": method(
    z.strictObject({
      status: z.enum(["queued", "running", "ok", "error", "aborted", "timeout"]).optional(),
      sessionKey: Key.optional(),
      limit: z.number().optional(),
      cursor: z.string().min(1).optional(),
    }),
    async (p, { env, config }) => {
      const page = await newestFirst(
        "runs.list",
        p,
        async (limit, after) =>
          withDeliveryOutcomes(
            env,
            await listRuns(env, {
              status: p.status,
              sessionKey: p.sessionKey ? canonicalKey(p.sessionKey, config) : undefined,
              limit,
              cursor: after && { createdAt: after.createdAt, runId: after.id },
            }),
          ),
        (r) => r.runId,
      );
      return { runs: page.rows, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
    },
  ),

  "deliveries.list": method(
    z.strictObject({
      status: z.enum(["pending", "retrying", "delivered", "dead"]).optional(),
      sessionKey: Key.optional(),
      limit: z.number().optional(),
      cursor: z.string().min(1).optional(),
    }),
    async (p, { env, config }) => {
      const sessionKey = p.sessionKey ? canonicalKey(p.sessionKey, config) : undefined;
      // One session's deliveries: the outcomes its actor holds for its next write are written first.
      if (sessionKey && (await getSession(env, sessionKey)))
        await actorFor(env, sessionKey).recordOutcomes(sessionKey);
      const page = await newestFirst(
        "deliveries.list",
        p,
        (limit, after) =>
          listDeliveries(env, {
            status: p.status,
            sessionKey,
            limit,
            cursor: after && { createdAt: after.createdAt, deliveryId: after.id },
          }),
        (d) => d.deliveryId,
      );
      return { deliveries: page.rows, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
    },
  ),

  "records.dead": method(
    z.strictObject({ limit: z.number().optional(), cursor: z.string().min(1).optional() }),
    async (p, { env }) => {
      // Deferred records D1 refused again and again (session/d1/records.ts), newest first.
      const page = await newestFirst(
        "records.dead",
        p,
        (limit, after) =>
          listDeadRecords(env, { limit, cursor: after && { createdAt: after.createdAt, runId: after.id } }),
        (d) => d.runId,
      );
      return { records: page.rows, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
    },
  ),

  "deliveries.retry": method(z.strictObject({ deliveryId: Key }), async (p, { env }) => {
    let row = await getDelivery(env, p.deliveryId);
    if (!row) throw new ApiError("NOT_FOUND", `delivery not found: ${p.deliveryId}`);
    if (row.status !== "delivered") {
      // An outcome its actor holds for the session's next write decides what a retry may do.
      await actorFor(env, row.sessionKey).recordOutcomes(row.sessionKey);
      row = (await getDelivery(env, p.deliveryId)) ?? row;
    }
    if (row.status === "delivered") {
      throw new ApiError(
        "CONFLICT",
        `delivery ${p.deliveryId} was delivered; only a dead one can be retried`,
      );
    }
    if (row.status !== "dead") return { deliveryId: row.deliveryId, status: row.status, requeued: false };
    const { requeued } = await actorFor(env, row.sessionKey).retryDelivery(row.sessionKey, payloadOf(row));
    // Not requeued: the actor still owes it (an attempt is pending there).
    return { deliveryId: row.deliveryId, status: "pending", requeued };
  }),
};
