-- Reads of one instance (its state, events, signals, an explanation) need the namespace and the instance
-- alone: neither the credential nor the actor is written anywhere by a read.
CREATE PROCEDURE _weave_instance_find(
        IN  in_token         VARCHAR(512),
        IN  in_namespace     VARCHAR(200),
        IN  in_workflow_id   VARCHAR(64),
        OUT out_namespace_id BIGINT UNSIGNED,
        OUT out_instance_id  BIGINT UNSIGNED)
    COMMENT 'Internal. Description: authorises in_token to read (workflows:read and every queue of the definition) the
instance in_workflow_id of in_namespace; out_namespace_id and out_instance_id.
Errors: those of _weave_instance_authorize.'
    READS SQL DATA
BEGIN
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_identity BIGINT UNSIGNED;
    CALL _weave_instance_authorize(in_token, in_namespace, in_workflow_id, 'workflows:read',
                                   out_namespace_id, v_cred, v_actor, out_instance_id, v_identity);
END
