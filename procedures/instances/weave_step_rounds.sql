-- Every round of one POLL activation, a page at a time. The instance read shows the latest rounds of each current
-- activation only: a poll may run 10,000 rounds, each result up to 1 MiB, and one read of the instance must not
-- carry them all. A page is one range of the activation's rounds in their key's order, so it reads as much after
-- round 9,000 as after round 0. Its results are not small either: a page of 1,000 rounds of 1 MiB would be about a
-- gigabyte, built whole by the server, the API and the client for one request. A page therefore ends early once its
-- results pass 8 MiB (it always holds one round), as a page of signals does, and its next_after leads on from there.
-- The step key is wider than a key can be: a lax caller's session would cut a longer one down to a key that exists.
CREATE PROCEDURE weave_step_rounds(
        IN in_token          VARCHAR(512),
        IN in_namespace      VARCHAR(200),
        IN in_workflow_id    VARCHAR(64),
        IN in_step_key       VARCHAR(200),
        IN in_activation_seq INT,
        IN in_after          BIGINT,
        IN in_limit          INT)
    COMMENT 'Description: the rounds of a POLL step''s activation after a round number, in order, read in one
snapshot: a read transaction of its own (REPEATABLE READ), or, called inside an open transaction of the caller,
that transaction, which it neither commits nor rolls back (R-1).
Parameters: in_token (workflows:read and every queue of the definition), in_namespace, in_workflow_id, in_step_key,
in_activation_seq (NULL = the step''s latest activation), in_after (0 = from round 1), in_limit (1..1000, NULL = 100;
a page ends before it once its results pass 8 MiB, always holding one round).
Result set 1 (the activation, one row): step_key, activation_seq (NULL while the step was never activated, and then
no rounds), latest_activation_seq (the step''s latest), poll_state, rounds_used, max_rounds.
Result set 2 (its rounds after in_after, by number: in_limit at most, and none once the results before it on the
page pass 8 MiB): round_no, task_id, outcome, result, result_at, created_at.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND (no such step, a step that is no POLL, or no such
activation), 50121 LIMIT_INVALID.
Rules: R-1, R-11, P-5.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_type VARCHAR(16) DEFAULT NULL;
    DECLARE v_activation BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_seq INT UNSIGNED DEFAULT NULL;
    DECLARE v_latest INT UNSIGNED DEFAULT NULL;  -- the step's latest activation
    DECLARE v_limit INT DEFAULT COALESCE(in_limit, 100);
    DECLARE v_cut INT UNSIGNED DEFAULT NULL;  -- the page's last round within the byte budget
    DECLARE v_key VARCHAR(64);  -- the step's key as kept (a lax comparison finds 'check ' for 'check')
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    -- One snapshot for the activation and its page: a round created meanwhile is in both or in neither.
    CALL _weave_snapshot_open(v_tx);
    CALL _weave_instance_find(in_token, in_namespace, in_workflow_id, v_ns, v_inst);
    IF v_limit < 1 OR v_limit > 1000 OR COALESCE(in_after, 0) < 0 OR in_activation_seq < 1 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: limit must be 1..1000, after >= 0 and activation >= 1');
    END IF;
    -- The step with its current activation, the latest one, as it usually is.
    SELECT s.type, s.step_key, s.activation_id, IF(s.activation_id IS NULL, NULL, s.activation_seq)
      INTO v_type, v_key, v_activation, v_latest
      FROM weave_steps s
     WHERE s.instance_id = v_inst AND s.step_key = in_step_key;
    IF v_type IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: the instance has no step with this key');
    ELSEIF v_type <> 'POLL' THEN
        CALL _weave_raise(50003, CONCAT('NOT_FOUND: rounds belong to POLL steps; this step is a ', v_type, ' step'));
    END IF;
    -- A step between activations (reactivated, its next one not yet made) or never activated has none current: its
    -- latest is read by key, and so is an earlier one asked for (a reactivated step keeps the rounds of each).
    IF v_latest IS NULL THEN
        SELECT a.id, a.seq INTO v_activation, v_latest
          FROM weave_activations a FORCE INDEX (ix_activation_instance)
         WHERE a.instance_id = v_inst AND a.step_key = v_key
         ORDER BY a.seq DESC LIMIT 1;
    END IF;
    SET v_seq = v_latest;
    IF in_activation_seq IS NOT NULL AND NOT (in_activation_seq <=> v_latest) THEN
        SET v_activation = NULL, v_seq = NULL;
        SELECT a.id, a.seq INTO v_activation, v_seq
          FROM weave_activations a FORCE INDEX (ix_activation_instance)
         WHERE a.instance_id = v_inst AND a.step_key = v_key AND a.seq = in_activation_seq;
        IF v_activation IS NULL THEN
            CALL _weave_raise(50003, CONCAT('NOT_FOUND: the step has no activation ', in_activation_seq));
        END IF;
    END IF;
    SELECT v_key AS step_key, v_seq AS activation_seq, v_latest AS latest_activation_seq, p.state AS poll_state,
           p.rounds_used, p.max_rounds
      FROM (SELECT 1) one LEFT JOIN weave_poll_states p ON p.activation_id = v_activation;
    -- The page's window, cut after the last round whose results before it stay under 8 MiB: by the sizes kept with
    -- the results, not the results themselves (a round that ended before level 20 is measured).
    SELECT MAX(IF(before_bytes < 8388608, round_no, NULL)) INTO v_cut
      FROM (SELECT round_no, SUM(bytes) OVER (ORDER BY round_no) - bytes AS before_bytes
              FROM (SELECT r.round_no, COALESCE(r.result_bytes, OCTET_LENGTH(r.result), 0) AS bytes
                      FROM weave_poll_rounds r FORCE INDEX (uq_round_no)
                     WHERE r.activation_id = v_activation AND r.round_no > COALESCE(in_after, 0)
                     ORDER BY r.round_no LIMIT v_limit) w) b;
    SELECT r.round_no, CONCAT('tsk_', r.task_id) AS task_id, r.outcome, r.result, r.result_at, r.created_at
      FROM weave_poll_rounds r FORCE INDEX (uq_round_no)
     WHERE r.activation_id = v_activation AND r.round_no > COALESCE(in_after, 0) AND r.round_no <= v_cut
     ORDER BY r.round_no LIMIT v_limit;
    IF v_tx THEN
        COMMIT;
    END IF;
END
