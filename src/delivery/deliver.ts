/**
 * Outbound delivery to a connector (SPEC §14): the payload is POSTed to the connector's
 * `deliverUrl`, signed like inbound webhooks. Non-2xx and network failures are retried by the
 * caller with capped exponential backoff; `deliveryId` lets the connector drop duplicates.
 */

import { SIGNATURE_HEADER, signBody } from "../auth/signature";
import { ownEntry } from "../config/lookup";
import type { Config } from "../config/schema";

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
}

export type DeliveryAttempt = { ok: true } | { ok: false; error: string };

/** One POST to a connector gives up after this long (it runs in the background of the actor). */
export const ATTEMPT_TIMEOUT_MS = 15_000;

export async function postDelivery(
  payload: DeliveryPayload,
  config: Config,
  env: Env,
): Promise<DeliveryAttempt> {
  const connector = ownEntry(config.connectors, payload.channel);
  if (!connector?.deliverUrl) {
    return {
      ok: false,
      error: `no deliverUrl configured for channel "${payload.channel}" (connectors.${payload.channel})`,
    };
  }
  const secret = (env as unknown as Record<string, unknown>)[connector.secretEnv];
  if (typeof secret !== "string" || !secret) {
    return { ok: false, error: `connector secret ${connector.secretEnv} is not set` };
  }
  const body = JSON.stringify(payload);
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

/** Delay before attempt `attempt + 1`, after `attempt` failures. */
export function retryDelayMs(attempt: number, cfg: Config["delivery"]): number {
  return Math.min(cfg.baseDelayMs * 2 ** Math.max(0, attempt - 1), cfg.maxDelayMs);
}
