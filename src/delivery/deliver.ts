/**
 * Outbound delivery to a connector: the signed bridge gets the payload POSTed to its
 * `deliverUrl`, signed like inbound webhooks (SPEC §14; `deliveryId` lets it drop duplicates);
 * a platform connector posts it through the platform's API (SPEC §18). Failures are retried by
 * the caller (the session outbox) with capped exponential backoff, or after the platform's wait.
 */

import { SIGNATURE_HEADER, signBody } from "../auth/signature";
import type { PlatformConnectorConfig } from "../config/connectors";
import { ownEntry } from "../config/lookup";
import type { Config } from "../config/schema";
import { accountWith } from "../connectors/registry";
import { splitText } from "../connectors/split";
import type { Outgoing, PreviewTarget } from "../connectors/types";
import { every } from "../time/waits";

export type DeliveryKind = "reply" | "announce" | "notice";

export interface DeliveryPayload {
  deliveryId: string;
  kind: DeliveryKind;
  sessionKey: string;
  channel: string;
  accountId: string;
  to: string;
  threadId?: string;
  text: string;
  replyToMessageId?: string;
  /** A platform connector's reply context (an interaction token): kept in the outbox, not in D1. */
  replyContext?: string;
  /** Parts of a split reply the platform has accepted already (a retry goes on from the next). */
  partsSent?: number;
  /**
   * The run's preview on the chat (SPEC §22): `edit`, the reply's first part is edited into it;
   * otherwise the preview is deleted and the reply posted. Kept in the outbox, not in D1.
   */
  preview?: { messageId: string; edit: boolean };
}

/**
 * How an attempt ended: sent; or to retry (after `retryAfterMs`, the platform's own wait, when
 * it gave one); or `permanent` (the platform refused it: dead at once, with its reason).
 * `partsSent`: the parts of a split reply the platform accepted, so a retry goes on from there.
 */
export type DeliveryAttempt =
  | { ok: true }
  | { ok: false; error: string; retryAfterMs?: number; permanent?: boolean; partsSent?: number };

/** One POST to a connector gives up after this long (it runs in the background of the actor). */
/** A delivery's state after an attempt, as the `deliveries` row records it. */
export interface AttemptState {
  /** `pending`: an attempt is under way, slower than its caller waited for. */
  status: "pending" | "delivered" | "retrying" | "dead";
  attempts: number;
  updatedAt: number;
  nextAttemptAt: number | null;
  lastError: string | null;
  deliveredAt?: number;
  /** Parts of a split reply the platform accepted so far. */
  partsSent?: number;
}

export const ATTEMPT_TIMEOUT_MS = 15_000;

/**
 * Makes one attempt of a delivery through its channel's connector: the signed bridge's
 * `deliverUrl` (SPEC §14), or the platform's API (SPEC §18). `onPart` records the parts of a
 * split reply a platform accepted, before the next is posted.
 */
