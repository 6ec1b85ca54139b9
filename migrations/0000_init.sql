CREATE TABLE `deliveries` (
	`delivery_id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`session_key` text NOT NULL,
	`run_id` text,
	`channel` text NOT NULL,
	`account_id` text NOT NULL,
	`to` text NOT NULL,
	`thread_id` text,
	`reply_to_message_id` text,
	`text` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer,
	`last_error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`delivered_at` integer
);
--> statement-breakpoint
CREATE INDEX `deliveries_recent` ON `deliveries` (`created_at`,`delivery_id`);--> statement-breakpoint
CREATE INDEX `deliveries_status_recent` ON `deliveries` (`status`,`created_at`,`delivery_id`);--> statement-breakpoint
CREATE INDEX `deliveries_session_recent` ON `deliveries` (`session_key`,`created_at`,`delivery_id`);--> statement-breakpoint
CREATE INDEX `deliveries_due` ON `deliveries` (`status`,`next_attempt_at`);--> statement-breakpoint
CREATE TABLE `inbound` (
	`channel` text NOT NULL,
	`account_id` text NOT NULL,
	`message_id` text NOT NULL,
	`session_key` text NOT NULL,
	`session_id` text NOT NULL,
	`run_id` text,
	`status` text NOT NULL,
	`created_at` integer DEFAULT (unixepoch() * 1000) NOT NULL,
	PRIMARY KEY(`channel`, `account_id`, `message_id`)
);
--> statement-breakpoint
CREATE INDEX `inbound_created` ON `inbound` (`created_at`);--> statement-breakpoint
CREATE TABLE `messages` (
	`session_id` text NOT NULL,
	`seq` integer NOT NULL,
	`id` text NOT NULL,
	`role` text NOT NULL,
	`content` text NOT NULL,
	`tool_call_id` text,
	`tool_name` text,
	`is_error` integer,
	`timestamp` integer NOT NULL,
	`run_id` text,
	`model` text,
	`usage` text,
	`provenance` text,
	`first_kept_seq` integer,
	PRIMARY KEY(`session_id`, `seq`)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `messages_id` ON `messages` (`id`);--> statement-breakpoint
CREATE TABLE `runs` (
	`run_id` text PRIMARY KEY NOT NULL,
	`session_key` text NOT NULL,
	`session_id` text NOT NULL,
	`trigger` text NOT NULL,
	`status` text NOT NULL,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`ended_at` integer,
	`error` text,
	`reply` text,
	`usage` text,
	`model` text,
	`deliver` integer DEFAULT false NOT NULL,
	`delivered` integer,
	`idempotency_key` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `runs_idempotency` ON `runs` (`idempotency_key`);--> statement-breakpoint
CREATE INDEX `runs_session` ON `runs` (`session_key`,`created_at`);--> statement-breakpoint
CREATE INDEX `runs_active` ON `runs` (`status`,`created_at`);--> statement-breakpoint
CREATE TABLE `sessions` (
	`key` text PRIMARY KEY NOT NULL,
	`agent_id` text NOT NULL,
	`session_id` text NOT NULL,
	`kind` text NOT NULL,
	`chat_type` text,
	`channel` text,
	`display_name` text,
	`label` text,
	`subject` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`session_started_at` integer NOT NULL,
	`last_interaction_at` integer,
	`model` text,
	`model_override` text,
	`context_tokens` integer DEFAULT 0 NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`total_tokens` integer DEFAULT 0 NOT NULL,
	`compaction_count` integer DEFAULT 0 NOT NULL,
	`thinking_level` text,
	`verbose_level` text,
	`system_sent` integer DEFAULT false NOT NULL,
	`aborted_last_run` integer DEFAULT false NOT NULL,
	`send_policy` text,
	`last_channel` text,
	`last_to` text,
	`last_account_id` text,
	`last_thread_id` text,
	`delivery_context` text,
	`origin` text,
	`spawned_by` text,
	`archived_at` integer,
	`run_status` text DEFAULT 'idle' NOT NULL,
	`expires_at` integer
);
--> statement-breakpoint
CREATE INDEX `sessions_recent` ON `sessions` (`updated_at`,`key`);--> statement-breakpoint
CREATE INDEX `sessions_agent_recent` ON `sessions` (`agent_id`,`updated_at`,`key`);--> statement-breakpoint
CREATE INDEX `sessions_kind_recent` ON `sessions` (`kind`,`updated_at`,`key`);--> statement-breakpoint
CREATE INDEX `sessions_spawned_by` ON `sessions` (`spawned_by`,`updated_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `sessions_agent_label` ON `sessions` (`agent_id`,`label`);--> statement-breakpoint
CREATE INDEX `sessions_expiry` ON `sessions` (`expires_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `sessions_session_id` ON `sessions` (`session_id`);--> statement-breakpoint
CREATE TABLE `transcripts` (
	`session_id` text PRIMARY KEY NOT NULL,
	`session_key` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `transcripts_key` ON `transcripts` (`session_key`,`created_at`);--> statement-breakpoint
CREATE INDEX `transcripts_created` ON `transcripts` (`created_at`);