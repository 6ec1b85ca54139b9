/**
 * The schema of a SessionActor's own storage (DO SQLite), every table of it, versioned: DDL run
 * on every wake, idempotent. A new actor creates its tables in their current shape at once; one
 * of an earlier version migrates step by step, each step as that version left the tables (a
 * step never uses the current shape, which later versions change).
 *
 *   table       rows                                           owner
 *   kv          the entry, the key, per-transcript flags       storage/store.ts
 *   run_ids     each accepted run id: its answer, its outcome  storage/store.ts
 *   queue       each queued or running run, its checkpoint     run/queue.ts
 *   run_steps   each stored step of a running run              run/queue.ts
 *   outbox      each delivery owed or not recorded in D1 yet   delivery/outbox.ts
 *   context     the turn context copy                          context/copy.ts
 *   d1_pending  records earlier versions left for D1           d1/legacy-journal.ts
 *   signals     the session's signal log (SPEC §20)            storage/signals.ts
 *
 * Cloudflare bills each row a Durable Object writes, index rows included: tables keyed by text
 * are WITHOUT ROWID (one row per write, not a row and its key's index entry), none counts ids
 * with AUTOINCREMENT, and no table has an index a write must also update.
 */

export const SCHEMA_VERSION = 9;

/** The signal log (version 9): `version` is the rowid, one row per event, no index. */
const SIGNALS_DDL = `CREATE TABLE IF NOT EXISTS signals (
  version INTEGER PRIMARY KEY, kind TEXT NOT NULL, actor TEXT NOT NULL, at INTEGER NOT NULL,
  summary TEXT NOT NULL, run_id TEXT, outcome TEXT, by TEXT)`;

/** Every table of a new actor, in its current shape (SCHEMA_VERSION). */
const CURRENT = [
  `CREATE TABLE IF NOT EXISTS queue (
    pos INTEGER PRIMARY KEY, run_id TEXT NOT NULL, state TEXT NOT NULL,
    spec TEXT NOT NULL, checkpoint TEXT, enqueued_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, starts INTEGER NOT NULL DEFAULT 0, retry_at INTEGER, last_error TEXT,
    deadline INTEGER)`,
  `CREATE TABLE IF NOT EXISTS run_steps (
    run_id TEXT NOT NULL, idx INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (run_id, idx)) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS run_ids (
    run_id TEXT PRIMARY KEY, result TEXT, outcome TEXT, at INTEGER NOT NULL) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS outbox (
    delivery_id TEXT PRIMARY KEY, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_at INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0, state TEXT, state_v INTEGER NOT NULL DEFAULT 0, record_at INTEGER,
    created_at INTEGER) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS context (
    session_id TEXT NOT NULL, id TEXT PRIMARY KEY, ord INTEGER NOT NULL,
    run_id TEXT, tokens INTEGER NOT NULL, message TEXT NOT NULL) WITHOUT ROWID`,
  `CREATE TABLE IF NOT EXISTS d1_pending (
    id INTEGER PRIMARY KEY, body TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0)`,
  SIGNALS_DDL,
];

/** The steps from each version to the next (index 0: from none to version 1). */
const STEPS: Array<(sql: SqlStorage) => void> = [
  // 1: the queue, run ids, outcomes, the outbox.
  (sql) => {
    sql.exec(`CREATE TABLE IF NOT EXISTS queue (
      pos INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, state TEXT NOT NULL,
      spec TEXT NOT NULL, checkpoint TEXT, enqueued_at INTEGER NOT NULL)`);
    sql.exec(
      `CREATE TABLE IF NOT EXISTS received (run_id TEXT PRIMARY KEY, result TEXT NOT NULL, at INTEGER NOT NULL)`,
    );
    sql.exec(
      `CREATE TABLE IF NOT EXISTS finished (run_id TEXT PRIMARY KEY, outcome TEXT NOT NULL, at INTEGER NOT NULL)`,
    );
    sql.exec(`CREATE TABLE IF NOT EXISTS outbox (
      delivery_id TEXT PRIMARY KEY, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_at INTEGER NOT NULL)`);
  },
  // 2: the turn context copy.
  (sql) => {
    sql.exec(`CREATE TABLE IF NOT EXISTS context (
      ord INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, id TEXT NOT NULL UNIQUE,
      run_id TEXT, tokens INTEGER NOT NULL, message TEXT NOT NULL)`);
  },
  // 3: attempts, per-step progress.
  (sql) => {
    sql.exec(`ALTER TABLE queue ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0`);
    sql.exec(`ALTER TABLE queue ADD COLUMN starts INTEGER NOT NULL DEFAULT 0`);
    sql.exec(`ALTER TABLE queue ADD COLUMN retry_at INTEGER`);
    sql.exec(`ALTER TABLE queue ADD COLUMN last_error TEXT`);
    sql.exec(`CREATE TABLE IF NOT EXISTS run_steps (
      run_id TEXT NOT NULL, idx INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (run_id, idx))`);
  },
  // 4: the write-behind journal.
  (sql) => {
    sql.exec(`CREATE TABLE IF NOT EXISTS d1_pending (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`);
  },
  // 5: its refusals counted.
  (sql) => {
    sql.exec(`ALTER TABLE d1_pending ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0`);
  },
  // 6: a delivery's outcome kept until D1 shows it.
  (sql) => {
    sql.exec(`ALTER TABLE outbox ADD COLUMN done INTEGER NOT NULL DEFAULT 0`);
    sql.exec(`ALTER TABLE outbox ADD COLUMN state TEXT`);
    sql.exec(`ALTER TABLE outbox ADD COLUMN state_v INTEGER NOT NULL DEFAULT 0`);
    sql.exec(`ALTER TABLE outbox ADD COLUMN record_at INTEGER`);
    sql.exec(`ALTER TABLE outbox ADD COLUMN created_at INTEGER`);
  },
  // 7: see below.
  (sql) => migrateToV7(sql),
  // 8: a running run's deadline, a due item of the actor's scheduler.
  (sql) => {
    sql.exec(`ALTER TABLE queue ADD COLUMN deadline INTEGER`);
  },
  // 9: the signal log.
  (sql) => {
    sql.exec(SIGNALS_DDL);
  },
];

