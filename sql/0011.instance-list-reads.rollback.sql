-- Back to level 10: the PAUSED instances and the instances with an open reason of a code are found by walking the
-- namespace again.
ALTER TABLE weave_review_reasons DROP KEY ix_review_open, ADD KEY ix_review_open (closed_at, instance_id);
ALTER TABLE weave_instances DROP KEY ix_instance_control;
