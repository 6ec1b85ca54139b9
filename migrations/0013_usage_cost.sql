-- What the priced model calls of the session's current sessionId cost, in US dollars (SPEC §21),
-- beside its token counts; written with the entry at each run's end.
ALTER TABLE `sessions` ADD `cost_usd` real DEFAULT 0 NOT NULL;
