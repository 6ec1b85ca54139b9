/**
 * zod schemas of a delivery's payload and its latest attempt's outcome as the outbox keeps them
 * in Durable Object storage and a run's checkpoint keeps them (see runs/durable.ts). Pure.
 */
import { z } from "zod";
import { durableCodec } from "../runs/durable";
import type { AttemptState, DeliveryPayload } from "./deliver";

const str = z.string();

export const DeliveryPayloadSchema: z.ZodType<DeliveryPayload> = z.looseObject({
  deliveryId: str,
  kind: z.enum(["reply", "announce", "notice"]),
  sessionKey: str,
  channel: str,
  accountId: str,
  to: str,
  threadId: str.optional(),
  text: str,
  replyToMessageId: str.optional(),
  replyContext: str.optional(),
  partsSent: z.number().optional(),
  preview: z.strictObject({ messageId: str, edit: z.boolean() }).optional(),
});

/** An outbox row's payload. */
export const deliveryPayloadCodec = durableCodec("delivery payload", 1, DeliveryPayloadSchema);

export const AttemptStateSchema: z.ZodType<AttemptState> = z.looseObject({
  status: z.enum(["pending", "delivered", "retrying", "dead"]),
  attempts: z.number(),
  updatedAt: z.number(),
  nextAttemptAt: z.number().nullable(),
  lastError: str.nullable(),
  deliveredAt: z.number().optional(),
  partsSent: z.number().optional(),
});

/** An outbox row's outcome of its latest attempt, not recorded in D1 yet. */
export const attemptStateCodec = durableCodec("delivery outcome", 1, AttemptStateSchema);
