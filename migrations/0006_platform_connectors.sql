CREATE TABLE `access_refusals` (
	`channel` text NOT NULL,
	`reason` text NOT NULL,
	`count` integer NOT NULL,
	`last_at` integer NOT NULL,
	PRIMARY KEY(`channel`, `reason`)
);
--> statement-breakpoint
CREATE TABLE `paired_senders` (
	`channel` text NOT NULL,
	`peer_id` text NOT NULL,
	`approved_at` integer NOT NULL,
	PRIMARY KEY(`channel`, `peer_id`)
);
--> statement-breakpoint
CREATE TABLE `pairing_codes` (
	`channel` text NOT NULL,
	`code` text NOT NULL,
	`account_id` text NOT NULL,
	`peer_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`channel`, `code`)
);
--> statement-breakpoint
CREATE UNIQUE INDEX `pairing_codes_peer` ON `pairing_codes` (`channel`,`peer_id`);--> statement-breakpoint
CREATE INDEX `pairing_codes_expiry` ON `pairing_codes` (`channel`,`expires_at`);--> statement-breakpoint
ALTER TABLE `deliveries` ADD `parts_sent` integer;