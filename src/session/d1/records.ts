/**
 * Everything a SessionActor reads from and writes to D1 (the session index, transcripts, runs
 * and deliveries), behind one interface named after what happened rather than which rows
 * change. Each write is one D1 round trip (a batch), idempotent by unique keys, so a repeated
 * step never duplicates rows, and the actor's writes reach D1 one after another, in order.
 *
 * What D1 shows of a session is never older than what its chat has seen (SPEC §17 "Read your
 * replies"): a run's records (its inputs, its steps, its reply, its row, the entry it changed)
 * are written in one batch, its finalize, before its reply is handed to the outbox. Until then
 * they are the actor's alone (the queue row and its checkpoint), so a connector's message costs
 * no D1 write before its run ends: one round trip per run, whatever the model's latency.
 *
 * A delivery's outcome is not awaited by D1 either: the outbox keeps each attempt's outcome
 * (delivery/outbox.ts) and every write of this actor carries the outcomes not yet recorded, so
 * a conversation's replies are recorded with its next run's finalize. An outcome no write has
 * carried within OUTCOME_RECORD_DELAY_MS (at once for a failed attempt) is written alone by the
 * actor's alarm (`writeDue`, a due item of the actor's one scheduler, session/scheduler.ts), and a read of
 * the session's deliveries has them written first (`writeOutcomes`).
 *
 * Journal rows left by earlier versions (d1_pending: accepts, starts and finalizes written
 * behind) are written once at the first contact of an instance (`flushLeftover`).
 */

import { loadConfig } from "../../config/load";
import { deleteTranscriptMedia, mediaBucket } from "../../db/media-store";
import { appendMessageStatements, turnContextRows } from "../../db/messages";
import { databaseOfKey } from "../../db/placement";
import {
  deleteSessionRows,
  labelTakenElsewhere,
  listSessions,
  recordTranscriptStatement,
  type SessionRow,
  writeBatch,
} from "../../db/queries";
import { bindSessionKey, insertDeadRecordStatement, runRecordsStatement } from "../../db/run-records";
import { recordDeliveriesStatement, recordDeliveryStatement } from "../../db/runs";
import type { runs } from "../../db/schema";
import { type UsageAddition, usageRollupStatements } from "../../db/usage";
import type { DeliveryPayload } from "../../delivery/deliver";
import type { UnrecordedOutcome } from "../../delivery/outbox";
import { deliveryRow } from "../../delivery/rows";
import { runIdPrefixOfKey } from "../../keys/run-id";
import type { TranscriptMessage } from "../../transcript/message";
import type { RecordsJournal } from "./legacy-journal";
import {
  batchStatements,
  isUniqueViolation,
  readable,
  runEntryStatement,
  sessionStatement,
} from "./statements";

/** How long outcomes D1 refused wait before they are tried again. */
const RECORD_RETRY_MS = 30_000;

export type RunRecord = typeof runs.$inferInsert;
export type RunEnd = Partial<Omit<RunRecord, "runId">>;

/** The outcomes of this actor's deliveries that D1 does not show yet (the outbox keeps them). */
export interface OutcomeLedger {
  unrecorded(): UnrecordedOutcome[];
  /** D1 took these (each as it was when read): they leave the ledger. */
  recorded(outcomes: readonly UnrecordedOutcome[]): void;
  /** D1 refused them: they are written again no sooner than `at`. */
  postpone(outcomes: readonly UnrecordedOutcome[], at: number): void;
  /** When the oldest outcome is due to be written alone, if any waits. */
  recordDue(): number | undefined;
}

export interface ActorRecords {
  /**
   * An actor learned its key: the key's run-id prefix is registered (keys/run-id.ts) and the
   * entry stored before the actor existed is loaded, in one round trip.
   */
  keyBound(key: string): Promise<SessionRow | undefined>;
  /** A transcript's latest compaction entry and at most `limit` messages after it (see turnContextRows). */
  turnContext(
    sessionId: string,
    limit: number,
  ): Promise<{ compaction?: TranscriptMessage; messages: TranscriptMessage[] }>;
  /** Sessions spawned by `key`, archived or not (at most 200). */
  spawnedChildren(key: string): Promise<SessionRow[]>;

