/**
 * `POST /hooks/agent` and `POST /hooks/wake` (SPEC §13, §17): webhook callers (CI systems,
 * mail bridges, schedulers) behind `HOOKS_TOKEN` while `hooks.enabled` is true.
 *
 * `/hooks/agent` runs the message in a fresh `hook:<uuid>` session (trigger `hook`), or in a
 * caller-chosen `sessionKey` when `hooks.allowRequestSessionKey` and a prefix of
 * `hooks.allowedSessionKeyPrefixes` allow it (refused before anything runs otherwise). It answers
 * `200 { ok, runId, sessionKey }` as soon as the run is queued; with `waitForCompletion` it waits
 * (at most `WAIT_BOUND_MS`) and adds `completion`. An `idempotencyKey` returns the same run for
 * the same key; keys are scoped to this surface, so they never collide with RPC or tool keys.
 * With `channel` and `to` (or `deliver: true` on a session that has a route) the reply is
 * delivered as a `reply`, under send policy.
 *
 * `/hooks/wake` queues a system event into an agent's main session: a system turn, which does
 * not refresh the session's idle freshness; its reply goes to the main session's chat route.
 */
import { Hono } from "hono";
import { z } from "zod";
import { requireHooksToken } from "../auth/bearer";
import { stableUuid } from "../auth/signature";
import { accountIdsOf } from "../config/connectors";
import { loadConfig } from "../config/load";
import type { Config } from "../config/schema";
import { getSession, type SessionRow } from "../db/queries";
import { ApiError, actorError, parseInput, parseJsonBody } from "../http/errors";
import { SURFACE } from "../http/surface";
import { defaultAgentId } from "../keys/agent-binding";
import { canonicalizeSessionKey } from "../keys/canonical-key";
import { normalizeAccountId, normalizeAgentId } from "../keys/ids";
import { agentIdOfKey, agentMainKey, hookSessionKey, UNKNOWN_KEY } from "../keys/session-key";
import { connectorOf } from "../rpc/connectors";
import { priorRunOf } from "../rpc/operator-runs";
import { entryInitOf, initFromKey } from "../runs/entry-init";
import type { DeliveryRoute, EnqueueRequest, WaitResult } from "../runs/types";
import { actorFor } from "../session/client";

/** The longest a `waitForCompletion` call is held open; the run goes on after it. */
export const WAIT_BOUND_MS = 120_000;

const Text = z.string().trim().min(1).max(200_000);
const IdempotencyKey = z.string().min(1).max(256);

const AgentHook = z
  .strictObject({
    message: Text,
    name: z.string().trim().min(1).max(128).optional(),
    agentId: z.string().trim().min(1).max(64).optional(),
    sessionKey: z.string().trim().min(1).max(512).optional(),
    deliver: z.boolean().optional(),
    channel: z.string().trim().min(1).max(64).optional(),
    to: z.string().trim().min(1).max(256).optional(),
    accountId: z.string().trim().min(1).max(128).optional(),
    waitForCompletion: z.boolean().optional(),
    timeoutSeconds: z.number().int().min(1).max(3600).optional(),
    idempotencyKey: IdempotencyKey.optional(),
  })
  .refine((b) => (b.channel === undefined) === (b.to === undefined), {
    path: ["to"],
    message: "`channel` and `to` go together: pass both to deliver the reply there, or neither",
  });

const WakeHook = z.strictObject({
  text: Text,
  agentId: z.string().trim().min(1).max(64).optional(),
  idempotencyKey: IdempotencyKey.optional(),
});

function agentFor(given: string | undefined, config: Config): string {
  if (given === undefined) return defaultAgentId(config.agents.list);
  const agentId = normalizeAgentId(given);
  const ids = config.agents.list.map((a) => a.id);
  if (ids.length && !ids.includes(agentId)) {
    throw new ApiError(
      "INVALID_REQUEST",
      `\`agentId\` "${given}" is not a configured agent (known: ${ids.join(", ")})`,
    );
  }
  return agentId;
}

