/**
 * Operator RPC methods on runs (SPEC §5, §17 "RPC parameters"): send a message to a session or
 * an agent (`chat.send`, `agent`), wait for a run server-side, read and list runs, list deliveries
 * and dead records, and retry a dead delivery. A run's queueing, waiting and reading: operator-runs.ts.
 */
import { z } from "zod";
import { findSession, getSession, type SessionRow } from "../db/queries";
import { listDeadRecords } from "../db/run-records";
import { deliveriesOfRun, getDelivery, listDeliveries, listRuns, withDeliveryOutcomes } from "../db/runs";
import { payloadOf } from "../delivery/rows";
import { ApiError } from "../http/errors";
import { defaultAgentId } from "../keys/agent-binding";
import { storedKeyForms } from "../keys/canonical-key";
import { normalizeAgentId } from "../keys/ids";
import { agentMainKey, isReservedKey } from "../keys/session-key";
import type { WaitResult } from "../runs/types";
import { actorFor } from "../session/client";
import { runTimeline } from "../views/run-timeline";
import { decodeCursor, encodeCursor } from "../views/session";
import { clampInt } from "../views/session-page";
import { canonicalKey, Key, type Method, method, requireSession, withoutNulls } from "./method";
import { enqueueOperatorRun, readRun, waitForOperatorRun } from "./operator-runs";

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
      overrideBudget: z.boolean().optional(),
    }),
    async (p, ctx) => {
      const row = await requireSession(ctx.env, ctx.config, p.sessionKey);
      return enqueueOperatorRun(ctx, row.key, p.message, {
        deliver: p.deliver ?? false,
        idempotencyKey: p.idempotencyKey,
        overrideBudget: p.overrideBudget,
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
        overrideBudget: z.boolean().optional(),
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
        overrideBudget: p.overrideBudget,
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
    // SPEC §21: what its priced calls cost; null (kept) when its calls had no price.
    const usage = run.usage;
    // SPEC §21: where its time went; a run that ended has its deliveries' rows to add.
    const deliveries = run.deliver && run.endedAt !== null ? await deliveriesOfRun(env, run) : [];
    return {
      ...withoutNulls(run),
      ...(usage ? { costUsd: usage.costUsd ?? null } : {}),
      timeline: runTimeline(run, deliveries, Date.now()),
    };
  }),

  "runs.list": method(
    z.strictObject({
      status: z
        .enum(["queued", "running", "ok", "error", "aborted", "timeout", "budget_exceeded"])
        .optional(),
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
      // A listing leaves the timeline to runs.get.
      const runs = page.rows.map(({ timeline: _timeline, ...run }) => run);
      return { runs, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
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
