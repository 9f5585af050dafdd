-- Back to level 8: the releases are taken off the slots taken, which become the in-flight counters again.
UPDATE weave_apps a
   SET a.slots_taken = a.slots_taken - (SELECT COALESCE(SUM(r.released), 0) FROM pulse_slot_releases r
                                         WHERE r.owner_kind = 'APP' AND r.owner_id = a.id);

UPDATE weave_queues q
   SET q.slots_taken = q.slots_taken - (SELECT COALESCE(SUM(r.released), 0) FROM pulse_slot_releases r
                                         WHERE r.owner_kind = 'QUEUE' AND r.owner_id = q.id);

ALTER TABLE weave_apps
    CHANGE slots_taken in_flight INT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'QUEUED+RUNNING tasks of the app now; changed with task creation and a task''s final status.';

ALTER TABLE weave_queues
    CHANGE slots_taken in_flight INT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'QUEUED+RUNNING tasks in the queue now; changed with task creation and a task''s final status.';

DROP TABLE pulse_slot_releases;
