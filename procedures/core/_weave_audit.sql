-- Writes the audit row of a decision, in the decision's own transaction (R-4): if it fails, the
-- caller's exit handler rolls the whole decision back.
CREATE PROCEDURE _weave_audit(
        IN in_namespace_id  BIGINT UNSIGNED,
        IN in_instance_id   BIGINT UNSIGNED,
        IN in_credential_id BIGINT UNSIGNED,
        IN in_actor         VARCHAR(128),
        IN in_action        VARCHAR(48),
        IN in_idempotency_key VARCHAR(128),
        IN in_request_digest CHAR(64),
        IN in_now           DATETIME(6),
        IN in_deadline_at   DATETIME(6),
        IN in_reason        VARCHAR(1024),
        IN in_details       LONGTEXT,
        IN in_response      LONGTEXT)
    COMMENT 'Internal. Description: writes one audit row (R-4).'
    MODIFIES SQL DATA
BEGIN
    INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, idempotency_key,
                             request_digest, accepted_at, deadline_at, reason, details, response, created_at)
    VALUES (in_namespace_id, COALESCE(in_instance_id, 0), COALESCE(in_credential_id, 0),
            COALESCE(in_actor, 'weave.engine'), in_action, in_idempotency_key, in_request_digest, in_now,
            in_deadline_at, in_reason, COALESCE(in_details, '{}'), in_response, in_now);
END