export async function postDelivery(
  payload: DeliveryPayload,
  config: Config,
  env: Env,
  onPart: (partsSent: number) => void = () => {},
): Promise<DeliveryAttempt> {
  const connector = ownEntry(config.connectors, payload.channel);
  if (!connector) return { ok: false, error: `no connector is configured for channel "${payload.channel}"` };
  if (connector.type !== "webhook") return postToPlatform(payload, connector, env, onPart);
  if (!connector.deliverUrl) {
    return {
      ok: false,
      error: `no deliverUrl configured for channel "${payload.channel}" (connectors.${payload.channel})`,
    };
  }
  const secret = (env as unknown as Record<string, unknown>)[connector.secretEnv];
  if (typeof secret !== "string" || !secret) {
    return { ok: false, error: `connector secret ${connector.secretEnv} is not set` };
  }
  // The bridge gets SPEC §14's payload: what only the outbox and platforms use stays here.
  const { partsSent: _progress, replyContext: _context, preview: _preview, ...bridgePayload } = payload;
  const body = JSON.stringify(bridgePayload);
  try {
    const res = await fetch(connector.deliverUrl, {
      method: "POST",
      headers: { "content-type": "application/json", [SIGNATURE_HEADER]: await signBody(secret, body) },
      body,
      signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
    });
    // Drain the body so the connection can be reused.
    const text = await res.text().catch(() => "");
    if (res.ok) return { ok: true };
    return { ok: false, error: `connector answered ${res.status}${text ? `: ${text.slice(0, 200)}` : ""}` };
  } catch (error) {
    return {
      ok: false,
      error: `connector unreachable: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}

async function postToPlatform(
  payload: DeliveryPayload,
  connector: PlatformConnectorConfig,
  env: Env,
  onPart: (partsSent: number) => void,
): Promise<DeliveryAttempt> {
  const found = accountWith(connector, payload.accountId, env);
  if (!found) {
    return {
      ok: false,
      error: `connector "${payload.channel}" has no account "${payload.accountId}"`,
      permanent: true,
    };
  }
  if (found.missing.length) {
    // A secret can be set later: retried, not dead.
    return {
      ok: false,
      error: `connector "${payload.channel}" is missing the secret ${found.missing[0]?.env}`,
    };
  }
  const out: Outgoing = { to: payload.to, text: payload.text, partsSent: payload.partsSent ?? 0 };
  if (payload.threadId) out.threadId = payload.threadId;
  if (payload.replyToMessageId) out.replyToMessageId = payload.replyToMessageId;
  if (payload.replyContext) out.replyContext = payload.replyContext;
  const preview = found.module.preview;
  if (!payload.preview || !preview || out.partsSent > 0)
    return found.module.send(out, found.account, found.secrets, onPart);
  // The reply takes its preview's place: the first part edited into it, the rest posted. When
  // that edit fails (or the preview shows progress), the preview is deleted first and the whole
  // reply posted, so a retry never leaves it behind and never shows the reply twice.
  const target: PreviewTarget = { to: out.to };
  if (out.threadId) target.threadId = out.threadId;
  if (out.replyContext) target.replyContext = out.replyContext;
  const { messageId, edit } = payload.preview;
  if (edit) {
    const parts = splitText(out.text, found.module.maxChars);
    const shown = await preview.show(target, parts[0] ?? "", messageId, found.account, found.secrets);
    if (shown.ok) {
      if (parts.length === 1) return { ok: true };
      onPart(1);
      return found.module.send({ ...out, partsSent: 1 }, found.account, found.secrets, onPart);
    }
    console.warn(
      `the final edit of ${payload.deliveryId}'s preview failed (${shown.error}); posting it anew`,
    );
  }
  if (!(await preview.remove(target, messageId, found.account, found.secrets)))
    console.warn(`the preview of ${payload.deliveryId} could not be deleted`);
  return found.module.send(out, found.account, found.secrets, onPart);
}

/** How often a chat is shown that the agent is still at work. */
const ACTIVITY_EVERY_MS = 4_500;

/**
 * Shows a chat that the agent is at work on its reply, where its platform can (Telegram's
 * typing), until the returned function is called: at once, then every few seconds (the platform
 * shows it for about five). Best effort: a failure is logged, never a run's problem.
 */
export function showActivity(
  route: { channel: string; accountId: string; to: string; threadId?: string },
  config: Config,
  env: Env,
): () => void {
  const connector = ownEntry(config.connectors, route.channel);
  if (!connector || connector.type === "webhook") return () => {};
  const found = accountWith(connector, route.accountId, env);
  const activity = found?.module.activity;
  if (!found || !activity || found.missing.length) return () => {};
  const ping = () =>
    activity(route.to, route.threadId, found.account, found.secrets).catch((error) =>
      console.error(`activity on ${route.channel}: ${error instanceof Error ? error.message : error}`),
    );
  void ping();
  return every(ACTIVITY_EVERY_MS, ping);
}

/** Delay before attempt `attempt + 1`, after `attempt` failures. */
export function retryDelayMs(attempt: number, cfg: Config["delivery"]): number {
  return Math.min(cfg.baseDelayMs * 2 ** Math.max(0, attempt - 1), cfg.maxDelayMs);
}
