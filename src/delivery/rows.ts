/**
 * A delivery's shapes apart from the outbox: whether send policy lets it be made (SPEC §9), its
 * payload made from fields (a route, or a stored `deliveries` row to attempt it again), and its
 * D1 `deliveries` row. Pure.
 */
import type { Config } from "../config/schema";
import type { DeliveryContext } from "../db/json-columns";
import type { SessionRow } from "../db/queries";
import { chatTypeOfKey } from "../keys/session-key";
import { evaluateSendPolicy, sessionChannel } from "../policy/send-policy";
import type { DeliveryKind, DeliveryPayload } from "./deliver";

/**
 * The delivery to make, or undefined when send policy blocks it (the reply stays in the
 * transcript): judged on the channel it goes out on, a direct chat's current one or a group's
 * own (`sessionChannel`), and the session's override.
 */
export function deliveryUnderPolicy(
  policy: Config["session"]["sendPolicy"],
  deliveryId: string,
  out: { kind: DeliveryKind; text: string },
  route: DeliveryContext & { replyToMessageId?: string },
  entry: SessionRow | undefined,
  sessionKey: string,
): DeliveryPayload | undefined {
  const { chatType, thread } = chatTypeOfKey(sessionKey, !!route.threadId);
  const channel = entry
    ? (sessionChannel({ ...entry, lastChannel: route.channel }) ?? route.channel)
    : route.channel;
  const verdict = evaluateSendPolicy(
    { key: sessionKey, channel, chatType, thread, override: entry?.sendPolicy },
    policy,
  );
  if (verdict === "deny") return undefined;
  // A delivery is addressed where its connector posts (a Discord DM's channel, not its user), so
  // its `deliveries` row alone is enough to attempt it again (`deliveries.retry`).
  return payloadOf({
    deliveryId,
    kind: out.kind,
    sessionKey,
    text: out.text,
    ...route,
    to: route.postTo ?? route.to,
  });
}

/**
 * A delivery payload from its fields (a route, or a stored `deliveries` row: the payload it was
 * made from, to attempt it again), with the optional thread and reply fields only when set.
 */
export function payloadOf(f: {
  deliveryId: string;
  kind: string;
  sessionKey: string;
  channel: string;
  accountId: string;
  to: string;
  text: string;
  threadId?: string | null | undefined;
  replyToMessageId?: string | null | undefined;
  replyContext?: string | null | undefined;
  partsSent?: number | null | undefined;
}): DeliveryPayload {
  const payload: DeliveryPayload = {
    deliveryId: f.deliveryId,
    kind: f.kind as DeliveryKind,
    sessionKey: f.sessionKey,
    channel: f.channel,
    accountId: f.accountId,
    to: f.to,
    text: f.text,
  };
  if (f.threadId) payload.threadId = f.threadId;
  if (f.replyToMessageId) payload.replyToMessageId = f.replyToMessageId;
  if (f.replyContext) payload.replyContext = f.replyContext;
  if (f.partsSent) payload.partsSent = f.partsSent;
  return payload;
}

/** The D1 `deliveries` row of a delivery made at `now`. */
export function deliveryRow(p: DeliveryPayload, now = Date.now()) {
  return {
    deliveryId: p.deliveryId,
    kind: p.kind,
    sessionKey: p.sessionKey,
    runId: p.deliveryId.split(":")[0] ?? null,
    channel: p.channel,
    accountId: p.accountId,
    to: p.to,
    threadId: p.threadId ?? null,
    replyToMessageId: p.replyToMessageId ?? null,
    text: p.text,
    status: "pending",
    attempts: 0,
    nextAttemptAt: now,
    createdAt: now,
    updatedAt: now,
  };
}
