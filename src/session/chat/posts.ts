/**
 * What a session posts to its chat: the decision for a finished run (pure `outboundOf`), and a
 * delivery made outside a run (notices, announcements), handed to the actor's outbox under send
 * policy (SPEC §9, §14); the outbox keeps each attempt's outcome until a write of the actor
 * records it in D1.
 */
import type { DeliveryContext } from "../../db/json-columns";
import type { SessionRow } from "../../db/queries";
import type { DeliveryKind, DeliveryPayload } from "../../delivery/deliver";
import type { DeliveryOutbox } from "../../delivery/outbox";
import type { EnqueueRequest, RunOutcome } from "../../runs/types";
import { type TranscriptMessage, textOf } from "../../transcript/message";
import type { ActorRecords } from "../d1/records";
import { announceReply } from "../flows/plans";
import type { LiveRun } from "../run/live";

/** What posting to the chat uses of the actor: its outbox and the scheduler. */
export interface PostHost {
  readonly outbox: Pick<DeliveryOutbox, "payload" | "add" | "attemptWithin">;
  /** Sets the alarm for what is due (the delivery just added). */
  schedule(): Promise<void>;
}

/** What a session posts to its chat: a reply, an announcement or a notice. */
export interface ChatPost {
  kind: DeliveryKind;
  text: string;
}

export const RUN_FAILED_NOTICE =
  "⚠️ Sorry, something went wrong and I could not answer. Please try again later.";

/**
 * Whether a run's reply goes to its chat as a reply: not an agent's run (a send, a reply-back or
 * announce step, a sub-agent's task), whose reply goes back to the agent or is an announcement.
 */
export function repliesToChat(req: EnqueueRequest): boolean {
  return req.deliver && !req.flow && !req.spawn;
}

/** What a finished run posts to its chat, if anything. */
export function outboundOf(req: EnqueueRequest, outcome: RunOutcome): ChatPost | undefined {
  if (req.flow?.phase === "announce") {
    const text = announceReply(outcome);
    return text ? { kind: "announce", text } : undefined;
  }
  if (!repliesToChat(req)) return undefined;
  if (req.compact) {
    return outcome.status === "ok"
      ? { kind: "notice", text: outcome.reply ?? "Compacted." }
      : outcome.status === "error"
        ? { kind: "notice", text: "⚠️ Compaction failed; the conversation is unchanged." }
        : undefined;
  }
  if (outcome.status === "ok") return outcome.reply ? { kind: "reply", text: outcome.reply } : undefined;
  // A budget reached (SPEC §21): the chat hears which, once per session and day (run/budget.ts).
  if (outcome.status === "budget_exceeded")
    return {
      kind: "notice",
      text: outcome.error ?? "⚠️ A budget is used up; I cannot answer until it resets.",
    };
  // The chat hears that the run failed, not why: a cause can name hosts, keys or internals.
  // The operator reads it in runs.get and the logs.
  if (outcome.status === "error") return { kind: "notice", text: RUN_FAILED_NOTICE };
  return undefined;
}

/**
 * `verboseLevel` (SPEC §3): what a chat hears of a run's tool activity, as notices posted while
 * the run goes on. `off` (default): nothing. `on`: the tool's name and whether it failed.
 * `full`: also its arguments and the start of its result (cut; tool output can be long).
 */
export function toolNotice(
  level: string | null | undefined,
  call: { name: string; arguments: unknown } | undefined,
  result: TranscriptMessage,
): string | undefined {
  if (level !== "on" && level !== "full") return undefined;
  const name = result.toolName ?? call?.name ?? "tool";
  const failed = result.isError ? " failed" : "";
  if (level === "on") return `🔧 ${name}${failed}`;
  const args = clip(JSON.stringify(call?.arguments ?? {}), 200);
  return `🔧 ${name}(${args})${failed} → ${clip(textOf(result), 300)}`;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/**
 * A delivery made while a run goes on (tool notices): written, then attempted at once so that
 * it reaches the chat before the run's reply, waiting for the connector at most
 * NOTICE_WAIT_MS; a late or failed attempt is left to the outbox.
 */
const NOTICE_WAIT_MS = 1_000;

export async function postNow(
  a: PostHost,
  deliveryId: string,
  out: ChatPost,
  route: DeliveryContext,
  entry: SessionRow | undefined,
  sessionKey: string,
): Promise<void> {
  if (!(await queueDelivery(a, deliveryId, out, route, entry, sessionKey))) return;
  await a.outbox.attemptWithin(deliveryId, NOTICE_WAIT_MS);
}

/** Adds the delivery's row to the outbox and sets the alarm for it; false when send policy blocked it. */
export async function queueDelivery(
  a: PostHost,
  deliveryId: string,
  out: ChatPost,
  route: DeliveryContext & { replyToMessageId?: string },
  entry: SessionRow | undefined,
  sessionKey: string,
): Promise<boolean> {
  const payload = a.outbox.payload(deliveryId, out, route, entry, sessionKey);
  if (!payload) return false;
  a.outbox.add(payload);
  await a.schedule();
  return true;
}

/**
 * Queues a settled delivery again (the operator's `deliveries.retry`): a fresh round of
 * `delivery.maxAttempts` attempts. Idempotent: a delivery still owed here is left alone.
 */
export async function requeueDelivery(
  a: {
    readonly live: Pick<LiveRun, "current">;
    readonly outbox: Pick<DeliveryOutbox, "owes" | "add" | "dispatch">;
    readonly records: Pick<ActorRecords, "deliveryRequeued">;
    schedule(): Promise<void>;
  },
  payload: DeliveryPayload,
): Promise<{ requeued: boolean }> {
  if (a.outbox.owes(payload.deliveryId)) return { requeued: false };
  // Marked pending before the row can be attempted, so an attempt's outcome always lands after.
  await a.records.deliveryRequeued(payload, Date.now());
  a.outbox.add(payload);
  a.outbox.dispatch();
  if (!a.live.current) await a.schedule();
  return { requeued: true };
}
