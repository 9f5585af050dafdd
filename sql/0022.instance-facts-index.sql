-- Weave schema, level 22: the facts that order an instance's decisions, read by their times.
-- A decision of an instance with more than one open step first reads the earliest stored time among the facts of its
-- other steps still to be decided (R-13, F-9): checkpoints, task outcomes waiting in the inbox, queued tasks'
-- deadlines and running attempts' leases. Each was read through the instance's key alone, so every decision read
-- every open wait, every task in flight and every attempt running of its instance: a report in an instance with 200
-- tasks running read 635 rows, each one of a wide fan-out's decisions as much again. Only the facts earlier than the
-- decision's own time matter, and with each fact's time in its index after the instance (and the state), a decision
-- reads those only: as many rows with 200 tasks in flight as with 4. An attempt names its instance for it, written
-- by the claim that starts it; attempts started before this level are given theirs here. An invariant (M-4.13c)
-- checks that an attempt's and an inbox outcome's instance is its task's.
-- Its cost: a checkpoint's second index entry (written with it, removed with it), an attempt's instance and its
-- index entry (moved by each heartbeat, as its lease index entry is), and the time in two existing index entries.
-- depends: 0021.signal-payload-bytes

ALTER TABLE weave_pending_advances ADD KEY ix_checkpoint_instance_due (instance_id, due_at);

ALTER TABLE pulse_inbox DROP KEY ix_inbox_instance, ADD KEY ix_inbox_instance (instance_id, state, occurred_at);

ALTER TABLE pulse_tasks DROP KEY ix_task_instance, ADD KEY ix_task_instance (instance_id, status, deadline_at);

ALTER TABLE pulse_attempts
    ADD COLUMN instance_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Instance the task serves, as its task names it.'
        AFTER task_id;

UPDATE pulse_attempts a JOIN pulse_tasks t ON t.id = a.task_id SET a.instance_id = t.instance_id;

ALTER TABLE pulse_attempts ADD KEY ix_attempt_instance (instance_id, status, lease_expires_at);
