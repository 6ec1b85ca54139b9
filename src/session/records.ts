/**
 * Everything a SessionActor reads from and writes to D1 (the session index, transcripts, runs
 * and deliveries), behind one interface named after what happened rather than which rows
 * change. Each write is one D1 round trip (a batch), idempotent by unique keys, so a repeated
 * step never duplicates rows. A later implementation can buffer these writes behind the actor
 * or route them to the D1 shard of the key without the actor's modules changing.
 */

import { appendMessageStatements, turnContextRows } from "../db/messages";
import {
  deleteSessionRows,
  getSession,
  insertDeliveryStatement,
  insertRunStatement,
  listSessions,
  recordDeliveryStatement,
  recordInboundStatement,
  recordTranscriptStatement,
  type SessionRow,
  startRunStatement,
  updateRunStatement,
  upsertSessionStatement,
  writeBatch,
} from "../db/queries";
import type { deliveries, runs } from "../db/schema";
import type { DeliveryPayload } from "../delivery/deliver";
import { type AttemptState, deliveryRow } from "../delivery/outbox";
import type { TranscriptMessage } from "../transcript/message";
import { closedAt } from "./entry";

export type RunRecord = typeof runs.$inferInsert;
export type RunEnd = Partial<Omit<RunRecord, "runId">>;
export type DeliveryRecord = typeof deliveries.$inferInsert;

export interface ActorRecords {
  /** The stored entry of a key (an actor learning its key loads what was written before it existed). */
  loadEntry(key: string): Promise<SessionRow | undefined>;
  /** A transcript's latest compaction entry and at most `limit` messages after it (see turnContextRows). */
  turnContext(
    sessionId: string,
    limit: number,
  ): Promise<{ compaction?: TranscriptMessage; messages: TranscriptMessage[] }>;
  /** Sessions spawned by `key`, archived or not (at most 200). */
  spawnedChildren(key: string): Promise<SessionRow[]>;

  /**
   * A run was accepted: the entry, its transcript id, the run row (queued; or running with its
   * input messages when it starts at once) and the inbound dedupe row.
   */
  runAccepted(a: {
    entry: SessionRow;
    run: RunRecord;
    starting?: TranscriptMessage[];
    inbound?: { channel: string; accountId: string; messageId: string };
  }): Promise<void>;
  /** A run started (or resumed): marked running, the entry shows it, its messages so far appended. */
  runStarted(a: {
    run: RunRecord & { startedAt: number };
    entry?: SessionRow;
    messages: TranscriptMessage[];
  }): Promise<void>;
  /** Messages appended to a transcript (idempotent by message id). */
  messagesAppended(sessionId: string, messages: TranscriptMessage[]): Promise<void>;
  /** A run ended: its last messages, its delivery with its first attempt, its outcome, the entry. */
  runFinished(a: {
    runId: string;
    sessionId: string;
    messages: TranscriptMessage[];
    delivery?: DeliveryRecord;
    end: RunEnd;
    entry?: SessionRow;
  }): Promise<void>;
  /** Runs that end outside a finalize: dropped from the queue before they started, or a compaction made inside a turn. */
  runsEnded(runIds: string[], end: RunEnd): Promise<void>;

  /** A new sessionId began under the entry's key (a new entry or a reset). */
  sessionStarted(entry: SessionRow, at: number): Promise<void>;
  /** The entry changed outside a run; `label-taken` when its label is another session's. */
  entryPatched(entry: SessionRow): Promise<"ok" | "label-taken">;
  sessionRemoved(key: string, deleteTranscript: boolean): Promise<void>;

  deliveryQueued(delivery: DeliveryRecord): Promise<void>;
  /** An attempt settled: the delivery's row gets its state (written whole if it is not yet). */
  deliveryAttempted(payload: DeliveryPayload, state: AttemptState): Promise<void>;
  /** A settled delivery was queued again: pending, with a fresh round of attempts (its last error kept). */
  deliveryRequeued(payload: DeliveryPayload, at: number): Promise<void>;
}

