/**
 * A delivery's state after an attempt, as its outbox row keeps it and its `deliveries` row
 * records it: delivered; dead (a platform's refusal, or `delivery.maxAttempts` spent); retrying
 * after the platform's own wait or the capped backoff; or pending (an attempt under way, slower
 * than its caller waited for). Pure.
 */
import type { Config } from "../config/schema";
import { type AttemptState, type DeliveryAttempt, retryDelayMs } from "./deliver";

/** The state an attempt that ended with `result` leaves, `attempts` counting it, at `at`. */
export function stateAfter(
  attempts: number,
  result: DeliveryAttempt,
  delivery: Config["delivery"],
  at: number,
): AttemptState {
  if (result.ok) {
    return {
      status: "delivered",
      attempts,
      deliveredAt: at,
      updatedAt: at,
      nextAttemptAt: null,
      lastError: null,
    };
  }
  const progress = result.partsSent ? { partsSent: result.partsSent } : {};
  // A platform's refusal is final; otherwise attempts run out after delivery.maxAttempts.
  if (result.permanent || attempts >= delivery.maxAttempts) {
    return {
      status: "dead",
      attempts,
      updatedAt: at,
      nextAttemptAt: null,
      lastError: result.error,
      ...progress,
    };
  }
  // A platform's own wait (a 429's retry-after) comes first; the backoff otherwise.
  const nextAt = at + (result.retryAfterMs ?? retryDelayMs(attempts, delivery));
  return {
    status: "retrying",
    attempts,
    updatedAt: at,
    nextAttemptAt: nextAt,
    lastError: result.error,
    ...progress,
  };
}

/** An attempt under way at `at`, slower than its caller waited for. */
export function pendingState(at: number): AttemptState {
  return { status: "pending", attempts: 0, updatedAt: at, nextAttemptAt: at, lastError: null };
}
