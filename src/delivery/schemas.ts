/**
 * zod schemas of a delivery's payload as the outbox keeps it in Durable Object
 * storage and a run's checkpoint keeps it (see runs/durable.ts). Pure.
 */
import { z } from "zod";
import { durableCodec } from "../runs/durable";
import type { DeliveryPayload } from "./deliver";

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
});

/** An outbox row's payload. */
export const deliveryPayloadCodec = durableCodec("delivery payload", 1, DeliveryPayloadSchema);
