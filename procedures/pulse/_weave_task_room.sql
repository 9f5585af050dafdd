-- R-8 and M-4.7 for one new task: the queue must exist and have capacity left, the app quota must
-- have room. Read from the slots taken on the queue and app rows less their release stripes (one indexed read,
-- whatever the backlog), so a creator that finds no room defers without taking a lock. The answer is a
-- plain read: _pulse_slot_take takes the slot with a guarded conditional UPDATE of the same
-- counters, which is what keeps two creators from both taking the last one.
-- Work deferred for room waits in line, by the time its deferral began (deferred_since, then the checkpoint's id):
-- a creator that sees room leaves it to those that waited before it, as many as there are free slots, and a task's
-- end wakes the first in line (_pulse_inbox_add). A creator held back so wakes the first in line too: room that no
-- one in front of it is looking at is a wake that was missed (a deferral that committed while a task's end was
-- being decided, or a woken look that ended without the slot), and the line's looks back off (_weave_checkpoint_defer).
-- The same read says whether anyone waits at all, so a creator of an app that nothing waits for pays no statement
-- for the line.
-- A missing queue is a reason to wait, not an error: an operator may create it later. The slots given back are
-- answered too (NULL when the app or queue is missing): a creation that follows takes its slot from them.
CREATE PROCEDURE _weave_task_room(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_step_key     VARCHAR(64),
        IN  in_queue        VARCHAR(64),
        IN  in_now          DATETIME(6),
        OUT out_why         VARCHAR(256),
        OUT out_app_released   BIGINT UNSIGNED,
        OUT out_queue_released BIGINT UNSIGNED,
        OUT out_waits_for      BIGINT UNSIGNED)
    COMMENT 'Internal. Description: NULL when a task for the instance may be created on in_queue now, else why not
(queue missing, queue full, app quota full), from the slots taken less their releases and the work waiting for them
before the checkpoint of (instance, in_step_key); out_app_released, out_queue_released: the slots the app and the
queue have been given back (their release stripes), read without a lock; out_waits_for: the queue (QUEUE_FULL) or
app (QUOTA_FULL) whose room the caller waits for, else NULL. A caller held back by a line with room free wakes
its first (_pulse_room_wake) at in_now; a NULL in_now only answers. The caller holds the instance lock.
Errors: 50007 INVALID_STATE when the app or queue has no release stripes.
Rules: R-8, M-4.7.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_queue BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_capacity INT UNSIGNED;
    DECLARE v_queue_taken BIGINT UNSIGNED;
    DECLARE v_app BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_quota INT UNSIGNED;
    DECLARE v_app_taken BIGINT UNSIGNED;
    DECLARE v_app_line BOOLEAN;  -- whether any work waits for the app (its room or its enabling), or the queue's room
    DECLARE v_queue_line BOOLEAN;
    DECLARE v_since DATETIME(6) DEFAULT NULL;  -- the caller's checkpoint's place among the work waiting, and its id
    DECLARE v_app_since DATETIME(6) DEFAULT NULL;  -- its place in the app's line (a wait for the app's enabling too)
    DECLARE v_id BIGINT UNSIGNED DEFAULT 0;
    DECLARE v_last DATETIME(6) DEFAULT CAST('9999-12-31 23:59:59.999999' AS DATETIME(6));  -- after every place
    DECLARE v_app_free INT UNSIGNED;
    DECLARE v_queue_free INT UNSIGNED;
    DECLARE v_app_ahead INT UNSIGNED;
    DECLARE v_queue_ahead INT UNSIGNED;
    DECLARE v_stripes INT;  -- the app's and the queue's release stripes, counted when a sum of them came back empty

    SET out_why = NULL, out_waits_for = NULL;
    SELECT a.id, a.max_in_flight, a.slots_taken,
           (SELECT SUM(r.released) FROM pulse_slot_releases r WHERE r.owner_kind = 'APP' AND r.owner_id = a.id),
           q.id, q.capacity, q.slots_taken,
           (SELECT SUM(r.released) FROM pulse_slot_releases r WHERE r.owner_kind = 'QUEUE' AND r.owner_id = q.id),
           -- (A KILL QUERY that lands in one of these two EXISTS makes it 0 with no error, see _weave_interrupted:
           -- this creation then does not give way to the line's waiters. Accepted: a place in line lost once, never
           -- a wrong write; seeing it would read the whole line or take a statement more on every creation.)
           EXISTS (SELECT 1 FROM weave_pending_advances w WHERE w.deferred_reason IN ('QUOTA_FULL', 'APP_DISABLED')
                      AND w.deferred_for = a.id),
           EXISTS (SELECT 1 FROM weave_pending_advances w WHERE w.deferred_reason = 'QUEUE_FULL'
                      AND w.deferred_for = q.id)
      INTO v_app, v_quota, v_app_taken, out_app_released, v_queue, v_capacity, v_queue_taken, out_queue_released,
           v_app_line, v_queue_line
      FROM weave_instances i
      LEFT JOIN weave_apps a ON a.id = i.app_id
      LEFT JOIN weave_queues q ON q.namespace_id = i.namespace_id AND q.name = in_queue
     WHERE i.id = in_instance_id AND i.namespace_id = in_namespace_id;
    IF v_queue IS NULL THEN
        SET out_why = CONCAT('QUEUE_NOT_FOUND: queue ', COALESCE(in_queue, '(none)'), ' does not exist');
    ELSEIF v_app IS NULL THEN
        SET out_why = 'APP_NOT_FOUND: app of the instance does not exist';
    ELSEIF out_app_released IS NULL OR out_queue_released IS NULL THEN
        -- Provisioning gives every app and queue its stripes (M-4.7b): without them room cannot be known. With them,
        -- a sum came back empty because a KILL QUERY cut it short (see _weave_root_advance): the interrupt it is.
        SELECT COUNT(*) INTO v_stripes FROM pulse_slot_releases
         WHERE (owner_kind = 'APP' AND owner_id = v_app) OR (owner_kind = 'QUEUE' AND owner_id = v_queue);
        IF v_stripes = 32 THEN
            CALL _weave_raise(50016, 'INTERRUPTED: the read of the slots given back came back empty; nothing is changed');
        END IF;
        CALL _weave_raise(50007, 'INVALID_STATE: the app or queue has no release stripes; left for an operator');
    ELSEIF v_queue_taken - out_queue_released >= v_capacity THEN
        SET out_why = CONCAT('QUEUE_FULL: queue ', in_queue, ' is full (capacity ', v_capacity, ')'),
            out_waits_for = v_queue;
    ELSEIF v_app_taken - out_app_released >= v_quota THEN
        SET out_why = CONCAT('QUOTA_FULL: app quota is full (max_in_flight ', v_quota, ')'), out_waits_for = v_app;
    ELSEIF v_app_line OR v_queue_line THEN
        -- Room is seen, and work waits for it: what waited before this checkpoint goes first, up to the free slots.
        -- Its place is the time it began to wait for room, in whichever line, and it holds in both lines: all the
        -- work waiting for room is in one order, so two waiters never hold each other back from two lines (the
        -- first of all that can have room takes it). Work not waiting for room comes after all of it.
        -- A waiter back from its app's disabling (APP_DISABLED) holds its place in the app's line, where the others
        -- of that app wait as it did: the app's enabling makes them all due, and each looks with its place.
        SELECT IF(deferred_reason IN ('QUOTA_FULL', 'QUEUE_FULL'), deferred_since, NULL),
               IF(deferred_reason IN ('QUOTA_FULL', 'QUEUE_FULL')
                  OR (deferred_reason = 'APP_DISABLED' AND deferred_for = v_app), deferred_since, NULL), id
          INTO v_since, v_app_since, v_id
          FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
        SET v_since = COALESCE(v_since, v_last), v_app_since = COALESCE(v_app_since, v_last),
            v_queue_free = v_capacity - (v_queue_taken - out_queue_released),
            v_app_free = v_quota - (v_app_taken - out_app_released);
        SELECT (SELECT COUNT(*) FROM (
                   SELECT 1 FROM weave_pending_advances w
                    WHERE v_queue_line AND w.deferred_reason = 'QUEUE_FULL' AND w.deferred_for = v_queue
                      AND (w.deferred_since < v_since OR (w.deferred_since = v_since AND w.id < v_id))
                    LIMIT v_queue_free) ahead),
               (SELECT COUNT(*) FROM (
                   SELECT 1 FROM weave_pending_advances w
                    WHERE v_app_line AND w.deferred_reason IN ('QUOTA_FULL', 'APP_DISABLED') AND w.deferred_for = v_app
                      AND (w.deferred_since < v_app_since OR (w.deferred_since = v_app_since AND w.id < v_id))
                    LIMIT v_app_free) ahead)
          INTO v_queue_ahead, v_app_ahead;
        IF v_queue_ahead IS NULL OR v_app_ahead IS NULL THEN  -- counts answer: cut short (_weave_root_advance)
            CALL _weave_raise(50016, 'INTERRUPTED: the count of work ahead came back empty; nothing is changed');
        END IF;
        -- Held back by the line with room free: its first is woken, should it not be looking already.
        IF v_queue_ahead >= v_queue_free THEN
            SET out_why = CONCAT('QUEUE_FULL: queue ', in_queue, ' has ', v_queue_free, ' slot(s) free for work ',
                                 'waiting before this (capacity ', v_capacity, ')'), out_waits_for = v_queue;
            IF in_now IS NOT NULL THEN
                CALL _pulse_room_wake(NULL, v_queue, in_now, TRUE);
            END IF;
        ELSEIF v_app_ahead >= v_app_free THEN
            SET out_why = CONCAT('QUOTA_FULL: the app has ', v_app_free, ' slot(s) free for work waiting before ',
                                 'this (max_in_flight ', v_quota, ')'), out_waits_for = v_app;
            IF in_now IS NOT NULL THEN
                CALL _pulse_room_wake(v_app, NULL, in_now, TRUE);
            END IF;
        END IF;
    END IF;
END
