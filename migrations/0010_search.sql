-- Transcript search (SPEC §20 sessions_search): a contentless FTS5 index of the text of user
-- and assistant messages, keyed by the message's rowid. The triggers keep it in the same write
-- as the messages themselves (an append, a rebalance's copy, retention's delete), so a search
-- sees what a history read sees. Tool results, system entries (compaction summaries among them)
-- and memory-flush turns are not indexed. Messages stored before this migration are indexed by
-- the backfill (src/db/search-index.ts), which `npm run migrate` and the cron trigger run in
-- chunks, resuming from `search_backfill.through` up to `upto`, the largest rowid at migration.
CREATE VIRTUAL TABLE `messages_fts` USING fts5(body, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');--> statement-breakpoint
CREATE TRIGGER `messages_fts_insert` AFTER INSERT ON `messages`
WHEN NEW.`role` IN ('user', 'assistant') AND NEW.`id` NOT LIKE '%:flush:%'
BEGIN
  INSERT OR REPLACE INTO `messages_fts` (rowid, body)
  SELECT NEW.rowid, b.body FROM (
    SELECT group_concat(j.value ->> '$.text', ' ') AS body FROM json_each(NEW.`content`) AS j
    WHERE j.value ->> '$.type' = 'text') AS b
  WHERE b.body IS NOT NULL AND b.body != '';
END;--> statement-breakpoint
CREATE TRIGGER `messages_fts_delete` AFTER DELETE ON `messages`
WHEN OLD.`role` IN ('user', 'assistant')
BEGIN
  DELETE FROM `messages_fts` WHERE rowid = OLD.rowid;
END;--> statement-breakpoint
CREATE TABLE `search_backfill` (
  `id` integer PRIMARY KEY NOT NULL CHECK (`id` = 1),
  `through` integer NOT NULL,
  `upto` integer NOT NULL,
  `indexed` integer NOT NULL DEFAULT 0
);--> statement-breakpoint
INSERT INTO `search_backfill` (`id`, `through`, `upto`) SELECT 1, 0, COALESCE(MAX(rowid), 0) FROM `messages`;
