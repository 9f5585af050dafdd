-- An operator has raised an app's quota or a queue's capacity: room has come without a task's end to wake the work
-- waiting in line for it (R-8). As many of the line's first checkpoints not due yet as there are new slots look again
-- now, in the line's order, instead of at their next looks. Those another transaction holds are passed over (they
-- are being looked at already): the caller holds the app's or queue's row, for which such a look may be waiting.
CREATE PROCEDURE _weave_room_grown(
        IN in_reason VARCHAR(32),
        IN in_for    BIGINT UNSIGNED,
        IN in_slots  BIGINT UNSIGNED,
        IN in_now    DATETIME(6))
    COMMENT 'Internal. Description: makes the first in_slots checkpoints deferred in_reason (QUOTA_FULL or QUEUE_FULL) for
in_for (the app or queue), by the time their deferral began, that are not due yet and that no other transaction
holds, due at in_now; at most 1,000 (the others find the room at their next looks).
Rules: R-8, R-18.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_ids LONGTEXT DEFAULT NULL;
    DECLARE v_n INT UNSIGNED DEFAULT LEAST(in_slots, 1000);
    -- A thousand ids, past a caller's 1024 bytes: the statement raises MariaDB's cap on JSON_ARRAYAGG for itself.
    /*M!100301 SET STATEMENT group_concat_max_len = 1048576 FOR */ SELECT JSON_ARRAYAGG(id) INTO v_ids
      FROM (SELECT id FROM weave_pending_advances FORCE INDEX (ix_checkpoint_room_line)
             WHERE deferred_reason = in_reason AND deferred_for = in_for AND available_at > in_now
             ORDER BY deferred_since, id LIMIT v_n FOR UPDATE SKIP LOCKED) AS first;
    IF v_ids IS NOT NULL THEN
        UPDATE weave_pending_advances p
          JOIN JSON_TABLE(v_ids, '$[*]' COLUMNS (id BIGINT UNSIGNED PATH '$')) AS woken ON woken.id = p.id
           SET p.available_at = GREATEST(p.due_at, in_now), p.version = p.version + 1;
    END IF;
END
