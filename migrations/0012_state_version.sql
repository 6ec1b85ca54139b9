-- The session's stateVersion (SPEC §20 "State awareness"): the newest version of its signal log,
-- which its actor keeps; written with the entry, so sessions_list shows it without asking.
ALTER TABLE `sessions` ADD `state_version` integer DEFAULT 0 NOT NULL;