CREATE TABLE `memories` (
	`id` text PRIMARY KEY NOT NULL,
	`agent_id` text NOT NULL,
	`key` text,
	`text` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`session_key` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `memories_agent_key` ON `memories` (`agent_id`,`key`) WHERE "memories"."key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `memories_agent_recent` ON `memories` (`agent_id`,`updated_at`);--> statement-breakpoint
CREATE INDEX `messages_compactions` ON `messages` (`session_id`,`seq`) WHERE "messages"."first_kept_seq" IS NOT NULL;