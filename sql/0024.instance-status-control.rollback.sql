-- Back to level 23: the instances' status index without their control.
ALTER TABLE weave_instances DROP KEY ix_instance_status, ADD KEY ix_instance_status (namespace_id, status, id);
