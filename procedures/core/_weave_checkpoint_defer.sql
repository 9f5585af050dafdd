-- A deferral moves only the next check time: the due time a checkpoint was created with stays,
-- nothing is consumed and no deadline moves (R-8, P-6). A deferral for room (QUOTA_FULL, QUEUE_FULL) names the app
-- or queue it waits for, and keeps its place in that line (deferred_since) while it waits for the same one. The first
-- in its line looks again every second; the others back off, a second more for each look in a row that found no
-- room, up to ten (R-8's bounded backoff): a task's end wakes the line in its order (_pulse_room_wake), so their
-- looks are only for a wake that was missed, and thousands of waiters looking every second would crowd out every
-- other decision on the server. The first's look is what finds a missed wake: room that no one is looking at (a look
-- that read the room before a task's end committed, or a woken look that ended without the slot).
CREATE PROCEDURE _weave_checkpoint_defer(
        IN in_namespace_id BIGINT UNSIGNED,
        IN in_instance_id  BIGINT UNSIGNED,
        IN in_step_key     VARCHAR(64),
        IN in_kind         VARCHAR(8),
        IN in_activation_id BIGINT UNSIGNED,
        IN in_until        DATETIME(6),
        IN in_now          DATETIME(6),
        IN in_why          VARCHAR(256),
        IN in_waits_for    BIGINT UNSIGNED)
    COMMENT 'Internal. Description: defers the checkpoint of (instance, step) to in_until, keeping its due time;
in_why is ''CODE: detail'', and the code is kept as the deferral''s reason with the time the deferral began (R-18);
in_waits_for: for a deferral for room, the app (QUOTA_FULL) or queue (QUEUE_FULL) it waits for, else NULL; such a
deferral looks again after a second when it is the first in its line, else after as many seconds as it has been
deferred in a row for that line, at most ten; never after in_until. Counts it in @weave_made_due when in_until is not after in_now (see _weave_checkpoint_set).'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_reason VARCHAR(32) DEFAULT LEFT(SUBSTRING_INDEX(in_why, ':', 1), 32);
    DECLARE v_same BOOLEAN DEFAULT FALSE;  -- deferred already for the same reason and line: its place is kept
    DECLARE v_since DATETIME(6) DEFAULT in_now;
    DECLARE v_deferrals INT UNSIGNED DEFAULT 0;
    DECLARE v_until DATETIME(6) DEFAULT in_until;
    DECLARE v_behind BOOLEAN;  -- some work waits before it in its line
    SELECT id, deferred_reason <=> v_reason AND COALESCE(deferred_for = in_waits_for, TRUE), deferred_since, deferrals
      INTO v_id, v_same, v_since, v_deferrals
      FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key FOR UPDATE;
    SET v_since = IF(v_same, v_since, in_now), v_deferrals = IF(v_same, v_deferrals + 1, 1);
    IF in_waits_for IS NOT NULL THEN
        -- Room: the first in line looks every second, the others back off.
        SELECT EXISTS (SELECT 1 FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
                        WHERE deferred_reason = v_reason AND deferred_for = in_waits_for
                          AND (deferred_since < v_since OR (deferred_since = v_since AND id < COALESCE(v_id, ~0))))
          INTO v_behind;
        SET v_until = LEAST(in_until, in_now + INTERVAL IF(v_behind, LEAST(v_deferrals, 10), 1) SECOND);
    END IF;
    IF v_id IS NULL THEN
        INSERT INTO weave_pending_advances (namespace_id, instance_id, step_key, kind, activation_id, due_at,
                                            available_at, last_error, deferred_reason, deferred_since, deferrals,
                                            deferred_for, created_at)
        VALUES (in_namespace_id, in_instance_id, in_step_key, in_kind, in_activation_id, in_now, v_until,
                in_why, v_reason, in_now, 1, in_waits_for, in_now);
    ELSE
        UPDATE weave_pending_advances
           SET available_at = GREATEST(due_at, v_until), last_error = in_why, version = version + 1,
               deferred_since = v_since, deferrals = v_deferrals, deferred_for = in_waits_for,
               deferred_reason = v_reason
         WHERE id = v_id;
    END IF;
    IF in_until <= in_now THEN
        SET @weave_made_due = COALESCE(@weave_made_due, 0) + 1;  -- due already (see _weave_checkpoint_set)
    END IF;
END
