-- Saving the winner of a POLL's final-signal race (F-2..F-4): the signal becomes CONSUMED and the wait
-- SATISFIED with winner_signal_id, every other PENDING signal of the activation gets its disposition
-- (S-11), with the event and the audit row, in the caller's transaction. CONSUMED means the wait adopted
-- the signal, not that the step is settled (F-8): with a query in flight the step stays ACTIVE until Pulse
-- reports the round's end. Once saved, the winner is only ever followed, never chosen again (F-9).
CREATE PROCEDURE _weave_poll_final_win(
        IN in_namespace_id BIGINT UNSIGNED,
        IN in_instance_id  BIGINT UNSIGNED,
        IN in_step_key     VARCHAR(64),
        IN in_seq          INT UNSIGNED,
        IN in_wait_id      BIGINT UNSIGNED,
        IN in_signal_id    BIGINT UNSIGNED,
        IN in_facts        LONGTEXT,
        IN in_now          DATETIME(6))
    COMMENT 'Internal. Description: records in_signal_id as the winner of the POLL_FINAL wait in_wait_id: signal
CONSUMED, wait SATISFIED, other PENDING signals of the activation REJECTED (WAIT_SETTLED, LATE or
CORRELATION_MISMATCH), event SIGNAL_CONSUMED and audit signal.consume with in_facts and the signal''s times.
Rules: S-11, F-2, F-3, F-4, F-8, F-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_accepted DATETIME(6);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_facts LONGTEXT;

    SELECT accepted_at INTO v_accepted FROM weave_signals WHERE id = in_signal_id AND instance_id = in_instance_id
       FOR UPDATE;
    SELECT deadline_at INTO v_deadline FROM weave_waits WHERE id = in_wait_id FOR UPDATE;
    UPDATE weave_signals SET status = 'CONSUMED', disposition = NULL, consumed_at = in_now, version = version + 1
     WHERE id = in_signal_id AND status = 'PENDING';
    IF ROW_COUNT() <> 1 THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the final signal is no longer PENDING under its lock');
    END IF;
    UPDATE weave_waits SET status = 'SATISFIED', winner_signal_id = in_signal_id, settled_at = in_now
     WHERE id = in_wait_id AND status = 'WAITING' AND winner_signal_id IS NULL;
    IF ROW_COUNT() <> 1 THEN
        CALL _weave_raise(50007, 'INVALID_STATE: the final-signal wait already has a winner');
    END IF;
    CALL _weave_wait_signals_settle(in_namespace_id, in_instance_id, in_wait_id, 'WAIT_SETTLED', in_now);
    SET v_facts = JSON_SET(COALESCE(in_facts, '{}'),
                           '$.signal_id', CONCAT('sig_', in_signal_id),
                           '$.accepted_at', DATE_FORMAT(v_accepted, '%Y-%m-%dT%H:%i:%s.%fZ'),
                           '$.deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                           '$.consumed_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'));
    CALL _weave_event(in_namespace_id, in_instance_id, 'SIGNAL_CONSUMED', in_step_key, in_seq, in_now, v_facts,
                      'signal.consume', v_deadline, NULL);
END
