-- A run's timeline (SPEC §21 runs.get): the model and tool spans its agent loop recorded.
ALTER TABLE `runs` ADD `timeline` text;
