-- Back to level 6: the count goes; the ROOT walk counts the steps again.
ALTER TABLE weave_instances DROP COLUMN open_steps;
