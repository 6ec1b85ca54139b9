/**
 * Everything a SessionActor reads from and writes to D1 (the session index, transcripts, runs
 * and deliveries), behind one interface named after what happened rather than which rows
 * change. Each write is one D1 round trip (a batch), idempotent by unique keys, so a repeated
 * step never duplicates rows.
 *
 * Write-behind: what may reach D1 a little later waits in the actor's journal
 * (records-journal.ts), durable from the moment it is taken, for the next write to carry it:
 * a connector's accepted message (the entry, the run) and every run's start (marked running,
 * its inputs). A start whose accept still waits is folded into it, and a run's end rides on its
 * records when its finalize carries them, so a quick run records its whole life in one D1 round
 * trip and writes its run row once; a batch writes the entry once,
 * and a transcript's row only with its first run. Nothing waits longer than
 * RECORDS_DELAY_MS (a timer writes it alone) and every later write carries the journal first,
 * so D1 sees the records in order.
 */

import { appendMessageStatements, turnContextRows } from "../db/messages";
import { databaseOfKey } from "../db/placement";
import {
  deleteSessionRows,
  labelTakenElsewhere,
  listSessions,
  recordTranscriptStatement,
  type SessionRow,
  writeBatch,
} from "../db/queries";
import { bindSessionKey, insertDeadRecordStatement } from "../db/run-records";
import {
  insertDeliveryStatement,
  recordDeliveryStatement,
  startRunStatement,
  updateRunStatement,
} from "../db/runs";
import type { deliveries, runs } from "../db/schema";
import type { DeliveryPayload } from "../delivery/deliver";
import { type AttemptState, deliveryRow } from "../delivery/outbox";
import { runIdPrefixOfKey } from "../keys/run-id";
import { TERMINAL } from "../runs/types";
import type { TranscriptMessage } from "../transcript/message";
import { type DeferredRecord, deferredRecordCodec } from "./durable-state";
import {
  batchStatements,
  carried,
  isUniqueViolation,
  readable,
  sessionStatement,
  unreadableStatement,
} from "./record-statements";
import type { JournalRow, RecordsJournal } from "./records-journal";

/** The longest a deferred record waits for another write to carry it before it is written alone. */
export const RECORDS_DELAY_MS = 1_000;
/**
 * How often D1 may refuse one deferred record written alone before it is dead-lettered
 * (`dead_records`, the operator's `records.dead`): with the timer's backoff, about 3 minutes.
 */
export const RECORD_MAX_ATTEMPTS = 8;
/** The longest the timer waits between attempts while D1 refuses the journal. */
const RECORDS_RETRY_MAX_MS = 60_000;
/** Journal rows one write carries at most (a backlog is carried over the next writes). */
const CARRY_MAX = 25;

export type { DeferredRecord };
export type RunRecord = typeof runs.$inferInsert;
export type RunEnd = Partial<Omit<RunRecord, "runId">>;
export type DeliveryRecord = typeof deliveries.$inferInsert;

