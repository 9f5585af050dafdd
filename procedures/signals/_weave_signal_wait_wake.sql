-- Settle at Send: a signal accepted for a WAITING SIGNAL wait is decided in Send's own transaction, by
-- the handler that the wait's checkpoint and the signal candidate run (_weave_signal_advance),
-- under the instance lock Send already holds. S-11 holds because the handler, not this routine, picks
-- the winner: the first PENDING match by (accepted_at, id) under the lock, which may be an earlier
-- signal than this one. R-8 holds because the successors go through the ROOT walk inline, deferred on
-- the ROOT checkpoint when new work may not start yet. The decision's clock is the acceptance's (read
-- once, after the locks, R-2). Early signals (no wait yet), POLL final signals and sends inside a
-- caller's transaction keep the candidate path. A handler that cannot decide (facts that do not
-- verify, R-6) never makes acceptance fail: its work is undone back to a savepoint and the signal
-- stays PENDING with its checkpoint due now, for the candidate path to back off and report.
CREATE PROCEDURE _weave_signal_wait_wake(
        IN  in_signal_id BIGINT UNSIGNED,
        OUT out_outcome  VARCHAR(16))
    COMMENT 'Internal. Description: runs the SIGNAL handler for a just-accepted PENDING signal whose wait is WAITING,
in the caller''s transaction. out_outcome: the handler''s outcome (CONSUMED, EXPIRED, WAITING ...), LATER (the
handler could not decide: undone, left to the candidate path) or NULL (no WAITING SIGNAL wait for it).
Rules: S-3, S-11, R-2, R-8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_step_key VARCHAR(64);
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_now DATETIME(6);
    DECLARE v_errno INT;

    SET out_outcome = NULL;
    SELECT s.namespace_id, s.instance_id, s.target_step_key, st.activation_id, s.accepted_at
      INTO v_ns, v_inst, v_step_key, v_activation, v_now
      FROM weave_signals s
      JOIN weave_steps st ON st.instance_id = s.instance_id AND st.step_key = s.target_step_key
                         AND st.activation_seq = s.target_activation_seq AND st.status = 'ACTIVE'
      JOIN weave_waits w ON w.activation_id = st.activation_id AND w.kind = 'SIGNAL' AND w.status = 'WAITING'
     WHERE s.id = in_signal_id AND s.status = 'PENDING';
    IF v_inst IS NOT NULL THEN
        SAVEPOINT weave_signal_wake;
        wake: BEGIN
            DECLARE EXIT HANDLER FOR SQLEXCEPTION
            BEGIN
                GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
                IF v_errno = 1213 THEN
                    RESIGNAL;  -- a deadlock took the whole transaction: Send fails as a transient error
                END IF;
                ROLLBACK TO SAVEPOINT weave_signal_wake;
                SET out_outcome = 'LATER';
            END;
            CALL _weave_signal_advance(v_ns, v_inst, v_step_key, v_activation, v_now, out_outcome);
        END wake;
    END IF;
END