/** The caller-chosen session key, if the hooks settings allow it (else a refusal naming the setting). */
function requestedKey(given: string, agentId: string, explicitAgent: boolean, config: Config): string {
  const hooks = config.hooks;
  if (!hooks.allowRequestSessionKey) {
    throw new ApiError(
      "FORBIDDEN",
      "`sessionKey` is not accepted: hook runs get a fresh hook:<uuid> session unless hooks.allowRequestSessionKey is true",
    );
  }
  let key: string;
  try {
    key = canonicalizeSessionKey(given, config.session, agentId);
  } catch (error) {
    throw new ApiError(
      "INVALID_REQUEST",
      `\`sessionKey\`: ${error instanceof Error ? error.message : error}`,
    );
  }
  if (key === UNKNOWN_KEY) throw new ApiError("INVALID_REQUEST", `\`sessionKey\` ${given} is reserved`);
  const prefixes = hooks.allowedSessionKeyPrefixes;
  if (prefixes.length > 0 && !prefixes.some((p) => key.startsWith(p.trim().toLowerCase()))) {
    throw new ApiError(
      "FORBIDDEN",
      `\`sessionKey\` ${key} is outside hooks.allowedSessionKeyPrefixes (${prefixes.join(", ")})`,
    );
  }
  const owner = agentIdOfKey(key);
  if (explicitAgent && owner && owner !== agentId) {
    throw new ApiError(
      "INVALID_REQUEST",
      `\`sessionKey\` ${key} belongs to agent ${owner}, not \`agentId\` ${agentId}`,
    );
  }
  return key;
}

/** Where the reply goes: the given channel/to, else (with `deliver: true`) the session's own route. */
function routeFor(
  body: z.output<typeof AgentHook>,
  entry: SessionRow | undefined,
  key: string,
  config: Config,
): DeliveryRoute | undefined {
  if (body.channel !== undefined && body.to !== undefined) {
    if (body.deliver === false) return undefined;
    const { channel, connector } = connectorOf(config, body.channel, "INVALID_REQUEST");
    const accounts = accountIdsOf(connector);
    const accountId = normalizeAccountId(
      body.accountId ?? (connector.type === "webhook" ? undefined : connector.accountId),
    );
    if (accounts && !accounts.includes(accountId)) {
      throw new ApiError(
        "INVALID_REQUEST",
        `\`accountId\` "${accountId}" is not configured for connector "${channel}" (allowed: ${accounts.join(", ")})`,
      );
    }
    return { channel, to: body.to, accountId };
  }
  if (!body.deliver) return undefined;
  const route = entry?.deliveryContext;
  if (!route) {
    throw new ApiError(
      "INVALID_REQUEST",
      `\`deliver\` needs \`channel\` and \`to\`: session ${key} has no delivery route yet`,
    );
  }
  return route;
}

/** `completion` of a `waitForCompletion` answer. */
function completionOf(result: WaitResult) {
  return {
    status: result.status,
    runStatus: result.runStatus,
    delivered: result.delivery === "delivered",
    delivery: result.delivery ?? "pending",
    ...(result.reply !== undefined ? { reply: result.reply } : {}),
    ...(result.error !== undefined ? { error: result.error } : {}),
  };
}

async function waitFor(env: Env, sessionKey: string, runId: string) {
  const result = await actorFor(env, sessionKey).waitForRun(sessionKey, runId, WAIT_BOUND_MS);
  if ("ok" in result) throw actorError(result);
  return completionOf(result);
}

