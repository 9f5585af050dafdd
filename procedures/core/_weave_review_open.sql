-- Opening a review reason is what moves an instance to NEEDS_REVIEW (M-3: NEEDS_REVIEW exactly while
-- a reason is open) and closes its gate. A CANCELLING or CANCELLED instance keeps its status: the
-- reason is still recorded, because the fact behind it is real.
CREATE PROCEDURE _weave_review_open(
        IN in_namespace_id BIGINT UNSIGNED,
        IN in_instance_id  BIGINT UNSIGNED,
        IN in_code         VARCHAR(32),
        IN in_step_key     VARCHAR(64),
        IN in_activation_seq INT UNSIGNED,
        IN in_detail       LONGTEXT,
        IN in_now          DATETIME(6))
    COMMENT 'Internal. Description: opens a review reason, moves the instance to NEEDS_REVIEW with its gate CLOSED.'
    MODIFIES SQL DATA
BEGIN
    INSERT INTO weave_review_reasons (namespace_id, instance_id, code, step_key, activation_seq, detail, opened_at)
    VALUES (in_namespace_id, in_instance_id, in_code, COALESCE(in_step_key, ''), COALESCE(in_activation_seq, 0),
            COALESCE(in_detail, '{}'), in_now);
    UPDATE weave_instances SET status = 'NEEDS_REVIEW', gate = 'CLOSED'
     WHERE id = in_instance_id AND status IN ('RUNNING', 'NEEDS_REVIEW');
    CALL _weave_event(in_namespace_id, in_instance_id, 'REVIEW_OPENED', in_step_key, in_activation_seq, in_now,
                      JSON_OBJECT('code', in_code, 'detail', JSON_EXTRACT(COALESCE(in_detail, '{}'), '$')), NULL, NULL,
                      NULL);
END
