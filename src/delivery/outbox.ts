/**
 * A SessionActor's delivery outbox (SPEC §14). This local table drives the attempts: due rows
 * are POSTed on the actor's alarm, failures are rescheduled with capped exponential backoff and
 * end `dead` after `delivery.maxAttempts`, and each attempt's outcome is written to the D1
 * `deliveries` row that `deliveries.list` shows (through `recordAttempt`, so the owner decides
 * how that row is written). A run's reply is attempted as soon as it is
 * added, and its D1 row is first written with that attempt's outcome (the run's finalize
 * batch); other deliveries are written to D1 before they are added here. Send policy (SPEC §9)
 * is decided here, when a delivery is made.
 */
import type { Config } from "../config/schema";
import type { DeliveryContext, SessionRow } from "../db/queries";
import { chatTypeOfKey } from "../keys/session-key";
import { evaluateSendPolicy } from "../policy/send-policy";
import { type DeliveryKind, type DeliveryPayload, postDelivery, retryDelayMs } from "./deliver";

interface OutboxRow {
  delivery_id: string;
  payload: string;
  attempts: number;
  next_at: number;
  [key: string]: SqlStorageValue;
}

const FLUSH_BATCH = 20;

export class DeliveryOutbox {
  static readonly DDL = `CREATE TABLE IF NOT EXISTS outbox (
    delivery_id TEXT PRIMARY KEY, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_at INTEGER NOT NULL)`;

  constructor(
    private readonly sql: SqlStorage,
    private readonly env: () => Env,
    private readonly config: () => Config,
    private readonly recordAttempt: (deliveryId: string, state: AttemptState) => Promise<void>,
  ) {}

  /** The delivery to make, or undefined when send policy blocks it (the reply stays in the transcript). */
  payload(
    deliveryId: string,
    out: { kind: DeliveryKind; text: string },
    route: DeliveryContext & { replyToMessageId?: string },
    entry: SessionRow | undefined,
    sessionKey: string,
  ): DeliveryPayload | undefined {
    const { chatType, thread } = chatTypeOfKey(sessionKey, !!route.threadId);
    const verdict = evaluateSendPolicy(
      {
        key: sessionKey,
        channel: entry?.channel ?? route.channel,
        chatType,
        thread,
        override: entry?.sendPolicy,
      },
      this.config().session.sendPolicy,
    );
    if (verdict === "deny") return undefined;
    const payload: DeliveryPayload = {
      deliveryId,
      kind: out.kind,
      sessionKey,
      channel: route.channel,
      accountId: route.accountId,
      to: route.to,
      text: out.text,
    };
    if (route.threadId) payload.threadId = route.threadId;
    if (route.replyToMessageId) payload.replyToMessageId = route.replyToMessageId;
    return payload;
  }

  /** Adds the local retry row; adding the same delivery twice is a no-op. */
  add(payload: DeliveryPayload): void {
    this.sql.exec(
      `INSERT OR IGNORE INTO outbox (delivery_id, payload, attempts, next_at) VALUES (?, ?, 0, ?)`,
      payload.deliveryId,
      JSON.stringify(payload),
      Date.now(),
    );
  }

  /** When the next attempt is due, if any delivery is owed. */
  nextDue(): number | undefined {
    const next = this.sql.exec<{ n: number | null }>(`SELECT MIN(next_at) AS n FROM outbox`).toArray()[0]?.n;
    return next ?? undefined;
  }

  /**
   * Attempts every due delivery once; failures are rescheduled with capped backoff. Deliveries
   * of `ownedBy` (a run still being finalized, whose D1 row is not written yet) are left to it.
   */
  async flush(ownedBy?: string): Promise<void> {
    const prefix = ownedBy ? `${ownedBy}:` : "";
    const due = this.sql
      .exec<OutboxRow>(
        `SELECT * FROM outbox WHERE next_at <= ? AND (? = '' OR substr(delivery_id, 1, length(?)) != ?)
         ORDER BY next_at LIMIT ?`,
        Date.now(),
        prefix,
        prefix,
        prefix,
        FLUSH_BATCH,
      )
      .toArray();
    for (const row of due) {
      const state = await this.attemptRow(row);
      await this.recordAttempt(row.delivery_id, state);
    }
  }

  /**
   * Makes the first attempt of a delivery just added, so that the run's finalize batch can
   * write the `deliveries` row with its outcome instead of a second round trip after the POST.
   * Undefined when the row is gone (an earlier flush already settled it).
   */
  async attemptNow(deliveryId: string): Promise<AttemptState | undefined> {
    const row = this.sql
      .exec<OutboxRow>(`SELECT * FROM outbox WHERE delivery_id = ?`, deliveryId)
      .toArray()[0];
    return row ? this.attemptRow(row) : undefined;
  }

  /** One POST; the local row is removed when settled or rescheduled with capped backoff. */
  private async attemptRow(row: OutboxRow): Promise<AttemptState> {
    const config = this.config();
    const attempt = await postDelivery(JSON.parse(row.payload) as DeliveryPayload, config, this.env());
    const attempts = row.attempts + 1;
    const at = Date.now();
    if (attempt.ok || attempts >= config.delivery.maxAttempts) {
      this.sql.exec(`DELETE FROM outbox WHERE delivery_id = ?`, row.delivery_id);
      return attempt.ok
        ? {
            status: "delivered",
            attempts,
            deliveredAt: at,
            updatedAt: at,
            nextAttemptAt: null,
            lastError: null,
          }
        : { status: "dead", attempts, updatedAt: at, nextAttemptAt: null, lastError: attempt.error };
    }
    const nextAt = at + retryDelayMs(attempts, config.delivery);
    this.sql.exec(
      `UPDATE outbox SET attempts = ?, next_at = ? WHERE delivery_id = ?`,
      attempts,
      nextAt,
      row.delivery_id,
    );
    return { status: "retrying", attempts, updatedAt: at, nextAttemptAt: nextAt, lastError: attempt.error };
  }
}

/** A delivery's state after an attempt, as the `deliveries` row records it. */
export interface AttemptState {
  status: "delivered" | "retrying" | "dead";
  attempts: number;
  updatedAt: number;
  nextAttemptAt: number | null;
  lastError: string | null;
  deliveredAt?: number;
}

/** The D1 `deliveries` row of a new delivery. */
export function deliveryRow(p: DeliveryPayload) {
  const now = Date.now();
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
