-- `/usage tokens|full` (SPEC §21): the usage footer of a session's replies; null is off.
ALTER TABLE `sessions` ADD `usage_mode` text;
