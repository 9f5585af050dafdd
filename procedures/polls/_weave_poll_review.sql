-- Every way a POLL stops for a person ends here, so that they all leave the same facts behind: the
-- poll state STOPPED with the code that stopped it (continue reads it), the step's checkpoint gone (the
-- clock has nothing left to do for it), the event, the review reason with the facts, and the audit row.
-- in_step_status is NEEDS_REVIEW, or ACTIVE when a round is still in flight at the poll deadline (P-11):
-- that step waits for Pulse's real outcome and goes to review when it is consumed.
CREATE PROCEDURE _weave_poll_review(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_step_key      VARCHAR(64),
        IN in_seq           INT UNSIGNED,
        IN in_activation_id BIGINT UNSIGNED,
        IN in_code          VARCHAR(32),
        IN in_step_status   VARCHAR(16),
        IN in_facts         LONGTEXT,
        IN in_now           DATETIME(6))
    COMMENT 'Internal. Description: stops a POLL activation for review: step status in_step_status, poll state STOPPED with
stop_reason in_code, checkpoint removed, event in_code, review reason in_code (step-level) with in_facts, audit
poll.review. The instance goes to NEEDS_REVIEW with its gate CLOSED.
Rules: P-8, P-9, P-11, R-4.'
    MODIFIES SQL DATA
BEGIN
    UPDATE weave_steps SET status = in_step_status, updated_at = in_now
     WHERE instance_id = in_instance_id AND step_key = in_step_key;
    UPDATE weave_poll_states SET state = 'STOPPED', stop_reason = in_code, updated_at = in_now
     WHERE activation_id = in_activation_id;
    DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
    CALL _weave_event(in_namespace_id, in_instance_id, in_code, in_step_key, in_seq, in_now, in_facts, NULL, NULL,
                      NULL);
    CALL _weave_review_open(in_namespace_id, in_instance_id, in_code, in_step_key, in_seq, in_facts, in_now);
    CALL _weave_audit(in_namespace_id, in_instance_id, 0, 'weave.orchestrator', 'poll.review', NULL, NULL, in_now,
                      NULL, NULL, JSON_SET(in_facts, '$.code', in_code), NULL);
END
