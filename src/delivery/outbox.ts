/**
 * A SessionActor's delivery outbox (SPEC §14). Every delivery is written to D1 first (the
 * `deliveries` row that `deliveries.list` shows), then to this local table, which drives the
 * attempts: due rows are POSTed on the actor's alarm, failures are rescheduled with capped
 * exponential backoff and end `dead` after `delivery.maxAttempts`. Send policy (SPEC §9) is
 * decided here, when a delivery is made.
 */
import type { Config } from "../config/schema";
import { type DeliveryContext, type SessionRow, updateDelivery } from "../db/queries";
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

  /** Adds the local retry row (after the D1 row exists); adding the same delivery twice is a no-op. */
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

  /** Attempts every due delivery once; failures are rescheduled with capped backoff. */
  async flush(): Promise<void> {
    const now = Date.now();
    const due = this.sql
      .exec<OutboxRow>(`SELECT * FROM outbox WHERE next_at <= ? ORDER BY next_at LIMIT ?`, now, FLUSH_BATCH)
      .toArray();
    const config = this.config();
    const env = this.env();
    for (const row of due) {
      const attempt = await postDelivery(JSON.parse(row.payload) as DeliveryPayload, config, env);
      const attempts = row.attempts + 1;
      const at = Date.now();
      if (attempt.ok) {
        this.sql.exec(`DELETE FROM outbox WHERE delivery_id = ?`, row.delivery_id);
        await updateDelivery(env, row.delivery_id, {
          status: "delivered",
          attempts,
          deliveredAt: at,
          updatedAt: at,
          nextAttemptAt: null,
          lastError: null,
        });
      } else if (attempts >= config.delivery.maxAttempts) {
        this.sql.exec(`DELETE FROM outbox WHERE delivery_id = ?`, row.delivery_id);
        await updateDelivery(env, row.delivery_id, {
          status: "dead",
          attempts,
          updatedAt: at,
          nextAttemptAt: null,
          lastError: attempt.error,
        });
      } else {
        const nextAt = at + retryDelayMs(attempts, config.delivery);
        this.sql.exec(
          `UPDATE outbox SET attempts = ?, next_at = ? WHERE delivery_id = ?`,
          attempts,
          nextAt,
          row.delivery_id,
        );
        await updateDelivery(env, row.delivery_id, {
          status: "retrying",
          attempts,
          updatedAt: at,
          nextAttemptAt: nextAt,
          lastError: attempt.error,
        });
      }
    }
  }
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
