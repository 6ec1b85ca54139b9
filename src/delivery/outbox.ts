/**
 * A SessionActor's delivery outbox (SPEC §14), one row per delivery from the moment it is owed
 * until D1 shows how it ended. The row drives the attempts: due rows are POSTed in the
 * background (started by the actor's scheduler, at most MAX_IN_FLIGHT at once, never awaited by
 * it, so a connector that is down or slow never delays a run), failures are rescheduled with
 * capped exponential backoff and end `dead` after `delivery.maxAttempts`. Each attempt's
 * outcome is kept on the row (`state`, not recorded yet) until a D1 write of the actor carries
 * it to the `deliveries` row that `deliveries.list` shows: the session's next write, or one of
 * its own once OUTCOME_RECORD_DELAY_MS has passed (the owner's `OutcomeLedger`, whose due time
 * `nextDue` gives the actor's alarm). A settled delivery's row leaves once its outcome is
 * recorded. A run's reply is attempted as soon as it is added and waited for briefly, so its
 * run can answer its waiters with that attempt's outcome. Send policy (SPEC §9) is decided when a
 * delivery is made (rows.ts).
 *
 *   row       next_at               done  state
 *   owed      when to attempt next  0     null, or the last outcome (retrying) not recorded yet
 *   settled   -                     1     delivered or dead, not recorded yet (leaves when it is)
 */
import type { Config } from "../config/schema";
import type { DeliveryContext } from "../db/json-columns";
import type { SessionRow } from "../db/queries";
import { DurableDocumentError } from "../runs/durable";
import { within } from "../time/waits";
import { pendingState, stateAfter } from "./attempt-state";
import {
  ATTEMPT_TIMEOUT_MS,
  type AttemptState,
  type DeliveryKind,
  type DeliveryPayload,
  postDelivery,
  retryDelayMs,
} from "./deliver";
import { deliveryUnderPolicy } from "./rows";
import { attemptStateCodec, deliveryPayloadCodec } from "./schemas";

export type { AttemptState };

interface OutboxRow {
  delivery_id: string;
  payload: string;
  attempts: number;
  next_at: number;
  /** 1 once the delivery is settled (delivered or dead): no attempt is made any more. */
  done: number;
  /** The latest attempt's outcome (an AttemptState) D1 does not show yet. */
  state: string | null;
  /** Counts changes of `state`, so a record of an older one never clears a newer one. */
  state_v: number;
  /** When `state` is to be written alone, if no other write carries it first. */
  record_at: number | null;
  /** When the delivery was made (null in rows of earlier versions). */
  created_at: number | null;
  [key: string]: SqlStorageValue;
}

/** An attempt's outcome D1 does not show yet, as the owner writes it (`deliveries` row and state). */
export interface UnrecordedOutcome {
  deliveryId: string;
  payload: DeliveryPayload;
  state: AttemptState;
  createdAt: number;
  /** The row's `state_v` when read. */
  version: number;
}

/**
 * The longest a delivered outcome waits for another write of the session to carry it to D1
 * before it is due to be written alone: a conversation's next run usually carries it. A failed
 * attempt (retrying, dead) is due at once, so an operator sees a delivery in trouble.
 */
export const OUTCOME_RECORD_DELAY_MS = 60_000;

/** Attempts one actor keeps in flight at once. */
const MAX_IN_FLIGHT = 4;
/** How long an attempt in flight holds its row: past the attempt's own timeout. */
const LEASE_MS = ATTEMPT_TIMEOUT_MS + 5_000;

type DueTimes = { attempt: number | null; record: number | null };

export class DeliveryOutbox {
  private readonly inFlight = new Map<string, InFlight>();
  /**
   * False after an attempt failed or was too slow to wait for, until one succeeds: a run then
   * does not wait for the connector at all.
   */
  private healthy = true;
  /**
   * The next attempt due and the next outcome due, as last read: the actor's scheduler asks for
   * them several times a message (7 of its 29 statements), and this instance is the table's
   * only writer, so every write forgets them (`write`). Kept for 3% of workerd CPU per message
   * or more (npm run ab, docs/decisions.md "CPU per message and per read").
   */
  private due: DueTimes | undefined;

  constructor(
    private readonly sql: SqlStorage,
    private readonly env: () => Env,
    private readonly config: () => Config,
    /** Called when an attempt has settled (the owner sets its alarm for what is left). */
    private readonly onSettled: () => void,
  ) {}

  /** The delivery to make, or undefined when send policy blocks it (see `deliveryUnderPolicy`). */
  payload(
    deliveryId: string,
    out: { kind: DeliveryKind; text: string },
    route: DeliveryContext & { replyToMessageId?: string },
    entry: SessionRow | undefined,
    sessionKey: string,
  ): DeliveryPayload | undefined {
    return deliveryUnderPolicy(this.config().session.sendPolicy, deliveryId, out, route, entry, sessionKey);
  }

  /**
   * Adds the local retry row, due at once or at `at` (a streamed reply keeping its chat's pace);
   * adding the same delivery twice is a no-op.
   */
  add(payload: DeliveryPayload, at?: number): void {
    const now = Date.now();
    this.insert(payload, Math.max(now, at ?? now), now);
  }