// The guard is per route: /hooks/inbound, beside these, is the bridge's, with its signatures.
export const hooks = new Hono<{ Bindings: Env }>()
  .post(SURFACE.hooksAgent.path, requireHooksToken(), async (c) => {
    const config = loadConfig(c.env);
    const body = parseInput(AgentHook, parseJsonBody(await c.req.text()));
    const agentId = agentFor(body.agentId, config);
    const scopedKey = body.idempotencyKey ? `hook:${body.idempotencyKey}` : undefined;
    const sessionKey = body.sessionKey
      ? requestedKey(body.sessionKey, agentId, body.agentId !== undefined, config)
      : hookSessionKey(scopedKey ? await stableUuid(`hook-session:${body.idempotencyKey}`) : undefined);

    const prior =
      body.idempotencyKey && scopedKey
        ? await priorRunOf(c.env, { given: body.idempotencyKey, scoped: scopedKey }, sessionKey)
        : undefined;
    if (prior) {
      const answer = { ok: true as const, runId: prior.runId, sessionKey: prior.sessionKey };
      if (!body.waitForCompletion) return c.json(answer);
      return c.json({ ...answer, completion: await waitFor(c.env, prior.sessionKey, prior.runId) });
    }

    const entry = body.sessionKey ? await getSession(c.env, sessionKey) : undefined;
    const route = routeFor(body, entry, sessionKey, config);
    const init = entry ? entryInitOf(entry) : { ...initFromKey(sessionKey, config), agentId };
    if (body.name) init.displayName = body.name;
    const runId = scopedKey ? await stableUuid(scopedKey) : crypto.randomUUID();
    const req: EnqueueRequest = {
      sessionKey,
      runId,
      trigger: "hook",
      inputs: [
        {
          text: body.message,
          provenance: { kind: "external_user", sourceTool: "hooks.agent" },
          timestamp: Date.now(),
        },
      ],
      deliver: route !== undefined,
      init,
      userInteraction: false,
      hasThread: false,
      hook: body.name ? { name: body.name } : {},
    };
    if (route) req.route = route;
    if (scopedKey) req.idempotencyKey = scopedKey;
    if (body.timeoutSeconds) req.timeoutSeconds = body.timeoutSeconds;
    const result = await actorFor(c.env, sessionKey).enqueue(req);
    if (!result.ok) throw actorError(result);
    const answer = { ok: true as const, runId: result.runId, sessionKey };
    if (!body.waitForCompletion) return c.json(answer);
    return c.json({ ...answer, completion: await waitFor(c.env, sessionKey, result.runId) });
  })
  .post(SURFACE.hooksWake.path, requireHooksToken(), async (c) => {
    const config = loadConfig(c.env);
    const body = parseInput(WakeHook, parseJsonBody(await c.req.text()));
    const agentId = agentFor(body.agentId, config);
    const sessionKey = agentMainKey(agentId, config.session);
    const entry = await getSession(c.env, sessionKey);
    const scopedKey = body.idempotencyKey ? `wake:${body.idempotencyKey}` : undefined;
    const prior =
      body.idempotencyKey && scopedKey
        ? await priorRunOf(c.env, { given: body.idempotencyKey, scoped: scopedKey }, sessionKey)
        : undefined;
    if (prior) return c.json({ ok: true, runId: prior.runId, sessionKey: prior.sessionKey });
    const req: EnqueueRequest = {
      sessionKey,
      runId: scopedKey ? await stableUuid(scopedKey) : crypto.randomUUID(),
      trigger: "hook",
      inputs: [
        {
          text: body.text,
          provenance: { kind: "internal_system", sourceTool: "hooks.wake" },
          timestamp: Date.now(),
        },
      ],
      // The main session's reply goes to its own chat route, when it has one.
      deliver: true,
      init: entry ? entryInitOf(entry) : { agentId, kind: "main", chatType: "direct", channel: null },
      userInteraction: false,
      hasThread: false,
      hook: { wake: true },
    };
    if (scopedKey) req.idempotencyKey = scopedKey;
    const result = await actorFor(c.env, sessionKey).enqueue(req);
    if (!result.ok) throw actorError(result);
    return c.json({ ok: true, runId: result.runId, sessionKey });
  });
