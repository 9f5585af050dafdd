-- Back to level 21: the facts that order an instance's decisions are read through the instance's key alone.
ALTER TABLE pulse_attempts DROP KEY ix_attempt_instance, DROP COLUMN instance_id;
ALTER TABLE pulse_tasks DROP KEY ix_task_instance, ADD KEY ix_task_instance (instance_id, status);
ALTER TABLE pulse_inbox DROP KEY ix_inbox_instance, ADD KEY ix_inbox_instance (instance_id, state);
ALTER TABLE weave_pending_advances DROP KEY ix_checkpoint_instance_due;