  /**
   * A run was accepted: the entry, its transcript's row (when new) and the queued run row,
   * written before the answer, so the caller can read them by id. `behind` (a connector's
   * message): nothing is written; the run's finalize writes its whole life.
   */
  runAccepted(a: {
    entry: SessionRow;
    run: RunRecord;
    newTranscript: boolean;
    behind?: boolean;
  }): Promise<void>;
  /**
   * A run started (or resumed): marked running, the entry showing it, its messages so far
   * appended. `behind`: nothing is written (the finalize writes it).
   */
  runStarted(a: {
    run: RunRecord & { startedAt: number };
    entry?: SessionRow;
    messages: TranscriptMessage[];
    behind?: boolean;
  }): Promise<void>;
  /** Messages appended to a transcript (idempotent by message id). */
  messagesAppended(sessionId: string, messages: TranscriptMessage[]): Promise<void>;
  /**
   * A run ended: its row (`run` as accepted, `end` its outcome), its messages (inputs and
   * steps; those D1 holds already are skipped by id), the entry and, for the run's first
   * records of a transcript, the transcript's row: one batch, before the reply goes out.
   */
  runFinished(a: {
    run: RunRecord;
    messages: TranscriptMessage[];
    end: RunEnd;
    entry?: SessionRow;
    /** What the run adds to the usage rollup (db/usage.ts), once however often this is written. */
    usage?: UsageAddition;
  }): Promise<void>;
  /**
   * Runs that end outside a finalize (dropped from the queue before they started, a
   * compaction made inside a turn, a run given up on): each row whole, as it ended.
   */
  runsEnded(rows: RunRecord[]): Promise<void>;

  /** A new sessionId began under the entry's key (a new entry or a reset). */
  sessionStarted(entry: SessionRow, at: number): Promise<void>;
  /** The entry changed outside a run; `label-taken` when its label is another session's. */
  entryPatched(entry: SessionRow): Promise<"ok" | "label-taken">;
  sessionRemoved(key: string, deleteTranscript: boolean): Promise<void>;

  /** A settled delivery was queued again: pending, with a fresh round of attempts (its last error kept). */
  deliveryRequeued(payload: DeliveryPayload, at: number): Promise<void>;

  /** Writes the deliveries' outcomes that are due (see OUTCOME_RECORD_DELAY_MS); a failure postpones them. */
  writeDue(): Promise<void>;
  /** Writes every delivery outcome D1 does not show yet, now (a read of this session's deliveries). */
  writeOutcomes(): Promise<void>;

  /**
   * Writes what an instance of an earlier version left in its journal (d1_pending). Once per
   * instance; a row D1 refuses is kept in `dead_records` with D1's answer.
   */
  flushLeftover(): Promise<void>;
}

/**
 * The records as D1 writes, to the database of the actor's key (db/placement.ts). `env` and
 * `key` are read per call (tests rewire an actor's bindings; the key is known once bound).
 * `recorded` is the kv the actor keeps of which transcript D1 holds the row of (and so the
 * entry's identity columns as they are): a run's entry is then written without them.
 */