  /**
   * Adds the local retry row and attempts it at once, waiting at most `waitMs` (see
   * attemptWithin). The row is written already holding its attempt's lease, so the attempt
   * costs no second write; a delivery added before is attempted as attemptWithin does.
   */
  async addAndAttempt(payload: DeliveryPayload, waitMs: number): Promise<AttemptState | undefined> {
    const json = deliveryPayloadCodec.encode(payload);
    const now = Date.now();
    const leased = now + LEASE_MS;
    if (!this.insert(payload, leased, now, json)) return this.attemptWithin(payload.deliveryId, waitMs);
    const row: OutboxRow = {
      delivery_id: payload.deliveryId,
      payload: json,
      attempts: 0,
      next_at: leased,
      done: 0,
      state: null,
      state_v: 0,
      record_at: null,
      created_at: now,
    };
    return this.wait(this.start(row, true, true), waitMs, payload.deliveryId);
  }

  private insert(
    payload: DeliveryPayload,
    nextAt: number,
    createdAt: number,
    json = deliveryPayloadCodec.encode(payload),
  ): boolean {
    // RETURNING says whether the row was added.
    const added = this.write(
      `INSERT OR IGNORE INTO outbox (delivery_id, payload, attempts, next_at, created_at) VALUES (?, ?, 0, ?, ?)
         RETURNING delivery_id`,
      payload.deliveryId,
      json,
      nextAt,
      createdAt,
    ).toArray().length;
    return added > 0;
  }

  /** Whether a delivery is owed here: its row waits for an attempt, or an attempt is in flight. */
  owes(deliveryId: string): boolean {
    if (this.inFlight.has(deliveryId)) return true;
    return (
      this.sql.exec(`SELECT 1 FROM outbox WHERE delivery_id = ? AND done = 0`, deliveryId).toArray().length >
      0
    );
  }

  /**
   * When the outbox next needs the actor: the next attempt due (an attempt in flight holds a
   * lease), or an outcome due to be recorded.
   */
  nextDue(): number | undefined {
    const { attempt, record } = this.dueTimes();
    if (attempt === null) return record ?? undefined;
    return record === null ? attempt : Math.min(attempt, record);
  }

  private dueTimes(): DueTimes {
    this.due ??= this.sql
      .exec<DueTimes>(
        `SELECT MIN(CASE WHEN done = 0 THEN next_at END) AS attempt, MIN(record_at) AS record FROM outbox`,
      )
      .one();
    return this.due;
  }

  /** A write of the table; what `dueTimes` read is read again after it. */
  private write<T extends Record<string, SqlStorageValue>>(
    query: string,
    ...params: SqlStorageValue[]
  ): SqlStorageCursor<T> {
    this.due = undefined;
    return this.sql.exec<T>(query, ...params);
  }

  // --- the outcomes D1 does not show yet (the owner's OutcomeLedger) ---------------------------

  unrecorded(): UnrecordedOutcome[] {
    if (this.dueTimes().record === null) return [];
    return this.sql
      .exec<OutboxRow>(`SELECT * FROM outbox WHERE state IS NOT NULL ORDER BY record_at`)
      .toArray()
      .map((row) => ({
        deliveryId: row.delivery_id,
        payload: deliveryPayloadCodec.decode(row.payload),
        state: attemptStateCodec.decode(row.state as string),
        createdAt: row.created_at ?? Date.now(),
        version: row.state_v,
      }));
  }

  /** D1 shows these outcomes: a settled delivery's row leaves, an owed one keeps attempting. */
  recorded(outcomes: readonly UnrecordedOutcome[]): void {
    for (const o of outcomes) {
      const removed = this.write(
        `DELETE FROM outbox WHERE delivery_id = ? AND state_v = ? AND done = 1 RETURNING delivery_id`,
        o.deliveryId,
        o.version,
      ).toArray().length;
      if (removed) continue;
      this.write(
        `UPDATE outbox SET state = NULL, record_at = NULL WHERE delivery_id = ? AND state_v = ?`,
        o.deliveryId,
        o.version,
      );
    }
  }

  /** D1 refused these outcomes: written again no sooner than `at`. */
  postpone(outcomes: readonly UnrecordedOutcome[], at: number): void {
    for (const o of outcomes)
      this.write(
        `UPDATE outbox SET record_at = MAX(COALESCE(record_at, 0), ?) WHERE delivery_id = ? AND state IS NOT NULL`,
        at,
        o.deliveryId,
      );
  }

  /** When the oldest outcome D1 does not show yet is due to be written alone. */
  recordDue(): number | undefined {
    return this.dueTimes().record ?? undefined;
  }

