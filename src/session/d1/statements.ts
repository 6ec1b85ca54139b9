/**
 * The D1 statements of a SessionActor's records (see records.ts): the entry as its row (whole,
 * or as a run leaves it), the journal records an earlier version left coalesced into one
 * multi-row statement per table, a journal row this version cannot read kept as stored in
 * `dead_records`; and which D1 error is a label taken (a unique index refused the entry).
 */
import { appendMessageStatements } from "../../db/messages";
import { recordTranscriptsStatement, type SessionRow, upsertSessionStatement } from "../../db/queries";
import { insertDeadRecordStatement, runRecordsStatement } from "../../db/run-records";
import { insertDeliveriesStatement } from "../../db/runs";
import { DurableDocumentError } from "../../runs/durable";
import { TERMINAL } from "../../runs/types";
import type { TranscriptMessage } from "../../transcript/message";
import { closedAt } from "../entry/rules";
import { type DeferredRecord, deferredRecordCodec } from "../storage/documents";
import type { JournalRow } from "./legacy-journal";

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
 * The entry as a run leaves it, when D1 holds its transcript already: the columns a run, an
 * admission or the sweep change, not those set when the entry or its transcript began (its
 * agent, kind, creation, spawner, sessionId) nor its label (changed only by a patch, written
 * whole), so the indexes on those are not rewritten (D1 bills each index row it writes). A row
 * that is missing is inserted whole.
 */
export function runEntryStatement(db: D1Database, entry: SessionRow): D1PreparedStatement {
  return upsertSessionStatement(db, { ...entry, expiredAt: closedAt(entry, Date.now()) }, { set: "run" });
}

/** A journal row no version can read, with why. */
export interface Unreadable {
  row: JournalRow;
  error: Error;
}

const rank = (status: string) => (TERMINAL.has(status) ? 2 : status === "running" ? 1 : 0);

/** `b`'s defined fields over `a`'s. */
function defined<T extends object>(a: T, b: T): T {
  const out = { ...a } as Record<string, unknown>;
  for (const [k, v] of Object.entries(b)) if (v !== undefined) out[k] = v;
  return out as T;
}

/**
 * One run's records merged in order: a later record moves the run forward (queued → running →
 * ended), never back; the row keeps its first `createdAt` and `startedAt`.
 */
function mergeRun(
  prev: DeferredRecord["run"] | undefined,
  next: DeferredRecord["run"],
): DeferredRecord["run"] {
  if (!prev) return { ...next };
  if (rank(next.status) < rank(prev.status)) return defined(next, prev);
  const merged = defined(prev, next);
  merged.createdAt = prev.createdAt;
  merged.startedAt = prev.startedAt ?? next.startedAt ?? null;
  return merged;
}

/**
 * The statements of journal records an earlier version left (see records.ts `flushLeftover`),
 * coalesced into multi-row statements, one per table whatever the number of records: the
 * entry (the newest of them, unless D1 holds a newer one), the transcripts begun, each run's
 * row as far as the records go, the messages of each transcript in order, the deliveries; a
 * row no version can read is dead-lettered as stored.
 */
export function batchStatements(
  db: D1Database,
  records: ReadonlyArray<DeferredRecord | Unreadable>,
): D1PreparedStatement[] {
  const statements: D1PreparedStatement[] = [];
  let newest: SessionRow | undefined;
  const transcripts: Array<{ sessionId: string; sessionKey: string; createdAt: number }> = [];
  const runRows = new Map<string, DeferredRecord["run"]>();
  const messages = new Map<string, TranscriptMessage[]>();
  const deliveryRows: NonNullable<DeferredRecord["delivery"]>[] = [];
  for (const r of records) {
    if ("error" in r) {
      statements.push(unreadableStatement(db, r.row, r.error));
      continue;
    }
    const { run } = r;
    if (!newest || r.entry.updatedAt >= newest.updatedAt) newest = r.entry;
    const accepted = r.kind !== "started" && r.kind !== "finished";
    if (accepted && r.newTranscript !== false)
      transcripts.push({ sessionId: run.sessionId, sessionKey: r.entry.key, createdAt: run.createdAt });
    runRows.set(run.runId, mergeRun(runRows.get(run.runId), run));
    if (r.starting?.length) {
      const list = messages.get(run.sessionId);
      if (list) list.push(...r.starting);
      else messages.set(run.sessionId, [...r.starting]);
    }
    if (r.delivery) deliveryRows.push(r.delivery);
  }
  if (newest) {
    statements.unshift(
      upsertSessionStatement(
        db,
        { ...newest, expiredAt: closedAt(newest, Date.now()) },
        { unlessNewer: true },
      ),
    );
  }
  if (transcripts.length) statements.push(recordTranscriptsStatement(db, transcripts));
  if (runRows.size) statements.push(runRecordsStatement(db, [...runRows.values()]));
  for (const [sessionId, list] of messages) statements.push(...appendMessageStatements(db, sessionId, list));
  if (deliveryRows.length) statements.push(insertDeliveriesStatement(db, deliveryRows));
  return statements;
}
