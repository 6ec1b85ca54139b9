/**
 * A SessionActor's delivery outbox (SPEC §14). This local table drives the attempts: due rows
 * are POSTed in the background (started by the actor's steps, at most MAX_IN_FLIGHT at once,
 * never awaited by it, so a connector that is down or slow never delays a run), failures are
 * rescheduled with capped exponential backoff and end `dead` after `delivery.maxAttempts`, and
 * each attempt's outcome is written to the D1 `deliveries` row that `deliveries.list` shows
 * (through `recordAttempt`, an upsert, so the owner decides how that row is written and the
 * order of the writes does not matter). A run's reply is attempted as soon as it is added and
 * waited for briefly: settled in time, its outcome goes into the run's finalize batch; late, it
 * records itself. Send policy (SPEC §9) is decided here, when a delivery is made.
 */
import type { Config } from "../config/schema";
import type { DeliveryContext, SessionRow } from "../db/queries";
import { chatTypeOfKey } from "../keys/session-key";
import { evaluateSendPolicy, sessionChannel } from "../policy/send-policy";
import { DurableDocumentError } from "../runs/durable";
import {
  ATTEMPT_TIMEOUT_MS,
  type DeliveryAttempt,
  type DeliveryKind,
  type DeliveryPayload,
  postDelivery,
  retryDelayMs,
} from "./deliver";
import { deliveryPayloadCodec } from "./schemas";

interface OutboxRow {
  delivery_id: string;
  payload: string;
  attempts: number;
  next_at: number;
  [key: string]: SqlStorageValue;
}

/** Attempts one actor keeps in flight at once. */
const MAX_IN_FLIGHT = 4;
/** How long an attempt in flight holds its row: past the attempt's own timeout. */
const LEASE_MS = ATTEMPT_TIMEOUT_MS + 5_000;

export class DeliveryOutbox {
  private readonly inFlight = new Map<string, InFlight>();
  /**
   * False after an attempt failed or was too slow to wait for, until one succeeds: a run then
   * does not wait for the connector at all.
   */
  private healthy = true;
  /** Rows in the table, once counted: an empty outbox costs its alarm no query. */
  private rows: number | undefined;

  static readonly DDL = `CREATE TABLE IF NOT EXISTS outbox (
    delivery_id TEXT PRIMARY KEY, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_at INTEGER NOT NULL)`;

