/**
 * `POST /hooks/inbound/:channel` (SPEC §4, §14): the signed bridge. Verify the signature →
 * validate → the inbound pipeline (inbound-pipeline.ts) → 202. Never waits for the model.
 * Dedupe happens in the actor: the run id is derived from (channel, accountId, messageId).
 */
import { Hono } from "hono";
import { SIGNATURE_HEADER, verifySignature } from "../auth/signature";
import { loadConfig } from "../config/load";
import { ownEntry } from "../config/lookup";
import { InboundMessage } from "../connectors/inbound-message";
import { ApiError, parseInput, parseJsonBody } from "../http/errors";
import { SURFACE } from "../http/surface";
import { normalizeAccountId, normalizeChannel } from "../keys/ids";
import { acceptInbound } from "./inbound-pipeline";

export const inbound = new Hono<{ Bindings: Env }>().post(SURFACE.bridge.path, async (c) => {
  const config = loadConfig(c.env);
  const channel = normalizeChannel(c.req.param("channel"));
  const connector = ownEntry(config.connectors, channel);
  // Nothing before the signature check tells the caller about the config: not the other
  // connectors, not the name of the missing secret (the status RPC and the logs do).
  if (!connector) {
    throw new ApiError("NOT_FOUND", `unknown channel "${channel}": no connector is configured for it`);
  }
  if (connector.type !== "webhook") {
    throw new ApiError(
      "NOT_FOUND",
      `connector "${channel}" is a ${connector.type} connector: its webhook is POST /connectors/${channel}`,
    );
  }
  const secret = (c.env as unknown as Record<string, unknown>)[connector.secretEnv];
  if (typeof secret !== "string" || !secret) {
    console.error(
      `connector "${channel}" refused a request: its secret ${connector.secretEnv} is not set (wrangler secret put ${connector.secretEnv}, or .dev.vars locally)`,
    );
    throw new ApiError(
      "UNAVAILABLE",
      `connector "${channel}" is disabled until its secret is set (connectors.${channel}.secretEnv)`,
    );
  }
  const raw = await c.req.text();
  const check = await verifySignature(secret, c.req.header(SIGNATURE_HEADER), raw);
  if (!check.ok) throw new ApiError("UNAUTHORIZED", check.reason);
  const msg = parseInput(InboundMessage, parseJsonBody(raw));

  const accountId = normalizeAccountId(msg.accountId);
  if (connector.accounts && !connector.accounts.map((a) => normalizeAccountId(a)).includes(accountId)) {
    throw new ApiError(
      "FORBIDDEN",
      `accountId "${accountId}" is not configured for connector "${channel}" (allowed: ${connector.accounts.join(", ")})`,
    );
  }
  const answer = await acceptInbound(c.env, config, channel, msg, {
    waitUntil: (work) => c.executionCtx.waitUntil(work),
  });
  return c.json(answer, 202);
});
