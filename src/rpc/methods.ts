/**
 * Operator RPC methods (`POST /rpc/:method`, SPEC §13 and §17 "RPC parameters"). Each method
 * declares a strict zod schema for its params (unknown params are a 400) and returns the payload.
 */
import { z } from "zod";
import { resolveModelRef } from "../agent/models";
import { stableUuid } from "../auth/signature";
import type { Config } from "../config/schema";
import {
  getRun,
  getRunByIdempotencyKey,
  getSession,
  getSessionByLabel,
  getSessionBySessionId,
  historyPage,
  listDeliveries,
  type SessionRow,
} from "../db/queries";
import { ApiError, actorError, parseInput } from "../http/errors";
import { defaultAgentId } from "../keys/agent-binding";
import {
  agentIdOfKey,
  agentMainKey,
  canonicalizeSessionKey,
  chatTypeOfKey,
  isReservedKey,
  normalizeAgentId,
  sessionKindOf,
} from "../keys/session-key";
import { evaluateSendPolicy } from "../policy/send-policy";
import { entryInitOf } from "../runs/entry-init";
import { type ActorError, type EnqueueRequest, TERMINAL, type WaitResult } from "../runs/types";
import { actorFor, isActorError } from "../session/client";
import { VERSION } from "../version";
import { decodeCursor, encodeCursor, entryView } from "../views/session";
import { clampInt, listSessionPage, SESSION_KINDS } from "../views/session-page";

export interface RpcContext {
  env: Env;
  config: Config;
}

type Method = { params: z.ZodType; run(params: never, ctx: RpcContext): Promise<unknown> };

function method<S extends z.ZodType>(
  params: S,
  run: (p: z.output<S>, ctx: RpcContext) => Promise<unknown>,
): Method {
  return { params, run: run as Method["run"] };
}

const Key = z.string().trim().min(1).max(512);

function canonicalKey(raw: string, config: Config): string {
  try {
    return canonicalizeSessionKey(raw, config.session);
  } catch (error) {
    throw new ApiError("INVALID_REQUEST", `\`key\`: ${error instanceof Error ? error.message : error}`);
  }
}

async function requireSession(env: Env, config: Config, raw: string): Promise<SessionRow> {
  const row = await getSession(env, canonicalKey(raw, config));
  if (!row) throw new ApiError("NOT_FOUND", `session not found: ${raw}`);
  return row;
}

function isMainKey(key: string, config: Config): boolean {
  if (key === "global") return true;
  const agentId = agentIdOfKey(key);
  return !!agentId && agentMainKey(agentId, config.session) === key;
}

/** Entry fields for a session created by an operator message (derived from the key). */
function initFromKey(key: string, config: Config): EnqueueRequest["init"] {
  const agentId = agentIdOfKey(key) ?? defaultAgentId(config.agents.list);
  const kind = sessionKindOf(key, config.session);
  const { chatType } = chatTypeOfKey(key);
  const segments = key.split(":");
  const marker = segments.findIndex((s) => s === "group" || s === "channel" || s === "dm");
  const channel = marker > 2 ? (segments[2] ?? null) : null;
  return { agentId, kind, chatType, channel };
}

async function enqueueOperatorRun(
  ctx: RpcContext,
  key: string,
  message: string,
  opts: { deliver: boolean; idempotencyKey?: string; timeoutSeconds?: number; existing?: SessionRow },
) {
  const { env, config } = ctx;
  if (opts.idempotencyKey) {
    const prior = await getRunByIdempotencyKey(env, opts.idempotencyKey);
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
      { key, channel: entry.channel, chatType, thread, override: entry.sendPolicy },
      config.session.sendPolicy,
    );
    if (verdict === "deny") throw new ApiError("FORBIDDEN", "send blocked by session policy");
  }
  const runId = opts.idempotencyKey ? await stableUuid(`rpc:${opts.idempotencyKey}`) : crypto.randomUUID();
  const init = entry ? entryInitOf(entry) : initFromKey(key, config);
  const req: EnqueueRequest = {
    sessionKey: key,
    runId,
    trigger: "rpc",
    inputs: [
      { text: message, provenance: { kind: "external_user", sourceTool: "rpc" }, timestamp: Date.now() },
    ],
    deliver: opts.deliver,
    init,
    userInteraction: true,
    hasThread: !!entry?.lastThreadId,
  };
  if (opts.idempotencyKey) req.idempotencyKey = opts.idempotencyKey;
  if (opts.timeoutSeconds) req.timeoutSeconds = opts.timeoutSeconds;
  const result = await actorFor(env, key).enqueue(req);
  if (!result.ok) throw actorError(result);
  return { runId: result.runId, sessionKey: key, sessionId: result.sessionId, status: "queued" as const };
}

function runView(run: NonNullable<Awaited<ReturnType<typeof getRun>>>) {
  const view: Record<string, unknown> = { ...run };
  for (const k of Object.keys(view)) if (view[k] === null) delete view[k];
  return view;
}