  /**
   * Starts the due attempts in the background, at most MAX_IN_FLIGHT at a time, and returns at
   * once: a connector that is slow or down never holds up the actor's runs. Each attempt
   * records its own outcome when it settles, then the actor's alarm is set for what is left.
   */
  dispatch(): void {
    const room = MAX_IN_FLIGHT - this.inFlight.size;
    // Every row here is in flight already (a run's reply just attempted), or none is due yet:
    // nothing to start.
    const next = this.dueTimes().attempt;
    if (room <= 0 || next === null || next > Date.now()) return;
    const due = this.sql
      .exec<OutboxRow>(
        `SELECT * FROM outbox WHERE done = 0 AND next_at <= ? ORDER BY next_at LIMIT ?`,
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
   * connector failed its last attempt): its state once settled in time, otherwise undefined
   * (the attempt goes on). A delivery settled before answers its outcome (a run's finalize
   * re-entered after a restart).
   */
  async attemptWithin(deliveryId: string, waitMs: number): Promise<AttemptState | undefined> {
    if (this.inFlight.has(deliveryId)) return undefined;
    const row = this.sql
      .exec<OutboxRow>(`SELECT * FROM outbox WHERE delivery_id = ?`, deliveryId)
      .toArray()[0];
    if (!row) return undefined;
    if (row.done) return row.state ? attemptStateCodec.decode(row.state) : undefined;
    return this.wait(this.start(row, true), waitMs, deliveryId);
  }

  /**
   * Waits for an attempt at most `waitMs` (not at all while the connector is unhealthy). An
   * attempt too slow to wait for is a delivery in trouble: recorded as `pending` at once (its
   * outcome replaces that when it settles).
   */
  private async wait(attempt: InFlight, waitMs: number, id: string): Promise<AttemptState | undefined> {
    const settled = await within(attempt.settled, this.healthy ? waitMs : 0);
    if (settled || !this.inFlight.has(id)) return settled;
    attempt.abandoned = true;
    // Too slow to wait for: the next runs do not wait, until an attempt succeeds.
    this.healthy = false;
    this.markPending(id);
    return undefined;
  }

  /** A delivery whose attempt is under way and has no outcome yet is recorded as pending, now. */
  private markPending(id: string): void {
    const now = Date.now();
    const state = pendingState(now);
    this.write(
      `UPDATE outbox SET state = ?, state_v = state_v + 1, record_at = ? WHERE delivery_id = ? AND state IS NULL`,
      attemptStateCodec.encode(state),
      now,
      id,
    );
  }

  /**
   * One attempt in flight. Its row takes a lease first (`next_at` past the attempt's timeout),
   * so that an attempt lost with the process is made again after it (at least once; connectors
   * drop repeats by deliveryId). Its outcome is kept on the row for the owner to record.
   */
  private start(row: OutboxRow, waited: boolean, leased = false): InFlight {
    const id = row.delivery_id;
    if (!leased) {
      this.write(`UPDATE outbox SET next_at = ? WHERE delivery_id = ?`, Date.now() + LEASE_MS, id);
    }
    const attempt: InFlight = { abandoned: !waited, settled: Promise.resolve(undefined) };
    this.inFlight.set(id, attempt);
    attempt.settled = (async () => {
      try {
        const payload = deliveryPayloadCodec.decode(row.payload);
        // Each part of a split reply the platform accepts is recorded before the next is posted,
        // so no attempt posts it again.
        const result = await postDelivery(payload, this.config(), this.env(), (partsSent) =>
          this.write(
            `UPDATE outbox SET payload = ? WHERE delivery_id = ?`,
            deliveryPayloadCodec.encode({ ...payload, partsSent }),
            id,
          ),
        );
        this.healthy = result.ok;
        const state = stateAfter(row.attempts + 1, result, this.config().delivery, Date.now());
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
        // A newer deploy wrote the payload: the row is attempted again after the usual backoff.
        const retryAt = Date.now() + retryDelayMs(row.attempts + 1, this.config().delivery);
        this.write(`UPDATE outbox SET next_at = ? WHERE delivery_id = ?`, retryAt, id);
        return undefined;
      } finally {
        this.inFlight.delete(id);
        this.onSettled();
      }
    })();
    return attempt;
  }

  /**
   * The row after an attempt, its outcome kept to be recorded (see OUTCOME_RECORD_DELAY_MS; an
   * outcome not recorded yet keeps its due time): settled, or rescheduled with capped backoff.
   */
  private settleRow(id: string, state: AttemptState): void {
    const json = attemptStateCodec.encode(state);
    const recordAt = Date.now() + (state.status === "delivered" ? OUTCOME_RECORD_DELAY_MS : 0);
    const owed = state.status === "retrying" && state.nextAttemptAt !== null;
    this.write(
      `UPDATE outbox SET done = ?1, attempts = ?2, next_at = COALESCE(?3, next_at), state = ?4,
         state_v = state_v + 1, record_at = MIN(COALESCE(record_at, ?5), ?5) WHERE delivery_id = ?6`,
      owed ? 0 : 1,
      state.attempts,
      owed ? state.nextAttemptAt : null,
      json,
      recordAt,
      id,
    );
  }
}

interface InFlight {
  /** Set when nobody waits for the outcome any more: the attempt records it itself. */
  abandoned: boolean;
  /** The attempt's state once its row is updated; undefined when recording it failed. */
  settled: Promise<AttemptState | undefined>;
}
