CREATE TABLE `job_runs` (
	`job_id` text NOT NULL,
	`scheduled_for` integer NOT NULL,
	`run_id` text NOT NULL,
	`session_key` text NOT NULL,
	`claimed_at` integer NOT NULL,
	`late` integer DEFAULT false NOT NULL,
	`queued_at` integer,
	`skipped` text,
	PRIMARY KEY(`job_id`, `scheduled_for`)
);
--> statement-breakpoint
CREATE INDEX `job_runs_claimed` ON `job_runs` (`claimed_at`);--> statement-breakpoint
CREATE TABLE `maintenance` (
	`task` text PRIMARY KEY NOT NULL,
	`last_run_at` integer NOT NULL,
	`last_run` text NOT NULL,
	`last_work` text
);
--> statement-breakpoint
DROP INDEX `sessions_expiry`;--> statement-breakpoint
ALTER TABLE `sessions` ADD `expired_at` integer;--> statement-breakpoint
CREATE INDEX `sessions_due` ON `sessions` (`expires_at`) WHERE "sessions"."expired_at" IS NULL AND "sessions"."expires_at" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `messages_timestamp` ON `messages` (`timestamp`);