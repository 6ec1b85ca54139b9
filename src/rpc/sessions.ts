/**
 * Operator RPC methods on the session index (SPEC §17 "RPC parameters"): list, get, resolve,
 * patch, reset, delete, and a session's history.
 */
import { z } from "zod";
import { resolveModelRef } from "../agent/models";
import type { Config } from "../config/schema";
import { sessionWithHistoryPage } from "../db/messages";
import {
  findSession,
  getSessionByLabel,
  getSessionBySessionId,
  type SessionRow,
  transcriptOwner,
} from "../db/queries";
import { searchMessages } from "../db/search";
import { readSessionPage } from "../db/session-page";
import { ApiError, actorError } from "../http/errors";
import { storedKeyForms } from "../keys/canonical-key";
import { normalizeAgentId } from "../keys/ids";
import { agentIdOfKey, agentMainKey } from "../keys/session-key";
import { entryInitOf } from "../runs/entry-init";
import type { ActorError } from "../runs/types";
import { actorFor, isActorError } from "../session/client";
import { decodeSearchCursor, SearchParams, searchSessions } from "../views/search";
import { decodeCursor, entryView, expiredAtOf } from "../views/session";
import { pageQuery, SESSION_KINDS, sessionPage } from "../views/session-page";
import { canonicalKey, Key, type Method, method, requireSession } from "./method";

const INTERNAL_KINDS: Array<(typeof SESSION_KINDS)[number]> = ["cron", "hook", "node"];

function isMainKey(key: string, config: Config): boolean {
  if (key === "global") return true;
  const agentId = agentIdOfKey(key);
  return !!agentId && agentMainKey(agentId, config.session) === key;
}

export const SESSION_METHODS: Record<string, Method> = {
  "sessions.list": method(
    z.strictObject({
      kinds: z.array(z.enum(SESSION_KINDS)).optional(),
      limit: z.number().optional(),
      activeMinutes: z.number().positive().optional(),
      messageLimit: z.number().min(0).optional(),
      agentId: z.string().min(1).optional(),
      label: z.string().min(1).optional(),
      channel: z.string().trim().min(1).max(128).optional(),
      archived: z.union([z.boolean(), z.literal("all")]).optional(),
      cursor: z.string().min(1).optional(),
      includeGlobal: z.boolean().optional(),
    }),
    async (p, { env }) => {
      const cursor = p.cursor ? decodeCursor(p.cursor) : undefined;
      if (p.cursor && !cursor)
        throw new ApiError("INVALID_REQUEST", "`cursor` is not a cursor returned by sessions.list");
      // `internal` is the channel the listing shows for cron, hook and node sessions: their kinds.
      let params = p;
      if (p.channel === "internal") {
        const kinds = (p.kinds ?? INTERNAL_KINDS).filter((k) => INTERNAL_KINDS.includes(k));
        if (kinds.length === 0) return { count: 0, sessions: [] };
        params = { ...p, channel: undefined, kinds };
      }
      // The operator sees every session: one unrestricted scope, canonical keys.
      const now = Date.now();
      const query = pageQuery(params, cursor, p.includeGlobal ? ["unknown"] : ["global", "unknown"], now);
      const rows = await readSessionPage(env, [{}], query, query.messageLimit);
      return sessionPage(rows, now, { displayKey: (row) => row.key });
    },
  ),

  "sessions.search": method(SearchParams, async (p, { env, config }) => {
    const cursor = p.cursor ? decodeSearchCursor(p.cursor) : undefined;
    if (p.cursor && !cursor)
      throw new ApiError("INVALID_REQUEST", "`cursor` is not a cursor returned by sessions.search");
    // The operator sees every session, with canonical keys; `sessionKey` is a stored key.
    const sessionKey =
      p.sessionKey === undefined ? undefined : (await requireSession(env, config, p.sessionKey)).key;
    return searchSessions(
      (filter) => searchMessages(env, filter),
      { scopes: [{}], excludeKeys: ["unknown"], displayKey: (key) => key },
      { ...p, sessionKey, cursor },
    );
  }),

  "sessions.get": method(z.strictObject({ key: Key }), async (p, { env, config }) => {
    // The full entry (SPEC §3 fields), and whether its reset policy has closed it already.
    const row = await requireSession(env, config, p.key);
    const expiredAt = expiredAtOf(row, Date.now());
    return { ...entryView(row), expired: expiredAt !== null, ...(expiredAt !== null ? { expiredAt } : {}) };
  }),

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
      if (p.key) row = await findSession(env, storedKeyForms(canonicalKey(p.key, config)));
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

  "sessions.compact": method(
    z.strictObject({ key: Key, instructions: z.string().trim().min(1).max(2_000).optional() }),
    async (p, { env, config }) => {
      const row = await requireSession(env, config, p.key);
      const result = await actorFor(env, row.key).enqueue({
        sessionKey: row.key,
        runId: crypto.randomUUID(),
        trigger: "compact",
        inputs: [],
        deliver: false,
        init: entryInitOf(row),
        userInteraction: false,
        hasThread: !!row.lastThreadId,
        compact: p.instructions ? { instructions: p.instructions } : {},
      });
      if (!result.ok) throw actorError(result);
      return { runId: result.runId };
    },
  ),

  "chat.history": method(
    z.strictObject({
      sessionKey: Key,
      sessionId: Key.optional(),
      limit: z.number().int().min(1).max(1000).optional(),
      before: z.number().int().min(1).optional(),
      aroundSeq: z.number().int().min(1).optional(),
      includeTools: z.boolean().optional(),
    }),
    async (p, { env, config }) => {
      // The session and its page in one D1 round trip (a second one for a key typed in
      // another case than it is stored in: storedKeyForms).
      const sessionId = p.sessionId?.toLowerCase();
      for (const key of storedKeyForms(canonicalKey(p.sessionKey, config))) {
        const { row, page, transcriptKey } = await sessionWithHistoryPage(env, key, {
          limit: p.limit ?? 200,
          before: p.before,
          around: p.aroundSeq,
          includeTools: p.includeTools ?? true,
          sessionId,
        });
        if (!row) continue;
        if (sessionId !== undefined && transcriptKey !== row.key) {
          const owner = transcriptKey ?? (await transcriptOwner(env, sessionId))?.sessionKey;
          throw new ApiError(
            "INVALID_REQUEST",
            owner
              ? `sessionId ${sessionId} is a transcript of session ${owner}, not of ${row.key}`
              : `sessionId ${sessionId} is not a transcript of session ${row.key}`,
          );
        }
        return { sessionKey: row.key, sessionId: sessionId ?? row.sessionId, ...page };
      }
      throw new ApiError("NOT_FOUND", `session not found: ${p.sessionKey}`);
    },
  ),
};
