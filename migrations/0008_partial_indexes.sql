DROP INDEX `messages_timestamp`;--> statement-breakpoint
DROP INDEX `deliveries_status_recent`;--> statement-breakpoint
DROP INDEX `deliveries_due`;--> statement-breakpoint
CREATE INDEX `deliveries_status_recent` ON `deliveries` (`status`,`created_at`,`delivery_id`) WHERE "deliveries"."status" != 'delivered';--> statement-breakpoint
CREATE INDEX `deliveries_due` ON `deliveries` (`status`,`next_attempt_at`) WHERE "deliveries"."status" IN ('pending', 'retrying');--> statement-breakpoint
DROP INDEX `runs_idempotency`;--> statement-breakpoint
DROP INDEX `runs_active`;--> statement-breakpoint
CREATE UNIQUE INDEX `runs_idempotency` ON `runs` (`idempotency_key`) WHERE "runs"."idempotency_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX `runs_active` ON `runs` (`status`,`created_at`) WHERE "runs"."status" IN ('queued', 'running');--> statement-breakpoint
DROP INDEX `sessions_spawned_by`;--> statement-breakpoint
DROP INDEX `sessions_agent_label`;--> statement-breakpoint
CREATE INDEX `sessions_spawned_by` ON `sessions` (`spawned_by`,`updated_at`) WHERE "sessions"."spawned_by" IS NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `sessions_agent_label` ON `sessions` (`agent_id`,`label`) WHERE "sessions"."label" IS NOT NULL;