-- A deferral moves only the next check time: the due time a checkpoint was created with stays,
-- nothing is consumed and no deadline moves (R-8, P-6). A deferral for room (QUOTA_FULL, QUEUE_FULL) names the app
-- or queue it waits for, and keeps its place (deferred_since, the time it began to wait for room) while it waits for
-- room, in either line. Its next look backs off, a second more for each look in a row that found no room (R-8's
-- bounded backoff), but comes no later than a second for each checkpoint before it in its line, so the first in
-- line looks every second and the tenth at most every ten: a task's end wakes the line in its order
-- (_pulse_room_wake), so the looks are only for a wake that was missed (a look that read the room before a task's
-- end committed, a woken look that ended without the slot, a first in line that left it), and thousands of waiters
-- looking every second would crowd out every other decision on the server.
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
in_why is ''CODE: detail'', and the code is kept as the deferral''s reason with the time the deferral began (R-18;
a deferral for its app, for room in its line or for its enabling, that follows one for the same app keeps the time
the first began: its place in the app''s line);
in_waits_for: what the deferral waits for, else NULL: for room, the app (QUOTA_FULL) or queue (QUEUE_FULL), and
the deferral looks again after as many seconds as it has been deferred for room in a row, but no more than one
more than the checkpoints before it in its line, and at most ten; for a disabled identity (IDENTITY_DISABLED) or
app (APP_DISABLED), that identity or app, whose enabling makes it due, and it looks again after as many seconds as
it has been deferred in a row. Never after in_until. Counts it in @weave_made_due when in_until is not after in_now (see _weave_checkpoint_set).'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_reason VARCHAR(32) DEFAULT LEFT(SUBSTRING_INDEX(in_why, ':', 1), 32);
    DECLARE v_same BOOLEAN DEFAULT FALSE;  -- deferred already for the same reason (in the same line, for room)
    DECLARE v_room BOOLEAN DEFAULT FALSE;  -- deferred already for room: its place is kept
    DECLARE v_waited BOOLEAN DEFAULT FALSE;  -- deferred already for its app, for room or its enabling: its wait goes on
    DECLARE v_since DATETIME(6) DEFAULT in_now;
    DECLARE v_deferrals INT UNSIGNED DEFAULT 0;
    DECLARE v_until DATETIME(6) DEFAULT in_until;
    DECLARE v_ahead INT UNSIGNED;  -- the checkpoints before it in its line, counted up to ten
    -- A wait in its app's line that the app's disabling interrupted goes on from where it was, in that line: an app
    -- disabled for a minute keeps its waiters' places (and the time they began to wait) ahead of its work started
    -- meanwhile. Only its own line: the time a wait for the app's enabling began is no place in a queue's line,
    -- which other apps' work shares.
    SELECT id, deferred_reason <=> v_reason AND COALESCE(deferred_for = in_waits_for, TRUE),
           COALESCE(deferred_reason IN ('QUOTA_FULL', 'QUEUE_FULL'), FALSE) AND v_reason IN ('QUOTA_FULL', 'QUEUE_FULL'),
           COALESCE(deferred_reason IN ('QUOTA_FULL', 'APP_DISABLED') AND deferred_for = in_waits_for, FALSE)
               AND v_reason IN ('QUOTA_FULL', 'APP_DISABLED'),
           deferred_since, deferrals
      INTO v_id, v_same, v_room, v_waited, v_since, v_deferrals
      FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key FOR UPDATE;
    SET v_since = IF(v_same OR v_room OR v_waited, v_since, in_now),
        v_deferrals = IF(v_same OR v_room, v_deferrals + 1, 1);
    IF in_waits_for IS NOT NULL AND v_reason IN ('QUOTA_FULL', 'QUEUE_FULL') THEN
        -- Room: no later than a second for each checkpoint before it in its line.
        SELECT COUNT(*) INTO v_ahead
          FROM (SELECT 1 FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
                 WHERE deferred_reason = v_reason AND deferred_for = in_waits_for
                   AND (deferred_since < v_since OR (deferred_since = v_since AND id < COALESCE(v_id, ~0)))
                 LIMIT 10) AS ahead;
        SET v_until = LEAST(in_until, in_now + INTERVAL LEAST(v_deferrals, v_ahead + 1, 10) SECOND);
    ELSEIF in_waits_for IS NOT NULL THEN
        -- A disabled identity or app, whose enabling wakes it: a second more for each look in a row (the caller's
        -- in_until bounds it, at most ten seconds), for a look that read the status just before it was enabled.
        SET v_until = LEAST(in_until, in_now + INTERVAL v_deferrals SECOND);
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
