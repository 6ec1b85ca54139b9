-- Usage per day, agent, model and channel (SPEC §21): what usage.summary by day, agent, model or
-- channel and a budget's agent spend read, a few rows a day however many sessions there are.
-- Each run's finalize adds to it beside usage_daily; filled here from usage_daily's rows.
-- WITHOUT ROWID: a new row writes no index row.
CREATE TABLE `usage_agents` (
	`day` text NOT NULL,
	`agent_id` text NOT NULL,
	`model` text NOT NULL,
	`channel` text NOT NULL,
	`runs` integer DEFAULT 0 NOT NULL,
	`model_calls` integer DEFAULT 0 NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`cache_read_tokens` integer DEFAULT 0 NOT NULL,
	`cache_write_tokens` integer DEFAULT 0 NOT NULL,
	`cost_usd` real DEFAULT 0 NOT NULL,
	`unpriced_calls` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`day`, `agent_id`, `model`, `channel`)
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `usage_agents` SELECT `day`, `agent_id`, `model`, coalesce(`channel`, ''), SUM(`runs`),
	SUM(`model_calls`), SUM(`input_tokens`), SUM(`output_tokens`), SUM(`cache_read_tokens`),
	SUM(`cache_write_tokens`), SUM(`cost_usd`), SUM(`unpriced_calls`)
FROM `usage_daily` GROUP BY 1, 2, 3, 4;
