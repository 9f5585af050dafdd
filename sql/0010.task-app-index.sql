-- Weave schema, level 10: no index of tasks by app. It served the room check's count of an app's tasks in flight
-- (level 3 replaced that count with the app's counter) and nothing else: no decision reads tasks by app any more,
-- and the app list reads the counter too. Every task changes status two or three times (queued, running, ended),
-- and each change rewrote this index's entry beside the others.
-- depends: 0009.task-slot-releases

ALTER TABLE pulse_tasks DROP KEY ix_task_app;
