CREATE TABLE `storage_placement` (
	`id` integer PRIMARY KEY NOT NULL,
	`databases` text NOT NULL,
	`moving_to` text,
	`counts` text,
	`updated_at` integer NOT NULL
);
