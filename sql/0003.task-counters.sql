-- Weave schema, level 3: in-flight task counters on the app and queue rows.
-- Room for a new task (R-8, M-4.7) was counted with COUNT(*) over pulse_tasks for every task created:
-- a read that grows with the backlog, under an exclusive lock on the app row that serialised every
-- decision of the app. The counters are changed in the same transaction as the task's creation (a
-- guarded conditional UPDATE) and as its final status, and the invariants check them against the rows.
-- Existing installs are filled from the tasks in flight at upgrade time.
-- depends: 0001.schema

ALTER TABLE weave_apps
    ADD COLUMN in_flight INT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'QUEUED+RUNNING tasks of the app now; changed with task creation and a task''s final status.'
        AFTER max_in_flight;

ALTER TABLE weave_queues
    ADD COLUMN in_flight INT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'QUEUED+RUNNING tasks in the queue now; changed with task creation and a task''s final status.'
        AFTER capacity;

UPDATE weave_apps a
  JOIN (SELECT app_id, COUNT(*) AS n FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING') GROUP BY app_id) t
    ON t.app_id = a.id
   SET a.in_flight = t.n;

UPDATE weave_queues q
  JOIN (SELECT queue_id, COUNT(*) AS n FROM pulse_tasks WHERE status IN ('QUEUED', 'RUNNING') GROUP BY queue_id) t
    ON t.queue_id = q.id
   SET q.in_flight = t.n;
