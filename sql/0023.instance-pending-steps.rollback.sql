-- Back to level 22: the count goes; a decision of an instance with more than one open step reads its other steps'
-- facts again.
ALTER TABLE weave_instances DROP COLUMN pending_steps;
