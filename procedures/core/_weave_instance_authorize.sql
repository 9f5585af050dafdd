-- Authorisation for routines that act on one instance. The instance is looked up inside the path's
-- namespace only, so an instance of another namespace is indistinguishable from a missing one (404),
-- and the queue check (403) uses the instance's pinned definition only once the instance is known
-- to be visible. Nothing is locked here beyond the credential: callers lock in R-3 order afterwards.
CREATE PROCEDURE _weave_instance_authorize(
        IN  in_token       VARCHAR(512),
        IN  in_namespace   VARCHAR(200),
        IN  in_workflow_id VARCHAR(64),
        IN  in_scope       VARCHAR(64),
        OUT out_namespace_id  BIGINT UNSIGNED,
        OUT out_credential_id BIGINT UNSIGNED,
        OUT out_actor         VARCHAR(128),
        OUT out_instance_id   BIGINT UNSIGNED,
        OUT out_identity_id   BIGINT UNSIGNED)
    COMMENT 'Internal. Description: authenticates, checks scope and the definition queues, and resolves wf_<id>;
out_identity_id: the instance''s starting identity (it never changes), for _weave_instance_lock.
Errors: 50001 UNAUTHENTICATED, 50003 NOT_FOUND, 50002 FORBIDDEN.'
    READS SQL DATA
BEGIN
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues, checked against the definition's there
    DECLARE v_queues VARCHAR(2048) DEFAULT NULL;  -- the definition's queues, for the queue check
    SET out_instance_id = NULL, out_namespace_id = NULL;
    IF in_workflow_id REGEXP '^wf_[0-9]{1,19}\\z' THEN
        -- The namespace is found by its name here already; _weave_authorize takes it instead of reading it again.
        SELECT i.id, d.queues, n.id, i.credential_id
          INTO out_instance_id, v_queues, out_namespace_id, out_identity_id
          FROM weave_instances i
          JOIN weave_namespaces n ON n.id = i.namespace_id AND n.name = in_namespace
                                AND OCTET_LENGTH(n.name) = OCTET_LENGTH(in_namespace)
          JOIN weave_definitions d ON d.id = i.definition_id
         WHERE i.id = CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED);
    END IF;
    CALL _weave_authorize(in_token, in_namespace, in_scope, v_queues,
                          out_namespace_id, out_credential_id, out_actor, v_allowed);
    IF out_instance_id IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such object in this namespace');
    END IF;
END
