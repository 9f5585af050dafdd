-- Weave schema, level 9: a task's end no longer waits for the task creations of its app.
-- Level 3 kept the tasks in flight of an app and of a queue as counters on their rows, raised by the guarded
-- update that creates a task and lowered where a task reaches its final status. Both took the app's and the queue's
-- row exclusively until commit, so every report of every worker of an app queued behind every task creation of that
-- app: in a run of 1,000 polls of one app the samples of waiting transactions were all on weave_apps' primary key,
-- and a round's answer waited 1.6-1.9 s (median) from its task's creation to its consumption, against 65-87 ms once
-- the reports no longer took the rows. A creation still takes the rows: room is checked exactly, and only one
-- creator of an app decides at a time. A task's end now adds one to a release stripe of its app and of its queue,
-- picked by the task id, rows no creator locks: the tasks in flight are the slots taken minus the releases of every
-- stripe, read by the creator without a lock (a release not committed yet counts as still in flight, so room is
-- never over-counted). An invariant checks both against the task rows. Existing installs keep their counts: the
-- slots taken are the tasks in flight at upgrade time, with every stripe at zero.
-- depends: 0003.task-counters

CREATE TABLE pulse_slot_releases (
    owner_kind ENUM('APP', 'QUEUE') NOT NULL COMMENT 'Whose slots: an app''s (quota) or a queue''s (capacity).',
    owner_id BIGINT UNSIGNED NOT NULL COMMENT 'weave_apps.id or weave_queues.id.',
    stripe TINYINT UNSIGNED NOT NULL COMMENT '0-15: a task''s end releases into stripe task id MOD 16.',
    released BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Tasks of the owner that reached a final status here.',
    PRIMARY KEY (owner_kind, owner_id, stripe)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
  COMMENT='Ended tasks per app and queue, in 16 stripes: in flight = slots_taken of the owner minus every stripe.';

ALTER TABLE weave_apps
    CHANGE in_flight slots_taken BIGINT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'Tasks ever created for the app (net of its releases at upgrade); in flight = this minus its releases.';

ALTER TABLE weave_queues
    CHANGE in_flight slots_taken BIGINT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'Tasks ever created in the queue (net of its releases at upgrade); in flight = this minus its releases.';

INSERT INTO pulse_slot_releases (owner_kind, owner_id, stripe, released)
SELECT o.kind, o.id, s.n, 0
  FROM (SELECT 'APP' AS kind, id FROM weave_apps UNION ALL SELECT 'QUEUE', id FROM weave_queues) o
 CROSS JOIN (SELECT a.n * 4 + b.n AS n
               FROM (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) a
              CROSS JOIN (SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) b) s;
