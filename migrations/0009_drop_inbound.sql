DROP INDEX IF EXISTS `inbound_created`;--> statement-breakpoint
DROP TABLE IF EXISTS `inbound`;