  constructor(
    private readonly sql: SqlStorage,
    private readonly env: () => Env,
    private readonly config: () => Config,
    private readonly recordAttempt: (payload: DeliveryPayload, state: AttemptState) => Promise<void>,
    /** Called when an attempt has settled (the owner sets its alarm for what is left). */
    private readonly onSettled: () => void,
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
        // The channel it goes out on: a direct chat's current one, a group's own (sessionChannel).
        channel: entry
          ? (sessionChannel({ ...entry, lastChannel: route.channel }) ?? route.channel)
          : route.channel,
        chatType,
        thread,
        override: entry?.sendPolicy,
      },
      this.config().session.sendPolicy,
    );
    if (verdict === "deny") return undefined;
    return payloadOf({ deliveryId, kind: out.kind, sessionKey, text: out.text, ...route });
  }

  /** Adds the local retry row; adding the same delivery twice is a no-op. */
  add(payload: DeliveryPayload): void {
    this.insert(payload, Date.now());
  }

  /**
   * Adds the local retry row and attempts it at once, waiting at most `waitMs` (see
   * attemptWithin). The row is written already holding its attempt's lease, so the attempt
   * costs no second write; a delivery added before is attempted as attemptWithin does.
   */
  async addAndAttempt(payload: DeliveryPayload, waitMs: number): Promise<AttemptState | undefined> {
    const json = deliveryPayloadCodec.encode(payload);
    const leased = Date.now() + LEASE_MS;
    if (!this.insert(payload, leased, json)) return this.attemptWithin(payload.deliveryId, waitMs);
    const row: OutboxRow = { delivery_id: payload.deliveryId, payload: json, attempts: 0, next_at: leased };
    return this.wait(this.start(row, true, true), waitMs);
  }

  private insert(
    payload: DeliveryPayload,
    nextAt: number,
    json = deliveryPayloadCodec.encode(payload),
  ): boolean {
    // RETURNING says whether the row was added (`rowsWritten` counts the key's index entry too).
    const added = this.sql
      .exec(
        `INSERT OR IGNORE INTO outbox (delivery_id, payload, attempts, next_at) VALUES (?, ?, 0, ?)
         RETURNING delivery_id`,
        payload.deliveryId,
        json,
        nextAt,
      )
      .toArray().length;
    if (this.rows !== undefined) this.rows += added;
    return added > 0;
  }

  /** How many deliveries are owed here (counted once, then kept as rows are added and removed). */
  private owed(): number {
    this.rows ??= this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM outbox`).one().n;
    return this.rows;
  }

  /** Whether a delivery is owed here: its row is in the table, or an attempt is in flight. */
  owes(deliveryId: string): boolean {
    if (this.inFlight.has(deliveryId)) return true;
    return this.sql.exec(`SELECT 1 FROM outbox WHERE delivery_id = ?`, deliveryId).toArray().length > 0;
  }

  /** When the next attempt is due, if any delivery is owed (an attempt in flight holds a lease). */
  nextDue(): number | undefined {
    if (this.owed() === 0) return undefined;
    const next = this.sql.exec<{ n: number | null }>(`SELECT MIN(next_at) AS n FROM outbox`).toArray()[0]?.n;
    return next ?? undefined;
  }

  /**
   * Starts the due attempts in the background, at most MAX_IN_FLIGHT at a time, and returns at
   * once: a connector that is slow or down never holds up the actor's runs. Each attempt
   * records its own outcome when it settles, then the actor's alarm is set for what is left.
   */
  dispatch(): void {
    const room = MAX_IN_FLIGHT - this.inFlight.size;
    // Every row here is in flight already (a run's reply just attempted): nothing to start.
    if (room <= 0 || this.owed() <= this.inFlight.size) return;
    const due = this.sql
      .exec<OutboxRow>(
        `SELECT * FROM outbox WHERE next_at <= ? ORDER BY next_at LIMIT ?`,
        Date.now(),
        MAX_IN_FLIGHT,
      )
      .toArray()
      .filter((row) => !this.inFlight.has(row.delivery_id))
      .slice(0, room);
    for (const row of due) this.start(row, false);
  }

  /**
   * Attempts a delivery just added and waits at most `waitMs` for it (not at all when the
   * connector failed its last attempt). Settled in time, its state is returned and the caller
   * records it (a run's finalize batch writes the `deliveries` row once, with that outcome);
   * otherwise undefined, and the attempt goes on and records its own outcome.
   */
  async attemptWithin(deliveryId: string, waitMs: number): Promise<AttemptState | undefined> {
    if (this.inFlight.has(deliveryId)) return undefined;
    const row = this.sql
      .exec<OutboxRow>(`SELECT * FROM outbox WHERE delivery_id = ?`, deliveryId)
      .toArray()[0];
    if (!row) return undefined;
    return this.wait(this.start(row, true), waitMs);
  }

  /** Waits for an attempt at most `waitMs` (not at all while the connector is unhealthy). */
  private async wait(attempt: InFlight, waitMs: number): Promise<AttemptState | undefined> {
    const wait = this.healthy ? waitMs : 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        attempt.abandoned = true;
        // Too slow to wait for: the next runs do not wait, until an attempt succeeds.
        this.healthy = false;
        resolve(undefined);
      }, wait);
    });
    try {
      return await Promise.race([attempt.settled, late]);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  /**
   * One attempt in flight. Its row takes a lease first (`next_at` past the attempt's timeout),
   * so that an attempt lost with the process is made again after it. A waiter that stops
   * waiting marks it abandoned; it then records its outcome itself, before its row is updated,
   * so a failed record leaves the row to be attempted again (at least once; connectors drop
   * repeats by deliveryId).
   */
  private start(row: OutboxRow, waited: boolean, leased = false): InFlight {
    const id = row.delivery_id;
    if (!leased)
      this.sql.exec(`UPDATE outbox SET next_at = ? WHERE delivery_id = ?`, Date.now() + LEASE_MS, id);
    const attempt: InFlight = { abandoned: !waited, settled: Promise.resolve(undefined) };
    this.inFlight.set(id, attempt);
    attempt.settled = (async () => {
      try {
        const payload = deliveryPayloadCodec.decode(row.payload);
        // Each part of a split reply the platform accepts is recorded before the next is posted,
        // so no attempt posts it again.
        const result = await postDelivery(payload, this.config(), this.env(), (partsSent) =>
          this.sql.exec(
            `UPDATE outbox SET payload = ? WHERE delivery_id = ?`,
            deliveryPayloadCodec.encode({ ...payload, partsSent }),
            id,
          ),
        );
        this.healthy = result.ok;
        const state = this.stateAfter(row.attempts + 1, result);
        if (attempt.abandoned) await this.recordAttempt(payload, state);
        this.settleRow(id, state);
        return state;
      } catch (error) {
        console.error(`delivery ${id}: ${error instanceof Error ? error.message : String(error)}`);
        if (error instanceof DurableDocumentError && !error.newer) {
          // A payload no version can read is never attempted again (its D1 row keeps its state).
          this.settleRow(id, {
            status: "dead",
            attempts: row.attempts,
            updatedAt: Date.now(),
            nextAttemptAt: null,
            lastError: error.message,
          });
          return undefined;
        }
        // The outcome could not be recorded (or a newer deploy wrote the payload): the row is
        // attempted again after the usual backoff (at least once; connectors drop repeats by
        // deliveryId).
        const retryAt = Date.now() + retryDelayMs(row.attempts + 1, this.config().delivery);
        this.sql.exec(`UPDATE outbox SET next_at = ? WHERE delivery_id = ?`, retryAt, id);
        return undefined;
      } finally {
        this.inFlight.delete(id);
        this.onSettled();
      }
    })();
    return attempt;
  }

  private stateAfter(attempts: number, result: DeliveryAttempt): AttemptState {
    const config = this.config();
    const at = Date.now();
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
    if (result.permanent || attempts >= config.delivery.maxAttempts) {
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
    const nextAt = at + (result.retryAfterMs ?? retryDelayMs(attempts, config.delivery));
    return {
      status: "retrying",
      attempts,
      updatedAt: at,
      nextAttemptAt: nextAt,
      lastError: result.error,
      ...progress,
    };
  }

  /** The local row after an attempt: gone when settled, else rescheduled with capped backoff. */
  private settleRow(id: string, state: AttemptState): void {
    if (state.status === "retrying" && state.nextAttemptAt !== null) {
      this.sql.exec(
        `UPDATE outbox SET attempts = ?, next_at = ? WHERE delivery_id = ?`,
        state.attempts,
        state.nextAttemptAt,
        id,
      );
    } else {
      const removed = this.sql
        .exec(`DELETE FROM outbox WHERE delivery_id = ? RETURNING delivery_id`, id)
        .toArray().length;
      if (this.rows !== undefined) this.rows -= removed;
    }
  }
}

interface InFlight {
  /** Set when nobody waits for the outcome any more: the attempt records it itself. */
  abandoned: boolean;
  /** The attempt's state once its row is updated; undefined when recording it failed. */
  settled: Promise<AttemptState | undefined>;
}

/** A delivery's state after an attempt, as the `deliveries` row records it. */
export interface AttemptState {
  status: "delivered" | "retrying" | "dead";
  attempts: number;
  updatedAt: number;
  nextAttemptAt: number | null;
  lastError: string | null;
  deliveredAt?: number;
  /** Parts of a split reply the platform accepted so far. */
  partsSent?: number;
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
