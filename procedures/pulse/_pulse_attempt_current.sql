-- K-3: only the holder of the current attempt may report its end. Locks in Pulse's order (task, then
-- attempt) and decides from those locked rows. A report from the holder of an attempt that is no
-- longer current (its lease was recovered, the task moved on) is kept as a late report: the worker's
-- words are not lost, but they change nothing. The report's time is read here, after both locks (R-2).
CREATE PROCEDURE _pulse_attempt_current(
        IN  in_attempt_id BIGINT UNSIGNED,
        IN  in_worker_id  VARCHAR(512),
        IN  in_kind       VARCHAR(16),
        IN  in_body       LONGTEXT,
        OUT out_now       DATETIME(6),
        OUT out_task_id   BIGINT UNSIGNED,
        OUT out_current   TINYINT,
        OUT out_task_status VARCHAR(16))
    COMMENT 'Internal. Description: locks the task and the attempt of a report; out_current = 1 when the attempt is the
task''s RUNNING attempt, else 0 after storing the report in pulse_late_reports (in_kind SUCCEEDED or FAILED);
out_task_status: the task''s status as locked here; out_now: the engine clock, read after both locks.
Errors: 50003 NOT_FOUND (no such attempt), 50012 ATTEMPT_NOT_CURRENT (the attempt is not this worker''s).
Rules: K-3.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_task BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_locked BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_task_status VARCHAR(16);
    DECLARE v_used INT UNSIGNED;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_status VARCHAR(16);
    DECLARE v_no INT UNSIGNED;
    DECLARE v_worker VARCHAR(128);

    SET out_current = 0;
    SELECT task_id INTO v_task FROM pulse_attempts WHERE id = in_attempt_id;
    IF v_task IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such attempt');
    END IF;
    SELECT id, status, attempts_used INTO v_locked, v_task_status, v_used FROM pulse_tasks WHERE id = v_task FOR UPDATE;
    SELECT namespace_id, status, attempt_no, worker_id INTO v_ns, v_status, v_no, v_worker
      FROM pulse_attempts WHERE id = in_attempt_id FOR UPDATE;
    SELECT UTC_TIMESTAMP(6) + INTERVAL clock_offset_us MICROSECOND INTO out_now FROM weave_install WHERE id = 1;
    IF v_worker <> in_worker_id THEN
        CALL _weave_raise(50012, 'ATTEMPT_NOT_CURRENT: the attempt was claimed by another worker');
    END IF;
    SET out_task_id = v_task, out_task_status = v_task_status;
    IF v_locked IS NOT NULL AND v_status = 'RUNNING' AND v_task_status = 'RUNNING' AND v_used = v_no THEN
        SET out_current = 1;
    ELSE
        INSERT INTO pulse_late_reports (namespace_id, task_id, attempt_id, worker_id, kind, body, reported_at)
        VALUES (v_ns, v_task, in_attempt_id, in_worker_id, in_kind, in_body, out_now);
    END IF;
END
