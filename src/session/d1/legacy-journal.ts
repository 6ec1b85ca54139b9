/**
 * The actor's journal of D1 records that wait for a later write to carry them (DO SQLite): a
 * deferred record is durable here from the moment it is taken, and leaves once a D1 batch that
 * carried it has committed, or once it is dead-lettered (D1 refused it alone RECORD_MAX_ATTEMPTS
 * times, see records.ts). Ids only grow while rows remain, so "every row up to id N" names
 * exactly what one batch carried. Rows are served from memory after the first read (this
 * instance is the only writer of its storage).
 */
export interface JournalRow {
  id: number;
  body: string;
  /** Times D1 refused this row written alone (a batch of several that failed blames none). */
  attempts: number;
}

export class RecordsJournal {
  private rows: JournalRow[] | undefined;

  constructor(private readonly sql: SqlStorage) {}

  /** The rows waiting, oldest first. */
  all(): readonly JournalRow[] {
    this.rows ??= this.sql
      .exec<{ id: number; body: string; attempts: number }>(
        `SELECT id, body, attempts FROM d1_pending ORDER BY id`,
      )
      .toArray();
    return this.rows;
  }

  add(body: string): void {
    const rows = this.all() as JournalRow[];
    const { id } = this.sql
      .exec<{ id: number }>(`INSERT INTO d1_pending (body) VALUES (?) RETURNING id`, body)
      .one();
    rows.push({ id, body, attempts: 0 });
  }

  /** A waiting row's record changed before any write carried it (a run's start folded into its accept). */
  replace(id: number, body: string): void {
    this.sql.exec(`UPDATE d1_pending SET body = ? WHERE id = ?`, body, id);
    const row = this.all().find((r) => r.id === id);
    if (row) row.body = body;
  }

  /** The rows up to `id` reached D1. */
  clearThrough(id: number): void {
    this.sql.exec(`DELETE FROM d1_pending WHERE id <= ?`, id);
    this.rows = this.all().filter((r) => r.id > id);
  }

  /** One row left the journal (written alone, or dead-lettered). */
  remove(id: number): void {
    this.sql.exec(`DELETE FROM d1_pending WHERE id = ?`, id);
    this.rows = this.all().filter((r) => r.id !== id);
  }

  /**
   * D1 refused the row written alone once more; returns how often it has (0 when another write
   * carried the row meanwhile: it is gone).
   */
  refused(id: number): number {
    const [updated] = this.sql
      .exec<{ attempts: number }>(
        `UPDATE d1_pending SET attempts = attempts + 1 WHERE id = ? RETURNING attempts`,
        id,
      )
      .toArray();
    const row = this.all().find((r) => r.id === id);
    if (row && updated) row.attempts = updated.attempts;
    return updated?.attempts ?? 0;
  }
}
