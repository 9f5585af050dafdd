-- Back to level 9: the tasks indexed by app and status again.
ALTER TABLE pulse_tasks ADD KEY ix_task_app (app_id, status);
