-- Placeholder until the POLL step type lands: a POLL round's task outcome is settled here, in the
-- inbox consumer's transaction, after the consumer has verified that the task's activation is the
-- step's current one. This routine checks the round and applies P-2, P-3, P-7..P-11.
CREATE PROCEDURE _weave_poll_outcome(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_task_id      BIGINT UNSIGNED,
        IN  in_inbox_id     BIGINT UNSIGNED,
        IN  in_kind         VARCHAR(16),
        IN  in_result       LONGTEXT,
        IN  in_occurred_at  DATETIME(6),
        IN  in_now          DATETIME(6),
        OUT out_outcome     VARCHAR(16))
    COMMENT 'Internal. Description: applies the outcome of a POLL round task (in_kind: SUCCEEDED, FAILED, UNKNOWN,
CANCELLED or EXPIRED; in_occurred_at: the outcome''s own time).'
    MODIFIES SQL DATA
BEGIN
    SET out_outcome = NULL;
    CALL _weave_raise(50007, 'INVALID_STATE: POLL outcomes not handled yet');
END