/** Brings the actor's storage to the current version (a no-op once it is). */
export function migrate(sql: SqlStorage): void {
  sql.exec(`CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID`);
  const stored = sql.exec<{ v: string }>(`SELECT v FROM kv WHERE k = 'schema_version'`).toArray()[0]?.v;
  const version = Number(stored ?? 0);
  if (version === SCHEMA_VERSION) return;
  if (version === 0 && !sql.exec(`SELECT 1 FROM sqlite_master WHERE name = 'queue'`).toArray().length) {
    for (const ddl of CURRENT) sql.exec(ddl);
  } else {
    for (let v = version; v < SCHEMA_VERSION; v++) STEPS[v]?.(sql);
  }
  sql.exec(
    `INSERT INTO kv (k, v) VALUES ('schema_version', ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v`,
    String(SCHEMA_VERSION),
  );
}

/**
 * Version 7: the tables keyed by text become WITHOUT ROWID, the queue and the context copy lose
 * AUTOINCREMENT (and the queue its unique run id, the context its ord key), and the accepted run
 * ids and finished outcomes become one table; each table is rebuilt with its rows.
 */
function migrateToV7(sql: SqlStorage): void {
  const rebuild = (table: string, ddl: string, columns: string) => {
    sql.exec(`ALTER TABLE ${table} RENAME TO ${table}_v6`);
    sql.exec(ddl);
    sql.exec(`INSERT INTO ${table} (${columns}) SELECT ${columns} FROM ${table}_v6`);
    sql.exec(`DROP TABLE ${table}_v6`);
  };
  // The tables as version 7 has them (later versions migrate on from there).
  rebuild("kv", `CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID`, "k, v");
  const queueColumns =
    "pos, run_id, state, spec, checkpoint, enqueued_at, attempts, starts, retry_at, last_error";
  rebuild(
    "queue",
    `CREATE TABLE queue (
      pos INTEGER PRIMARY KEY, run_id TEXT NOT NULL, state TEXT NOT NULL,
      spec TEXT NOT NULL, checkpoint TEXT, enqueued_at INTEGER NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0, starts INTEGER NOT NULL DEFAULT 0, retry_at INTEGER, last_error TEXT)`,
    queueColumns,
  );
  rebuild(
    "run_steps",
    `CREATE TABLE run_steps (
      run_id TEXT NOT NULL, idx INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (run_id, idx)) WITHOUT ROWID`,
    "run_id, idx, message",
  );
  const outboxColumns =
    "delivery_id, payload, attempts, next_at, done, state, state_v, record_at, created_at";
  rebuild(
    "outbox",
    `CREATE TABLE outbox (
      delivery_id TEXT PRIMARY KEY, payload TEXT NOT NULL, attempts INTEGER NOT NULL, next_at INTEGER NOT NULL,
      done INTEGER NOT NULL DEFAULT 0, state TEXT, state_v INTEGER NOT NULL DEFAULT 0, record_at INTEGER,
      created_at INTEGER) WITHOUT ROWID`,
    outboxColumns,
  );
  rebuild(
    "context",
    `CREATE TABLE context (
      session_id TEXT NOT NULL, id TEXT PRIMARY KEY, ord INTEGER NOT NULL,
      run_id TEXT, tokens INTEGER NOT NULL, message TEXT NOT NULL) WITHOUT ROWID`,
    "session_id, id, ord, run_id, tokens, message",
  );
  sql.exec(`CREATE TABLE run_ids (
    run_id TEXT PRIMARY KEY, result TEXT, outcome TEXT, at INTEGER NOT NULL) WITHOUT ROWID`);
  sql.exec(`INSERT INTO run_ids (run_id, result, at) SELECT run_id, result, at FROM received`);
  sql.exec(
    `INSERT INTO run_ids (run_id, outcome, at) SELECT run_id, outcome, at FROM finished WHERE true
     ON CONFLICT (run_id) DO UPDATE SET outcome = excluded.outcome, at = MAX(run_ids.at, excluded.at)`,
  );
  sql.exec(`DROP TABLE received`);
  sql.exec(`DROP TABLE finished`);
}
