CREATE PROCEDURE weave_instance_events(
        IN in_token       VARCHAR(512),
        IN in_namespace   VARCHAR(200),
        IN in_workflow_id VARCHAR(64),
        IN in_after       BIGINT,
        IN in_limit       INT)
    COMMENT 'Description: the event history of an instance after a sequence number, in order (gap-free seq).
Parameters: in_token (workflows:read and every queue of the definition), in_namespace, in_workflow_id,
in_after (0 = from the start), in_limit (1..1000, NULL = 100).
Result set: seq, type, step_key and activation_seq (NULL for an instance-level event), occurred_at, data.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50121 LIMIT_INVALID.
Rules: M-4.9, R-4.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_limit INT DEFAULT COALESCE(in_limit, 100);
    CALL _weave_instance_find(in_token, in_namespace, in_workflow_id, v_ns, v_id);
    IF v_limit < 1 OR v_limit > 1000 OR COALESCE(in_after, 0) < 0 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: limit must be 1..1000 and after >= 0');
    END IF;
    -- An instance-level event has no step: NULL, as every interface shows it (not '' and 0).
    SELECT seq, type, NULLIF(step_key, '') AS step_key, NULLIF(activation_seq, 0) AS activation_seq, occurred_at, data
      FROM weave_events WHERE instance_id = v_id AND seq > COALESCE(in_after, 0)
     ORDER BY seq LIMIT v_limit;
END
