-- C-4 continue: a POLL that stopped on its round budget or its poll deadline, with a last round that
-- answered PENDING, goes on in the same activation with extra rounds and/or a later poll deadline. Its
-- frozen inputs, rounds and results stay; the next round is due at max(now, next_poll_at). The
-- final-signal wait's deadline follows the poll deadline (05-signals).
CREATE PROCEDURE weave_step_continue(
        IN in_token            VARCHAR(512),
        IN in_namespace        VARCHAR(200),
        IN in_workflow_id      VARCHAR(64),
        IN in_step_key         VARCHAR(200),
        IN in_extra_rounds     BIGINT,
        IN in_poll_deadline_ms BIGINT,
        IN in_reason           VARCHAR(4096),
        IN in_idempotency_key  VARCHAR(512))
    COMMENT 'Description: continues a POLL stopped in review on POLL_ROUNDS_EXHAUSTED or POLL_DEADLINE (last round
POLL_PENDING) in the same activation; closes its review reasons; the instance reopens when no reason is left.
Parameters: in_token (workflows:review and every queue of the definition), in_namespace, in_workflow_id, in_step_key,
in_extra_rounds (1..10000, optional), in_poll_deadline_ms (new poll deadline = now + ms, <= instance deadline,
optional; at least one of the two), in_reason, in_idempotency_key.
Result set: workflow_id, step_key, max_rounds, poll_deadline, status (of the instance), replayed.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE,
50008 TASK_IN_FLIGHT, 50100 INVALID_ARGUMENT, 50118 DEADLINE_INVALID, 50111 REASON_INVALID,
50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-4, C-5, C-6, P-4.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_replayed TINYINT;
    DECLARE v_step BIGINT UNSIGNED;
    DECLARE v_type VARCHAR(16);
    DECLARE v_seq INT UNSIGNED;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_state VARCHAR(16);
    DECLARE v_stop VARCHAR(32);
    DECLARE v_used INT UNSIGNED;
    DECLARE v_max INT UNSIGNED;
    DECLARE v_deadline DATETIME(6);
    DECLARE v_next DATETIME(6);
    DECLARE v_last VARCHAR(24) DEFAULT NULL;
    DECLARE v_instance_deadline DATETIME(6);
    DECLARE v_due DATETIME(6);
    DECLARE v_reopened TINYINT DEFAULT 0;
    DECLARE v_status VARCHAR(16);
    DECLARE v_digest CHAR(64) DEFAULT SHA2(CONCAT_WS('|', 'continue', COALESCE(in_step_key, ''),
        COALESCE(in_extra_rounds, '-'), COALESCE(in_poll_deadline_ms, '-'), COALESCE(in_reason, '')), 256);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_step_continue', v_tx);
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    CALL _weave_control_begin(in_token, in_namespace, in_workflow_id, 'workflows:review', 'step.continue',
                              in_reason, in_idempotency_key, v_digest, v_ns, v_cred, v_actor, v_id, v_replayed, v_now);
    IF v_replayed = 0 THEN
        CALL _weave_recovery_begin(v_id, in_step_key, v_step, v_type, v_seq, v_activation);
        SELECT state, stop_reason, rounds_used, max_rounds, poll_deadline, next_poll_at
          INTO v_state, v_stop, v_used, v_max, v_deadline, v_next
          FROM weave_poll_states WHERE activation_id = v_activation FOR UPDATE;
        SELECT outcome INTO v_last FROM weave_poll_rounds WHERE activation_id = v_activation AND round_no = v_used;
        IF v_type <> 'POLL' OR v_state IS NULL OR v_state <> 'STOPPED'
           OR v_stop NOT IN ('POLL_ROUNDS_EXHAUSTED', 'POLL_DEADLINE') OR v_last IS NULL OR v_last <> 'POLL_PENDING' THEN
            CALL _weave_raise(50007, 'INVALID_STATE: continue needs a POLL stopped on rounds or deadline after PENDING');
        END IF;
        IF in_extra_rounds IS NULL AND in_poll_deadline_ms IS NULL THEN
            CALL _weave_raise(50100, 'INVALID_ARGUMENT: give extra_rounds and/or poll_deadline_ms');
        END IF;
        IF in_extra_rounds IS NOT NULL AND (in_extra_rounds < 1 OR in_extra_rounds > 10000) THEN
            CALL _weave_raise(50100, 'INVALID_ARGUMENT: extra_rounds must be 1..10000');
        END IF;
        SELECT deadline_at INTO v_instance_deadline FROM weave_instances WHERE id = v_id;
        IF in_poll_deadline_ms IS NOT NULL THEN
            IF in_poll_deadline_ms < 1 OR v_now + INTERVAL in_poll_deadline_ms * 1000 MICROSECOND > v_instance_deadline THEN
                CALL _weave_raise(50118, 'DEADLINE_INVALID: the poll deadline must be later than now and within the instance deadline');
            END IF;
            SET v_deadline = v_now + INTERVAL in_poll_deadline_ms * 1000 MICROSECOND;
        END IF;
        SET v_max = v_max + COALESCE(in_extra_rounds, 0);
        IF v_used >= v_max OR v_now >= v_deadline THEN
            CALL _weave_raise(50100, 'INVALID_ARGUMENT: the POLL would stop again at once; add rounds or a later deadline');
        END IF;
        SET v_due = GREATEST(v_now, COALESCE(v_next, v_now));
        UPDATE weave_poll_states
           SET max_rounds = v_max, poll_deadline = v_deadline, state = 'WAITING', stop_reason = NULL,
               next_poll_at = v_due, updated_at = v_now
         WHERE activation_id = v_activation;
        UPDATE weave_waits SET deadline_at = v_deadline
         WHERE activation_id = v_activation AND kind = 'POLL_FINAL' AND status = 'WAITING';
        UPDATE weave_steps SET status = 'ACTIVE', updated_at = v_now WHERE id = v_step;
        CALL _weave_checkpoint_set(v_ns, v_id, in_step_key, 'POLL', v_activation, v_due, v_now);
        UPDATE weave_review_reasons SET closed_at = v_now, closed_by = 'continue'
         WHERE instance_id = v_id AND step_key = in_step_key AND closed_at IS NULL;
        CALL _weave_event(v_ns, v_id, 'POLL_CONTINUED', in_step_key, v_seq, v_now,
             JSON_OBJECT('max_rounds', v_max + 0, 'poll_deadline', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                         'next_poll_at', DATE_FORMAT(v_due, '%Y-%m-%dT%H:%i:%s.%fZ'), 'stopped_on', v_stop,
                         'actor', v_actor, 'reason', in_reason));
        CALL _weave_review_reopen(v_ns, v_id, v_now, v_reopened);
        CALL _weave_audit(v_ns, v_id, v_cred, v_actor, 'step.continue', in_idempotency_key, v_digest, v_now, v_deadline,
                          in_reason, JSON_OBJECT('step_key', in_step_key, 'extra_rounds', in_extra_rounds + 0,
                                                 'max_rounds', v_max + 0, 'reopened', v_reopened = 1), NULL);
    END IF;
    SELECT s.status, p.max_rounds, p.poll_deadline INTO v_status, v_max, v_deadline
      FROM weave_instances s JOIN weave_steps st ON st.instance_id = s.id AND st.step_key = in_step_key
      JOIN weave_poll_states p ON p.activation_id = st.activation_id
     WHERE s.id = v_id;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, in_step_key AS step_key, v_max AS max_rounds, v_deadline AS poll_deadline,
           v_status AS status, v_replayed AS replayed;
END
