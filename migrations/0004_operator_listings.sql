CREATE INDEX `runs_recent` ON `runs` (`created_at`,`run_id`);--> statement-breakpoint
CREATE INDEX `sessions_channel_recent` ON `sessions` (coalesce("last_channel", "channel"),`updated_at`,`key`);
