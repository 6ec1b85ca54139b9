/**
 * The actor's journal of D1 records that wait for a later write to carry them (DO SQLite): a
 * deferred record is durable here from the moment it is taken, and leaves once a D1 batch that
 * carried it has committed. Ids only grow while rows remain, so "every row up to id N" names
 * exactly what one batch carried. Rows are served from memory after the first read (this
 * instance is the only writer of its storage).
 */
export interface JournalRow {
  id: number;
  body: string;
}

export class RecordsJournal {
  static readonly DDL = `CREATE TABLE IF NOT EXISTS d1_pending (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`;
  private rows: JournalRow[] | undefined;

  constructor(private readonly sql: SqlStorage) {}

  /** The rows waiting, oldest first. */
  all(): readonly JournalRow[] {
    this.rows ??= this.sql
      .exec<{ id: number; body: string }>(`SELECT id, body FROM d1_pending ORDER BY id`)
      .toArray();
    return this.rows;
  }

  add(body: string): void {
    const rows = this.all() as JournalRow[];
    const { id } = this.sql
      .exec<{ id: number }>(`INSERT INTO d1_pending (body) VALUES (?) RETURNING id`, body)
      .one();
    rows.push({ id, body });
  }

  /** The rows up to `id` reached D1. */
  clearThrough(id: number): void {
    this.sql.exec(`DELETE FROM d1_pending WHERE id <= ?`, id);
    this.rows = this.all().filter((r) => r.id > id);
  }
}
