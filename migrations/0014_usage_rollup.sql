-- Usage and cost per day, session and model (SPEC §21 usage.summary): each run's finalize adds
-- to its row in the same batch as the run's row; summaries read these rows, never every run.
-- WITHOUT ROWID: a day's first run of a session writes one row and no index row.
CREATE TABLE `usage_daily` (
	`day` text NOT NULL,
	`session_key` text NOT NULL,
	`model` text NOT NULL,
	`agent_id` text NOT NULL,
	`channel` text,
	`runs` integer DEFAULT 0 NOT NULL,
	`model_calls` integer DEFAULT 0 NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`cache_read_tokens` integer DEFAULT 0 NOT NULL,
	`cache_write_tokens` integer DEFAULT 0 NOT NULL,
	`cost_usd` real DEFAULT 0 NOT NULL,
	`unpriced_calls` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`day`, `session_key`, `model`)
) WITHOUT ROWID;
