-- The queue mode a session was given with `/queue <mode>` (SPEC §20): followup, collect, steer or
-- interrupt; null follows session.queue.mode.
ALTER TABLE `sessions` ADD `queue_mode` text;