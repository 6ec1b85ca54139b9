/**
 * The statements of one step of the search index's backfill (migration 0010): plain SQL with no
 * import, shared by the cron task (db/search.ts) and `npm run migrate` (scripts/migrate.ts),
 * which runs it through wrangler against local or deployed databases.
 */

/** Rowids one backfill step covers: a bounded statement however large the transcripts are. */
export const BACKFILL_ROWIDS = 2_000;

/**
 * One step of the backfill: indexes the messages in the next `BACKFILL_ROWIDS` rowids up to
 * `upto` (what the triggers did not see), moves `through` past them and counts them. `INSERT OR
 * REPLACE`: a rowid that a later message reused after a deletion, and which its trigger already
 * indexed, is indexed again with the same text. Run again after a failure, it does the same.
 */
export const BACKFILL_STEP_SQL = [
  `INSERT OR REPLACE INTO messages_fts (rowid, body)
   SELECT rid, body FROM (
     SELECT m.rowid AS rid, (SELECT group_concat(j.value ->> '$.text', ' ') FROM json_each(m.content) AS j
       WHERE j.value ->> '$.type' = 'text') AS body
     FROM search_backfill AS k
     JOIN messages AS m ON m.rowid > k.through AND m.rowid <= min(k.upto, k.through + ${BACKFILL_ROWIDS})
     WHERE k.id = 1 AND m.role IN ('user', 'assistant') AND m.id NOT LIKE '%:flush:%')
   WHERE body != ''`,
  `UPDATE search_backfill SET
     indexed = indexed + (SELECT count(*) FROM messages AS m
       WHERE m.rowid > through AND m.rowid <= min(upto, through + ${BACKFILL_ROWIDS})
         AND m.role IN ('user', 'assistant')),
     through = min(upto, through + ${BACKFILL_ROWIDS})
   WHERE id = 1 AND through < upto`,
];

/** What is left of the backfill, in rowids: 0 when it is done. */
export const BACKFILL_LEFT_ROWIDS_SQL = "SELECT upto - through AS rowids FROM search_backfill WHERE id = 1";