export const METHODS: Record<string, Method> = {
  status: method(z.strictObject({}), async (_p, { config, env }) => ({
    version: VERSION,
    now: Date.now(),
    defaultAgentId: defaultAgentId(config.agents.list),
    defaultModel: config.agents.defaults.model,
    agents: config.agents.list.map((a) => a.id),
    connectors: Object.entries(config.connectors).map(([channel, c]) => ({
      channel,
      deliverUrl: !!c.deliverUrl,
      secretSet: typeof (env as unknown as Record<string, unknown>)[c.secretEnv] === "string",
    })),
    queue: config.session.queue,
  })),

  "agents.list": method(z.strictObject({}), async (_p, { config }) => {
    const def = defaultAgentId(config.agents.list);
    const list = config.agents.list.length
      ? config.agents.list
      : [{ id: "main", name: undefined, model: undefined }];
    return {
      defaultId: def,
      agents: list.map((a) => ({
        id: a.id,
        ...(a.name ? { name: a.name } : {}),
        default: a.id === def,
        model: a.model ?? config.agents.defaults.model,
      })),
    };
  }),

  "sessions.list": method(
    z.strictObject({
      kinds: z.array(z.enum(SESSION_KINDS)).optional(),
      limit: z.number().optional(),
      activeMinutes: z.number().positive().optional(),
      messageLimit: z.number().min(0).optional(),
      agentId: z.string().min(1).optional(),
      label: z.string().min(1).optional(),
      archived: z.union([z.boolean(), z.literal("all")]).optional(),
      cursor: z.string().min(1).optional(),
      includeGlobal: z.boolean().optional(),
    }),
    async (p, { env }) => {
      const cursor = p.cursor ? decodeCursor(p.cursor) : undefined;
      if (p.cursor && !cursor)
        throw new ApiError("INVALID_REQUEST", "`cursor` is not a cursor returned by sessions.list");
      // The operator sees every session: one unrestricted scope, canonical keys.
      return listSessionPage(
        env,
        [{}],
        {
          kinds: p.kinds,
          agentId: p.agentId ? normalizeAgentId(p.agentId) : undefined,
          label: p.label,
          activeMinutes: p.activeMinutes,
          archived: p.archived ?? false,
          cursor,
          excludeKeys: p.includeGlobal ? ["unknown"] : ["global", "unknown"],
          limit: clampInt(p.limit, 1, 200, 50),
          messageLimit: clampInt(p.messageLimit, 0, 20, 0),
        },
        { displayKey: (row) => row.key },
      );
    },
  ),

  "sessions.resolve": method(
    z
      .strictObject({
        key: Key.optional(),
        sessionId: Key.optional(),
        label: Key.optional(),
        agentId: Key.optional(),
      })
      .refine((p) => [p.key, p.sessionId, p.label].filter((v) => v !== undefined).length === 1, {
        message: "pass exactly one of `key`, `sessionId`, `label`",
      }),
    async (p, { env, config }) => {
      let row: SessionRow | undefined;
      if (p.key) row = await getSession(env, canonicalKey(p.key, config));
      else if (p.sessionId) row = await getSessionBySessionId(env, p.sessionId);
      else if (p.label) {
        const rows = await getSessionByLabel(
          env,
          p.label,
          p.agentId ? normalizeAgentId(p.agentId) : undefined,
        );
        if (rows.length > 1) {
          throw new ApiError(
            "CONFLICT",
            `label "${p.label}" is used by sessions of several agents; pass \`agentId\``,
          );
        }
        row = rows[0];
      }
      if (!row) throw new ApiError("NOT_FOUND", `session not found: ${p.key ?? p.sessionId ?? p.label}`);
      return { key: row.key, sessionId: row.sessionId };
    },
  ),

  "sessions.patch": method(
    z.strictObject({
      key: Key,
      label: z.string().trim().min(1).max(128).nullable().optional(),
      model: z.string().trim().min(1).nullable().optional(),
      thinkingLevel: z.enum(["off", "minimal", "low", "medium", "high"]).nullable().optional(),
      verboseLevel: z.enum(["off", "on", "full"]).nullable().optional(),
      sendPolicy: z.enum(["allow", "deny"]).nullable().optional(),
    }),
    async (p, { env, config }) => {
      const row = await requireSession(env, config, p.key);
      const fields: Parameters<ReturnType<typeof actorFor>["patch"]>[1] = {};
      if (p.label !== undefined) fields.label = p.label;
      if (p.thinkingLevel !== undefined) fields.thinkingLevel = p.thinkingLevel;
      if (p.verboseLevel !== undefined) fields.verboseLevel = p.verboseLevel;
      if (p.sendPolicy !== undefined) fields.sendPolicy = p.sendPolicy;
      if (p.model !== undefined) {
        try {
          fields.modelOverride = p.model === null ? null : resolveModelRef(p.model, config).ref;
        } catch (error) {
          throw new ApiError(
            "INVALID_REQUEST",
            `\`model\`: ${error instanceof Error ? error.message : error}`,
          );
        }
      }
      const result = (await actorFor(env, row.key).patch(row.key, fields)) as
        | { ok: true; entry: SessionRow }
        | ActorError;
      if (isActorError(result)) throw actorError(result);
      return entryView(result.entry);
    },
  ),

  "sessions.reset": method(z.strictObject({ key: Key }), async (p, { env, config }) => {
    const row = await requireSession(env, config, p.key);
    const result = await actorFor(env, row.key).reset(row.key);
    if ("ok" in result) throw actorError(result);
    return result;
  }),

  "sessions.delete": method(
    z.strictObject({ key: Key, deleteTranscript: z.boolean().optional() }),
    async (p, { env, config }) => {
      const row = await requireSession(env, config, p.key);
      if (isMainKey(row.key, config)) {
        throw new ApiError(
          "FORBIDDEN",
          `${row.key} is an agent's main session and cannot be deleted; use sessions.reset`,
        );
      }
      const result = await actorFor(env, row.key).remove(row.key, p.deleteTranscript ?? true);
      return { key: row.key, deleted: result.deleted, abortedRuns: result.aborted };
    },
  ),

  "chat.history": method(
    z.strictObject({
      sessionKey: Key,
      limit: z.number().int().min(1).max(1000).optional(),
      before: z.number().int().min(1).optional(),
      includeTools: z.boolean().optional(),
    }),
    async (p, { env, config }) => {
      const row = await requireSession(env, config, p.sessionKey);
      const page = await historyPage(env, row.sessionId, {
        limit: p.limit ?? 200,
        before: p.before,
        includeTools: p.includeTools ?? true,
      });
      return { sessionKey: row.key, sessionId: row.sessionId, ...page };
    },
  ),

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
      if (p.sessionKey) key = canonicalKey(p.sessionKey, config);
      else {
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
      });
    },
  ),

  "agent.wait": method(
    z.strictObject({ runId: Key, timeoutMs: z.number().int().min(0).max(600_000).optional() }),
    async (p, { env }): Promise<WaitResult> => {
      const run = await getRun(env, p.runId);
      if (!run) throw new ApiError("NOT_FOUND", `run not found: ${p.runId}`);
      if (TERMINAL.has(run.status)) {
        const r: WaitResult = {
          runId: run.runId,
          status: run.status === "timeout" ? "timeout" : (run.status as WaitResult["status"]),
          runStatus: run.status as WaitResult["runStatus"],
        };
        if (run.startedAt) r.startedAt = run.startedAt;
        if (run.endedAt) r.endedAt = run.endedAt;
        if (run.error) r.error = run.error;
        return r;
      }
      const result = await actorFor(env, run.sessionKey).waitForRun(
        run.sessionKey,
        run.runId,
        p.timeoutMs ?? 30_000,
      );
      if ("ok" in result) throw actorError(result);
      const { reply: _reply, ...rest } = result;
      return rest;
    },
  ),

  "runs.get": method(z.strictObject({ runId: Key }), async (p, { env }) => {
    const run = await getRun(env, p.runId);
    if (!run) throw new ApiError("NOT_FOUND", `run not found: ${p.runId}`);
    return runView(run);
  }),

  "deliveries.list": method(
    z.strictObject({
      status: z.enum(["pending", "retrying", "delivered", "dead"]).optional(),
      sessionKey: Key.optional(),
      limit: z.number().optional(),
      cursor: z.string().min(1).optional(),
    }),
    async (p, { env, config }) => {
      const limit = clampInt(p.limit, 1, 200, 50);
      let cursor: { createdAt: number; deliveryId: string } | undefined;
      if (p.cursor) {
        const c = decodeCursor(p.cursor);
        if (!c) throw new ApiError("INVALID_REQUEST", "`cursor` is not a cursor returned by deliveries.list");
        cursor = { createdAt: c.updatedAt, deliveryId: c.key };
      }
      const rows = await listDeliveries(env, {
        status: p.status,
        sessionKey: p.sessionKey ? canonicalKey(p.sessionKey, config) : undefined,
        limit: limit + 1,
        cursor,
      });
      const page = rows.slice(0, limit).map((d) => {
        const v: Record<string, unknown> = { ...d };
        for (const k of Object.keys(v)) if (v[k] === null) delete v[k];
        return v;
      });
      const last = rows[limit - 1];
      return {
        deliveries: page,
        ...(rows.length > limit && last ? { nextCursor: encodeCursor(last.createdAt, last.deliveryId) } : {}),
      };
    },
  ),
};

export async function callMethod(name: string, rawParams: unknown, ctx: RpcContext): Promise<unknown> {
  const m = METHODS[name];
  if (!m) {
    throw new ApiError("NOT_FOUND", `unknown method "${name}" (methods: ${Object.keys(METHODS).join(", ")})`);
  }
  const params = parseInput(m.params, rawParams);
  return m.run(params as never, ctx);
}
