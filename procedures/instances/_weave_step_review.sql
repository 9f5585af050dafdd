-- R-18 nothing stalls silently: an activation that can never succeed (its inputs are frozen, or what it
-- was published against is gone) is not retried with backoff forever; the step waits for a person, with
-- the reason code and what was found, and the instance's gate closes until a recovery action. The activation
-- that failed keeps its number on the step, as its review reason and event name it, though it has no row: a
-- recovery guarded by that number finds it, and a reactivation is the next one (C-4), never the same number again.
CREATE PROCEDURE _weave_step_review(
        IN in_namespace_id   BIGINT UNSIGNED,
        IN in_instance_id    BIGINT UNSIGNED,
        IN in_step_id        BIGINT UNSIGNED,
        IN in_step_key       VARCHAR(64),
        IN in_activation_seq INT UNSIGNED,
        IN in_code           VARCHAR(32),
        IN in_detail         VARCHAR(1024),
        IN in_pending        TINYINT,
        IN in_candidate      LONGTEXT,
        IN in_now            DATETIME(6))
    COMMENT 'Internal. Description: moves a step that cannot be activated (PENDING: in_pending 1) or advanced (ACTIVE:
in_pending 0) to NEEDS_REVIEW with reason in_code and in_detail (R-18), and in_candidate (a JSON object, NULL: none)
as the reason''s candidate, the decision that failed; the caller holds the instance lock and writes nothing else for
the step.'
    MODIFIES SQL DATA
BEGIN
    -- A PENDING step's review leaves one PENDING step fewer on the instance, in the same statement.
    UPDATE weave_steps s STRAIGHT_JOIN weave_instances i ON i.id = s.instance_id
       SET s.status = 'NEEDS_REVIEW', s.activation_seq = in_activation_seq, s.updated_at = in_now,
           i.pending_steps = i.pending_steps - in_pending
     WHERE s.id = in_step_id;
    CALL _weave_review_open(in_namespace_id, in_instance_id, in_code, in_step_key, in_activation_seq,
                            IF(in_candidate IS NULL, JSON_OBJECT('detail', in_detail),
                               JSON_OBJECT('detail', in_detail, 'candidate', JSON_EXTRACT(in_candidate, '$'))),
                            in_now);
    CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'step.review', NULL, NULL, in_now,
                      NULL, NULL, JSON_OBJECT('code', in_code, 'step_key', in_step_key, 'detail', in_detail), NULL);
END
