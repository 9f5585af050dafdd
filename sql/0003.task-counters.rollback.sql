-- Back to level 1: the counters go; room is counted from the task rows again.
ALTER TABLE weave_queues DROP COLUMN in_flight;
ALTER TABLE weave_apps DROP COLUMN in_flight;
