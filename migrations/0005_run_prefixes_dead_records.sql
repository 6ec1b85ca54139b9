CREATE TABLE `dead_records` (
	`run_id` text PRIMARY KEY NOT NULL,
	`session_key` text NOT NULL,
	`error` text NOT NULL,
	`attempts` integer NOT NULL,
	`body` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `dead_records_recent` ON `dead_records` (`created_at`,`run_id`);--> statement-breakpoint
CREATE TABLE `run_prefixes` (
	`prefix` text NOT NULL,
	`session_key` text NOT NULL,
	PRIMARY KEY(`prefix`, `session_key`)
);