/** drizzle wraps D1 errors (`Failed query: …`), so the constraint message is down the cause chain. */
function isUniqueViolation(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (/UNIQUE constraint failed/i.test(e.message)) return true;
  }
  return false;
}

/** The entry as its D1 row: closed (`expiredAt`) once its expiry has passed, as the sweep writes it. */
function sessionStatement(e: Env, entry: SessionRow): D1PreparedStatement {
  return upsertSessionStatement(e, { ...entry, expiredAt: closedAt(entry, Date.now()) });
}

/** The records as direct D1 writes. `env` is read per call (tests rewire an actor's bindings). */
export function d1Records(env: () => Env): ActorRecords {
  return {
    loadEntry: (key) => getSession(env(), key),
    turnContext: (sessionId, limit) => turnContextRows(env(), sessionId, limit),
    spawnedChildren: (key) => listSessions(env(), { spawnedBy: key, archived: "all", limit: 200 }),

    async runAccepted({ entry, run, starting, inbound }) {
      const e = env();
      const statements = [
        sessionStatement(e, entry),
        recordTranscriptStatement(e, run.sessionId, entry.key, run.createdAt),
        // Insert only: applied late, it must never move a finished run back to running.
        insertRunStatement(e, starting ? { ...run, status: "running" } : run),
        ...(starting ? appendMessageStatements(e, run.sessionId, starting) : []),
      ];
      if (inbound) {
        statements.push(
          recordInboundStatement(e, {
            ...inbound,
            sessionKey: entry.key,
            sessionId: run.sessionId,
            runId: run.runId,
            status: "queued",
            createdAt: run.createdAt,
          }),
        );
      }
      await writeBatch(e, statements);
    },

    async runStarted({ run, entry, messages }) {
      const e = env();
      await writeBatch(e, [
        startRunStatement(e, run),
        ...(entry ? [sessionStatement(e, { ...entry, runStatus: "running" })] : []),
        ...appendMessageStatements(e, run.sessionId, messages),
      ]);
    },

    async messagesAppended(sessionId, messages) {
      const e = env();
      await writeBatch(e, appendMessageStatements(e, sessionId, messages));
    },

    async runFinished({ runId, sessionId, messages, delivery, end, entry }) {
      const e = env();
      await writeBatch(e, [
        ...appendMessageStatements(e, sessionId, messages),
        ...(delivery ? [insertDeliveryStatement(e, delivery)] : []),
        updateRunStatement(e, runId, end),
        ...(entry ? [sessionStatement(e, entry)] : []),
      ]);
    },

    async runsEnded(runIds, end) {
      const e = env();
      await writeBatch(
        e,
        runIds.map((runId) => updateRunStatement(e, runId, end)),
      );
    },

    async sessionStarted(entry, at) {
      const e = env();
      await writeBatch(e, [
        sessionStatement(e, entry),
        recordTranscriptStatement(e, entry.sessionId, entry.key, at),
      ]);
    },

    async entryPatched(entry) {
      const e = env();
      try {
        await writeBatch(e, [sessionStatement(e, entry)]);
        return "ok";
      } catch (error) {
        if (isUniqueViolation(error)) return "label-taken";
        throw error;
      }
    },

    sessionRemoved: (key, deleteTranscript) => deleteSessionRows(env(), key, deleteTranscript),

    async deliveryQueued(delivery) {
      const e = env();
      await writeBatch(e, [insertDeliveryStatement(e, delivery)]);
    },

    async deliveryAttempted(payload, state) {
      const e = env();
      await writeBatch(e, [recordDeliveryStatement(e, deliveryRow(payload), state)]);
    },

    async deliveryRequeued(payload, at) {
      const e = env();
      const state = { status: "pending", attempts: 0, updatedAt: at, nextAttemptAt: at, deliveredAt: null };
      await writeBatch(e, [recordDeliveryStatement(e, deliveryRow(payload), state)]);
    },
  };
}
