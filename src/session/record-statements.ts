/**
 * The D1 statements of a SessionActor's records (see records.ts): a run's deferred records
 * (accepted, started, or a start folded into its accept), the entry as its row, and a journal
 * row this version cannot read, kept as stored in `dead_records`; and which D1 error is a
 * label taken (a unique index refused the entry).
 */
import { appendMessageStatements } from "../db/messages";
import {
  insertRunStatement,
  recordInboundStatement,
  recordTranscriptStatement,
  type SessionRow,
  upsertSessionStatement,
  upsertSessionUnlessNewerStatement,
} from "../db/queries";
import { endedRunStatement, insertDeadRecordStatement, startQueuedRunStatement } from "../db/run-records";
import { DurableDocumentError } from "../runs/durable";
import { TERMINAL } from "../runs/types";
import { type DeferredRecord, deferredRecordCodec } from "./durable-state";
import { closedAt } from "./entry";
import type { JournalRow } from "./records-journal";

/** A journal row's record, or why it cannot be read. */
export function readable(row: JournalRow): DeferredRecord | DurableDocumentError {
  try {
    return deferredRecordCodec.decode(row.body);
  } catch (error) {
    if (error instanceof DurableDocumentError) return error;
    throw error;
  }
}

/** An unreadable journal row kept in `dead_records` as stored (under an id of its own). */
export function unreadableStatement(db: D1Database, row: JournalRow, error: Error): D1PreparedStatement {
  console.error(`deferred record ${row.id} cannot be read; dead-lettered: ${error.message}`);
  return insertDeadRecordStatement(db, {
    runId: `unreadable:${crypto.randomUUID()}`,
    sessionKey: "(unknown)",
    error: error.message,
    attempts: row.attempts,
    body: row.body,
    createdAt: Date.now(),
  });
}

/** A wrapped D1 error (`Failed query: …`) has the constraint message down its cause chain. */
export function isUniqueViolation(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (/UNIQUE constraint failed/i.test(e.message)) return true;
  }
  return false;
}

/** The entry as its D1 row: closed (`expiredAt`) once its expiry has passed, as the sweep writes it. */
export function sessionStatement(db: D1Database, entry: SessionRow): D1PreparedStatement {
  return upsertSessionStatement(db, { ...entry, expiredAt: closedAt(entry, Date.now()) });
}

/**
 * The statements of a run's records. `entry: "unless-newer"` for a journal row: landing after
 * a later write, it must not move the entry back.
 */
export function recordStatements(
  db: D1Database,
  a: DeferredRecord,
  entry: "write" | "unless-newer" | "skip",
): D1PreparedStatement[] {
  const { run, starting, inbound } = a;
  // A run whose end was folded in too is written once, as it ended.
  const ended = TERMINAL.has(run.status);
  const runStatement = ended
    ? endedRunStatement(db, run)
    : startQueuedRunStatement(db, { ...run, startedAt: run.startedAt ?? run.createdAt });
  const statements =
    a.kind === "started"
      ? [
          // Applied late, it never moves a run that has ended back to running.
          runStatement,
          ...appendMessageStatements(db, run.sessionId, starting ?? []),
        ]
      : [
          ...(a.newTranscript === false
            ? []
            : [recordTranscriptStatement(db, run.sessionId, a.entry.key, run.createdAt)]),
          // Applied late, neither moves a run that has ended back: the accept is insert only,
          // and a start folded into it (perhaps into a later message merged into the run, whose
          // row exists already) moves the run from queued to running only.
          starting || ended ? runStatement : insertRunStatement(db, run),
          ...(starting ? appendMessageStatements(db, run.sessionId, starting) : []),
        ];
  if (entry === "write") statements.unshift(sessionStatement(db, a.entry));
  if (entry === "unless-newer")
    statements.unshift(
      upsertSessionUnlessNewerStatement(db, { ...a.entry, expiredAt: closedAt(a.entry, Date.now()) }),
    );
  if (inbound && a.kind !== "started") {
    statements.push(
      recordInboundStatement(db, {
        ...inbound,
        sessionKey: a.entry.key,
        sessionId: run.sessionId,
        runId: run.runId,
        status: "queued",
        createdAt: run.createdAt,
      }),
    );
  }
  return statements;
}