export function d1Records(
  env: () => Env,
  key: () => string | undefined,
  ledger: OutcomeLedger,
  recorded: { get(): string | undefined; set(sessionId: string): void },
  journal: RecordsJournal,
): ActorRecords {
  /** The database of this actor's session: every record it writes goes there. */
  function database(): D1Database {
    const bound = key();
    if (bound === undefined) throw new Error("records written before the actor knows its key");
    return databaseOfKey(env(), bound);
  }

  /** The write in flight: the next one waits for it, so D1 sees this actor's writes in order. */
  let last: Promise<unknown> = Promise.resolve();

  /**
   * One D1 batch: `statements`, then the outcomes not recorded yet (one statement for all of
   * them). When that batch fails, `statements` are written alone (the outcomes wait for the
   * next write or their due time), so an outcome D1 refuses never holds up a run's records.
   */
  function write(statements: D1PreparedStatement[]): Promise<void> {
    const mine = last.then(
      () => writeNow(statements),
      () => writeNow(statements),
    );
    last = mine.catch(() => {});
    return mine;
  }

  async function writeNow(statements: D1PreparedStatement[]): Promise<void> {
    const e = database();
    const carried = ledger.unrecorded();
    if (carried.length === 0) {
      if (statements.length) await writeBatch(e, statements);
      return;
    }
    try {
      await writeBatch(e, [...statements, outcomesStatement(e, carried)]);
      ledger.recorded(carried);
      return;
    } catch (error) {
      console.error(`a batch carrying delivery outcomes failed; writing without them: ${error}`);
      ledger.postpone(carried, Date.now() + RECORD_RETRY_MS);
    }
    if (statements.length) await writeBatch(e, statements);
  }

  function outcomesStatement(e: D1Database, outcomes: readonly UnrecordedOutcome[]): D1PreparedStatement {
    return recordDeliveriesStatement(
      e,
      outcomes.map((o) => ({ ...deliveryRow(o.payload, o.createdAt), ...o.state })),
    );
  }

  /** The entry and, the first time a transcript is written, its row. */
  function entryStatements(e: D1Database, entry: SessionRow, at: number): D1PreparedStatement[] {
    if (recorded.get() === entry.sessionId) return [runEntryStatement(e, entry)];
    return [sessionStatement(e, entry), recordTranscriptStatement(e, entry.sessionId, entry.key, at)];
  }

  /** After a batch written with `entryStatements`: D1 holds the entry's transcript. */
  function entryWritten(entry: SessionRow): void {
    if (recorded.get() !== entry.sessionId) recorded.set(entry.sessionId);
  }

  let leftover: Promise<void> | undefined;

  /** The rows an earlier version left in its journal, one batch each; a refused one is dead-lettered. */
  async function writeLeftover(): Promise<void> {
    const rows = journal.all();
    if (rows.length === 0) return;
    const e = database();
    for (const row of [...rows]) {
      const record = readable(row);
      const statements = batchStatements(e, [record instanceof Error ? { row, error: record } : record]);
      try {
        await writeBatch(e, statements);
      } catch (error) {
        const runId = record instanceof Error ? `unreadable:${row.id}` : record.run.runId;
        await writeBatch(e, [
          insertDeadRecordStatement(e, {
            runId,
            sessionKey: record instanceof Error ? "(unknown)" : record.entry.key,
            error: String(error),
            attempts: row.attempts + 1,
            body: row.body,
            createdAt: Date.now(),
          }),
        ]);
        console.error(`deferred record of run ${runId} dead-lettered: ${error}`);
      }
      journal.remove(row.id);
    }
  }

  return {
    keyBound: (key) => bindSessionKey(env(), key, runIdPrefixOfKey(key)),
    turnContext: async (sessionId, limit) => {
      const bound = key();
      return bound === undefined ? { messages: [] } : turnContextRows(env(), bound, sessionId, limit);
    },
    spawnedChildren: (key) => listSessions(env(), { spawnedBy: key, archived: "all", limit: 200 }),

    async runAccepted({ entry, run, newTranscript, behind }) {
      if (behind) return;
      const e = database();
      await write([
        sessionStatement(e, entry),
        ...(newTranscript ? [recordTranscriptStatement(e, entry.sessionId, entry.key, run.createdAt)] : []),
        runRecordsStatement(e, [run]),
      ]);
      if (newTranscript) entryWritten(entry);
    },

    async runStarted({ run, entry, messages, behind }) {
      if (behind) return;
      const e = database();
      await write([
        runRecordsStatement(e, [{ ...run, status: "running" }]),
        ...(entry ? entryStatements(e, { ...entry, runStatus: "running" }, run.createdAt) : []),
        ...appendMessageStatements(e, run.sessionId, messages),
      ]);
      if (entry) entryWritten(entry);
    },

    async messagesAppended(sessionId, messages) {
      await write(appendMessageStatements(database(), sessionId, messages));
    },

    async runFinished({ run, messages, end, entry, usage }) {
      const e = database();
      // The run's row goes before its messages' transcript is read back by anyone: one batch.
      // The usage rollup's addition goes before the run's row ends (it adds only until then).
      await write([
        ...(entry ? entryStatements(e, entry, run.createdAt) : []),
        ...(usage ? usageRollupStatements(e, usage) : []),
        runRecordsStatement(e, [{ ...run, ...end }]),
        ...appendMessageStatements(e, run.sessionId, messages),
      ]);
      if (entry) entryWritten(entry);
    },

    async runsEnded(rows) {
      if (!rows.length) return;
      await write([runRecordsStatement(database(), rows)]);
    },

    async sessionStarted(entry, at) {
      const e = database();
      await write([sessionStatement(e, entry), recordTranscriptStatement(e, entry.sessionId, entry.key, at)]);
      entryWritten(entry);
    },

    async entryPatched(entry) {
      const e = database();
      if (entry.label && (await labelTakenElsewhere(env(), entry.key, entry.agentId, entry.label))) {
        return "label-taken";
      }
      try {
        await write([sessionStatement(e, entry)]);
        return "ok";
      } catch (error) {
        if (isUniqueViolation(error)) return "label-taken";
        throw error;
      }
    },

    async sessionRemoved(key, deleteTranscript) {
      // What is queued before the delete lands before it; the entry is recreated by the next
      // message only.
      await write([]);
      const transcripts = await deleteSessionRows(env(), key, deleteTranscript);
      // The files its transcripts held (SPEC §22) go with them.
      const bucket = transcripts.length > 0 ? mediaBucket(env(), loadConfig(env())) : undefined;
      if (bucket) await deleteTranscriptMedia(bucket, transcripts);
    },

    async deliveryRequeued(payload, at) {
      const e = database();
      const state = { status: "pending", attempts: 0, updatedAt: at, nextAttemptAt: at, deliveredAt: null };
      await write([recordDeliveryStatement(e, deliveryRow(payload, at), state)]);
    },

    async writeDue() {
      const due = ledger.recordDue();
      if (due === undefined || due > Date.now()) return;
      await write([]).catch((error) => console.error(`delivery outcomes not written: ${error}`));
    },

    async writeOutcomes() {
      if (ledger.recordDue() !== undefined) await write([]);
    },

    flushLeftover() {
      leftover ??= writeLeftover().catch((error) => {
        leftover = undefined;
        throw error;
      });
      return leftover;
    },
  };
}