/** What a write adds to the journal it carries: records (coalesced with the journal's) and statements. */
interface Own {
  records?: DeferredRecord[];
  statements?: D1PreparedStatement[];
  /** The actor's entry as it is now, among `records` (written as it is). */
  current?: SessionRow;
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
   * A run was accepted: the entry, its transcript id and the queued run row (a connector's
   * message is deduped by the actor alone). `behind`: they wait in the journal for the next
   * write (at most RECORDS_DELAY_MS), journaled synchronously, at the call.
   */
  runAccepted(a: Omit<DeferredRecord, "starting"> & { behind?: boolean }): Promise<void>;
  /**
   * A run started (or resumed): marked running, the entry shows it, its messages so far (the
   * inputs, and what a resumed run produced) appended. `behind` as for `runAccepted`.
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
   * A run ended: its row (`run` as accepted, `end` its outcome), its last messages, its delivery
   * with its first attempt, the entry. `behind`: it may wait in the journal, which it does in a
   * busy session (`busy`: another run waits), so the runs of a backlog share batches (the last
   * one writes them all); a run with none behind it is written at once.
   */
  runFinished(a: {
    run: RunRecord;
    messages: TranscriptMessage[];
    delivery?: DeliveryRecord;
    end: RunEnd;
    entry?: SessionRow;
    behind?: boolean;
    busy?: boolean;
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

  /** Writes the journal now; whether it is empty afterwards (false: D1 refused a row, the timer retries). */
  journalWritten(): Promise<boolean>;

  /**
   * Writes what a previous instance of the actor left in the journal (this instance's own
   * deferred records ride on its next write or their timer). Once per instance.
   */
  flushLeftover(): Promise<void>;
}

/**
 * The records as D1 writes, to the database of the actor's key (db/placement.ts). `env` and
 * `key` are read per call (tests rewire an actor's bindings; the key is known once bound).
 * `runAccepted({ behind: true })` adds to the journal before its first await, so a caller's
 * synchronous step holds it.
 */
export function d1Records(
  env: () => Env,
  key: () => string | undefined,
  journal: RecordsJournal,
): ActorRecords {
  /** The database of this actor's session: every record it writes goes there. */
  function database(): D1Database {
    const bound = key();
    if (bound === undefined) throw new Error("records written before the actor knows its key");
    return databaseOfKey(env(), bound);
  }

  /** The write carrying journal rows, while in flight: later writes wait for it. */
  let carrying: Promise<void> | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let retryMs = RECORDS_DELAY_MS;

  /**
   * One D1 batch: the journal's rows and `own` records coalesced (batchStatements: one statement
   * per table), then `own` statements. The whole journal goes first, CARRY_MAX rows a batch,
   * `own` with the last, so what they write (a reply) lands with or after what the journal holds
   * (its run's input). When the batch carrying the journal fails, the journal's rows are written
   * alone first (what D1 takes of them lands before `own`: see `isolate`), then `own`, so a row
   * D1 refuses never holds up the actor's other records (it stays in the journal, and the timer
   * tries it again). `writesEntry`: `own` statements write the entry, so no record does.
   */
  async function write(own: Own, writesEntry = false): Promise<void> {
    while (carrying) await carrying.catch(() => {});
    const e = database();
    const entry = writesEntry ? "skip" : "newest";
    const alone = () => [
      ...batchStatements(e, own.records ?? [], entry, own.current),
      ...(own.statements ?? []),
    ];
    for (;;) {
      const rows = journal.all().slice(0, CARRY_MAX);
      const last = rows[rows.length - 1];
      if (!last) return writeBatch(e, alone());
      const more = journal.all().length > rows.length;
      const batch = more
        ? batchStatements(e, carried(rows), "newest")
        : [
            ...batchStatements(e, [...carried(rows), ...(own.records ?? [])], entry, own.current),
            ...(own.statements ?? []),
          ];
      const done = writeBatch(e, batch).then(() => {
        journal.clearThrough(last.id);
        retryMs = RECORDS_DELAY_MS;
      });
      carrying = done;
      try {
        await done;
        if (!more) return;
        continue;
      } catch (error) {
        console.error(`a batch carrying deferred records failed; writing them one by one: ${error}`);
        carrying = isolate(e);
        await carrying;
      } finally {
        carrying = undefined;
      }
      break;
    }
    if (journal.all().length) schedule();
    await writeBatch(e, alone());
  }

  /**
   * The journal's rows written one at a time; a row D1 refuses is written statement by
   * statement, so what D1 takes of it lands now and in order (a later update of its run finds
   * the run), and the row stays for what was refused. A row refused RECORD_MAX_ATTEMPTS times
   * is dead-lettered (`dead_records`, with D1's answers), unless D1 refuses the dead letter
   * too: then D1 is down, not the row, and the row waits. Stops at a row D1 refuses whole.
   */
  async function isolate(e: D1Database): Promise<void> {
    for (const row of journal.all().slice(0, CARRY_MAX)) {
      const record = readable(row);
      const statements =
        record instanceof Error
          ? [unreadableStatement(e, row, record)]
          : batchStatements(e, [record], "newest");
      const refused: string[] = [];
      try {
        await writeBatch(e, statements);
      } catch {
        for (const statement of statements) {
          await writeBatch(e, [statement]).catch((error) => refused.push(String(error)));
        }
      }
      if (refused.length === 0) {
        journal.remove(row.id);
        continue;
      }
      if (
        journal.refused(row.id) >= RECORD_MAX_ATTEMPTS &&
        (await deadLetter(e, row, refused, statements.length))
      )
        journal.remove(row.id);
      // Every statement refused: D1 is not answering; the next rows would fare no better.
      if (refused.length === statements.length) return;
    }
  }

  /** Keeps a row D1 keeps refusing in `dead_records`; false when D1 refuses that too. */
  async function deadLetter(e: D1Database, row: JournalRow, refused: string[], of: number): Promise<boolean> {
    const record = readable(row);
    const accepted =
      record instanceof Error
        ? { run: { runId: `unreadable:${row.id}` }, entry: { key: "(unknown)" } }
        : record;
    const error = `${refused.length} of ${of} statements refused: ${refused.join("; ")}`;
    try {
      await writeBatch(e, [
        insertDeadRecordStatement(e, {
          runId: accepted.run.runId,
          sessionKey: accepted.entry.key,
          error,
          attempts: row.attempts,
          body: row.body,
          createdAt: Date.now(),
        }),
      ]);
    } catch {
      return false;
    }
    console.error(`deferred record of run ${accepted.run.runId} dead-lettered: ${error}`);
    return true;
  }

  /** Writes the journal alone once RECORDS_DELAY_MS has passed, unless another write carries it first. */
  function schedule(): void {
    if (timer || !journal.all().length) return;
    timer = setTimeout(() => {
      timer = undefined;
      const backOff = (reason: unknown) => {
        console.error(`deferred records not written (retrying): ${reason}`);
        retryMs = Math.min(retryMs * 2, RECORDS_RETRY_MAX_MS);
        schedule();
      };
      write({}).then(() => {
        const left = journal.all().length;
        if (left) backOff(`D1 refused ${left} of them`);
      }, backOff);
    }, retryMs);
  }

  /**
   * The journal written before a read that must see it. Best effort: a row D1 refuses makes the
   * read a little stale (the timer retries, then dead-letters it), never a failed read.
   */
  async function flushed(): Promise<void> {
    if (!journal.all().length) return;
    await write({}).catch((error) => console.error(`deferred records not written before a read: ${error}`));
    // What is left, the timer tries again.
    schedule();
  }

  /**
   * The journal's newest row, when it holds `runId`'s records and no write is carrying it (a
   * write in flight would clear the row without what is folded in): a run's start or end is
   * folded into it.
   */
  function waitingRecordOf(runId: string): { row: JournalRow; record: DeferredRecord } | undefined {
    const last = carrying ? undefined : journal.all().at(-1);
    if (last?.attempts !== 0) return undefined;
    const record = readable(last);
    if (record instanceof Error || record.run.runId !== runId) return undefined;
    return { row: last, record };
  }

  let leftover: Promise<void> | undefined;

  return {
    keyBound: async (key) => {
      await flushed();
      return bindSessionKey(env(), key, runIdPrefixOfKey(key));
    },
    turnContext: async (sessionId, limit) => {
      await flushed();
      const bound = key();
      return bound === undefined ? { messages: [] } : turnContextRows(env(), bound, sessionId, limit);
    },
    spawnedChildren: async (key) => {
      await flushed();
      return listSessions(env(), { spawnedBy: key, archived: "all", limit: 200 });
    },

    async runAccepted({ behind, ...accepted }) {
      if (behind) {
        journal.add(deferredRecordCodec.encode({ kind: "accepted", ...accepted }));
        schedule();
        return;
      }
      await write({ records: [accepted], current: accepted.entry });
    },

    async runStarted({ run, entry, messages, behind }) {
      const started = { ...run, status: "running" };
      if (behind && entry) {
        // Folded into its accept while that still waits (see `waitingRecordOf`).
        const waiting = waitingRecordOf(run.runId);
        const accept = waiting?.record;
        if (waiting && accept && accept.kind !== "started" && !TERMINAL.has(accept.run.status)) {
          const starting = [...(accept.starting ?? []), ...messages];
          const folded = { ...accept.run, status: "running", startedAt: started.startedAt };
          journal.replace(
            waiting.row.id,
            deferredRecordCodec.encode({ ...accept, entry, run: folded, starting }),
          );
        } else {
          journal.add(
            deferredRecordCodec.encode({ kind: "started", entry, run: started, starting: messages }),
          );
        }
        schedule();
        return;
      }
      const e = database();
      await write(
        {
          statements: [
            startRunStatement(e, run),
            ...(entry ? [sessionStatement(e, { ...entry, runStatus: "running" })] : []),
            ...appendMessageStatements(e, run.sessionId, messages),
          ],
        },
        !!entry,
      );
    },

    async messagesAppended(sessionId, messages) {
      await write({ statements: appendMessageStatements(database(), sessionId, messages) });
    },

    async runFinished({ run, messages, delivery, end, entry, behind, busy }) {
      // The run's row as it ended; coalesced with its records still in the journal (a quick
      // run's accept and start), it is written once.
      const finished: DeferredRecord | undefined = entry && {
        kind: "finished",
        entry,
        run: { ...run, ...end },
        starting: messages,
        ...(delivery ? { delivery } : {}),
      };
      if (behind && finished && busy) {
        // A busy session's next run goes on; the next write (or the timer) carries this one.
        journal.add(deferredRecordCodec.encode(finished));
        schedule();
        return;
      }
      const e = database();
      // Without an entry (a session removed mid-run) its parts are written as statements.
      await write(
        finished
          ? { records: [finished], current: entry }
          : {
              records: [],
              statements: [
                ...appendMessageStatements(e, run.sessionId, messages),
                ...(delivery ? [insertDeliveryStatement(e, delivery)] : []),
                updateRunStatement(e, run.runId, end),
              ],
            },
      );
    },

    async runsEnded(runIds, end) {
      if (!runIds.length) return;
      const e = database();
      await write({ statements: runIds.map((runId) => updateRunStatement(e, runId, end)) });
    },

    async sessionStarted(entry, at) {
      const e = database();
      await write(
        {
          statements: [
            sessionStatement(e, entry),
            recordTranscriptStatement(e, entry.sessionId, entry.key, at),
          ],
        },
        true,
      );
    },

    async entryPatched(entry) {
      const e = database();
      if (entry.label && (await labelTakenElsewhere(env(), entry.key, entry.agentId, entry.label))) {
        return "label-taken";
      }
      try {
        await write({ statements: [sessionStatement(e, entry)] }, true);
        return "ok";
      } catch (error) {
        if (isUniqueViolation(error)) return "label-taken";
        throw error;
      }
    },

    async sessionRemoved(key, deleteTranscript) {
      // The journal first: a deferred entry landing after the delete would bring it back. What
      // D1 would not take now is about the entry being deleted; it is dropped, not kept to land later.
      await flushed();
      const left = journal.all();
      const last = left[left.length - 1];
      if (last) {
        console.error(`deleting ${key}: dropping ${left.length} deferred records D1 did not take`);
        journal.clearThrough(last.id);
      }
      await deleteSessionRows(env(), key, deleteTranscript);
    },

    async deliveryQueued(delivery) {
      const e = database();
      await write({ statements: [insertDeliveryStatement(e, delivery)] });
    },

    async deliveryAttempted(payload, state) {
      const e = database();
      await write({ statements: [recordDeliveryStatement(e, deliveryRow(payload), state)] });
    },

    async deliveryRequeued(payload, at) {
      const e = database();
      const state = { status: "pending", attempts: 0, updatedAt: at, nextAttemptAt: at, deliveredAt: null };
      await write({ statements: [recordDeliveryStatement(e, deliveryRow(payload), state)] });
    },

    async journalWritten() {
      await flushed();
      return journal.all().length === 0;
    },

    flushLeftover() {
      leftover ??= flushed().catch((error) => {
        leftover = undefined;
        throw error;
      });
      return leftover;
    },
  };
}
