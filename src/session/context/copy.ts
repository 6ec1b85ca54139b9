/**
 * The context of a SessionActor's turns, kept in its own DO SQLite (SPEC §5): the latest
 * compaction summary of the current transcript and the messages after it, written through as
 * the actor appends them to D1. A turn is built from this copy alone, so its cost does not
 * grow with the transcript and needs no D1 read; compaction trims the copy (D1 keeps every
 * row). Memory-flush turns and compaction entries are never part of it.
 *
 * The copy of a transcript is complete ("ready") when this actor wrote every message of it: a
 * transcript it never appended to is empty, so it is ready at once. One written before this
 * actor held it (seeded, imported, storage lost, or kept by an older version) is not ready
 * until `hydrate` loads it from D1 (the latest compaction entry and the messages after it).
 * Appends to a transcript that is not ready are skipped: the hydration will bring them.
 * Only one transcript is kept: starting another (a reset) drops the previous one's copy. Its
 * table (storage/schema.ts) is keyed by message id (an append is idempotent and writes one row),
 * in `ord` order (the largest plus one, counted by this instance, its only writer); the copy is
 * a few hundred rows at most (compaction trims it), so it is read whole, sorted.
 */
import { isCompaction, isFlushMessage, type TranscriptMessage } from "../../transcript/message";
import { estimateMessageTokens, estimateTokens } from "../../transcript/tokens";
import type { ActorRecords } from "../d1/records";
import { contextStateCodec, stepCodec } from "../storage/documents";

/** The parts of the actor's store this one uses (its kv and which transcripts it wrote). */
export interface ContextKv {
  kvGet(k: string): string | undefined;
  kvSet(k: string, v: string): void;
  kvDelete(k: string): void;
  hasHistory(sessionId: string): boolean;
}

export interface TurnContext {
  /** The latest compaction summary, with its estimated size. */
  summary?: { text: string; tokens: number };
  /** The messages after the summary, oldest first (optionally without one run's own). */
  messages: Array<TranscriptMessage & { tokens: number }>;
  /** Estimated tokens of the summary and the messages. */
  tokens: number;
}

interface ContextState {
  summary?: string;
}

interface ContextRow {
  id: string;
  tokens: number;
  message: string;
  [key: string]: SqlStorageValue;
}

export class ContextStore {
  /** The next `ord`, once read. */
  private nextOrd: number | undefined;

  constructor(
    private readonly sql: SqlStorage,
    private readonly store: ContextKv,
  ) {}

  private state(sessionId: string): ContextState | undefined {
    const raw = this.store.kvGet(`ctx:${sessionId}`);
    return raw === undefined ? undefined : contextStateCodec.decode(raw);
  }

  private setState(sessionId: string, state: ContextState): void {
    const current = this.store.kvGet("ctx_current");
    if (current !== sessionId) {
      // Another transcript begins (a reset): its predecessor's copy is no longer needed.
      this.sql.exec(`DELETE FROM context WHERE session_id != ?`, sessionId);
      if (current) this.store.kvDelete(`ctx:${current}`);
      this.store.kvSet("ctx_current", sessionId);
    }
    this.store.kvSet(`ctx:${sessionId}`, contextStateCodec.encode(state));
  }

  ready(sessionId: string): boolean {
    return this.state(sessionId) !== undefined || !this.store.hasHistory(sessionId);
  }

  /** Adds messages the actor is appending to `sessionId` in D1 (idempotent by message id). */
  append(sessionId: string, messages: readonly TranscriptMessage[]): void {
    if (!this.ready(sessionId)) return;
    if (!this.state(sessionId)) this.setState(sessionId, {});
    for (const m of messages) {
      if (isFlushMessage(m) || isCompaction(m)) continue;
      this.nextOrd ??= this.sql.exec<{ n: number | null }>(`SELECT MAX(ord) AS n FROM context`).one().n ?? 0;
      const added = this.sql
        .exec(
          `INSERT OR IGNORE INTO context (session_id, id, ord, run_id, tokens, message) VALUES (?, ?, ?, ?, ?, ?)
           RETURNING ord`,
          sessionId,
          m.id,
          this.nextOrd + 1,
          m.runId ?? null,
          estimateMessageTokens(m),
          stepCodec.encode(m),
        )
        .toArray().length;
      this.nextOrd += added;
    }
  }

  /** Replaces the copy of `sessionId` with what D1 holds (see `turnContextRows`). */
  hydrate(sessionId: string, rows: { compaction?: TranscriptMessage; messages: TranscriptMessage[] }): void {
    this.sql.exec(`DELETE FROM context WHERE session_id = ?`, sessionId);
    const summary = rows.compaction?.content.find((p) => p.type === "text")?.text;
    this.setState(sessionId, summary !== undefined ? { summary } : {});
    this.append(sessionId, rows.messages);
  }

  load(sessionId: string, excludeRunId?: string): TurnContext {
    const rows = this.sql
      .exec<ContextRow>(
        `SELECT id, tokens, message FROM context WHERE session_id = ? AND (run_id IS NULL OR run_id != ?) ORDER BY ord`,
        sessionId,
        excludeRunId ?? "",
      )
      .toArray();
    const messages = rows.map((r) => ({ ...stepCodec.decode(r.message), tokens: r.tokens }));
    const text = this.state(sessionId)?.summary;
    const summary = text !== undefined ? { text, tokens: estimateTokens(text) } : undefined;
    let tokens = summary?.tokens ?? 0;
    for (const m of messages) tokens += m.tokens;
    return summary ? { summary, messages, tokens } : { messages, tokens };
  }

  /**
   * A compaction entry was recorded: the summary replaces every message before `firstKeptId`
   * (all of them when it is absent).
   */
  compacted(sessionId: string, summary: string, firstKeptId: string | undefined): void {
    if (firstKeptId) {
      this.sql.exec(
        `DELETE FROM context WHERE session_id = ? AND ord < COALESCE((SELECT ord FROM context WHERE id = ?), 0)`,
        sessionId,
        firstKeptId,
      );
    } else {
      this.sql.exec(`DELETE FROM context WHERE session_id = ?`, sessionId);
    }
    this.setState(sessionId, { summary });
  }
}

/**
 * The actor's records with every transcript append also written to its context copy, before
 * the D1 write (both are idempotent by message id, so a D1 write that fails and is repeated
 * leaves one copy of each).
 */
export function withContextCopy(records: ActorRecords, context: ContextStore): ActorRecords {
  return {
    ...records,
    async runStarted(a) {
      context.append(a.run.sessionId, a.messages);
      return records.runStarted(a);
    },
    async messagesAppended(sessionId, messages) {
      context.append(sessionId, messages);
      return records.messagesAppended(sessionId, messages);
    },
    async runFinished(a) {
      context.append(a.run.sessionId, a.messages);
      return records.runFinished(a);
    },
  };
}
