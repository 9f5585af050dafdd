-- The review queue (C-3): the instances waiting for a person, the one waiting longest first, each with its open
-- reasons, in one call. An instance waits from the opening of its earliest open reason (M-3: it is NEEDS_REVIEW exactly
-- while one is open; an action since, a pause or a signal, does not make it wait less). As the status figures do
-- (weave_status), the queue reads the instances in review, one range of ix_instance_status, and their open reasons,
-- never every open reason: a reason opened while an instance was CANCELLING stays open once it is CANCELLED, and those
-- are history, which a read of live work must not read (R-11). So the read grows with the instances in review (an index
-- entry and the lookup of their reasons each, about four rows, and a count), and not with the history beside them; the
-- page's instances are then read whole, each with its reasons. A credential restricted to some queues sees the
-- instances of the definitions that use none other (S-2), in the page and in the count.
CREATE PROCEDURE weave_review_queue(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_limit     INT)
    COMMENT 'Description: the instances of the namespace in NEEDS_REVIEW, the one waiting longest first (by the opening
of its earliest open review reason), with their open reasons, and how many are in review.
Parameters: in_token (workflows:read), in_namespace, in_limit (1..500, NULL = 50).
Result set: workflow_id, definition_name, definition_version, business_key, waiting_since (its earliest open
reason''s opened_at), updated_at, in_review (how many instances in review the credential may see, all of them: the
same on every row), reasons (JSON array of its open reasons, by id: code, step_key and activation_sequence (null for
an instance-level reason), opened_at).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50121 LIMIT_INVALID.
Rules: C-3, M-3, R-11, S-2.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_limit INT DEFAULT COALESCE(in_limit, 50);
    DECLARE v_in_review BIGINT UNSIGNED;
    CALL _weave_authorize(in_token, in_namespace, 'workflows:read', NULL, v_ns, v_cred, v_actor, v_allowed);
    IF v_limit < 1 OR v_limit > 500 THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: limit must be 1..500');
    END IF;
    SELECT COUNT(*) INTO v_in_review
      FROM weave_instances k FORCE INDEX (ix_instance_status)
     WHERE k.namespace_id = v_ns AND k.status = 'NEEDS_REVIEW'
       AND (v_allowed = '*' OR k.definition_id IN (SELECT d.id FROM weave_definitions d
                                                     WHERE d.namespace_id = v_ns
                                                       AND _weave_queue_refused(d.queues, v_allowed) IS NULL));
    -- Each instance's earliest open reason, a lookup of its few reasons; the LIMIT keeps the page in a sort of its
    -- own size, the rest of the range read and dropped. The reasons' list is not cut at a caller's list cap
    -- (group_concat_max_len): the statement raises it for itself.
    /*M!100301 SET STATEMENT group_concat_max_len = 1073741824 FOR */
    SELECT CONCAT('wf_', i.id) AS workflow_id, i.definition_name, i.definition_version, i.business_key,
           COALESCE(w.waiting_since, i.updated_at) AS waiting_since, i.updated_at, v_in_review AS in_review,
           (SELECT JSON_ARRAYAGG(JSON_OBJECT('code', o.code, 'step_key', NULLIF(o.step_key, ''),
                                             'activation_sequence', NULLIF(o.activation_seq, 0),
                                             'opened_at', o.opened_at) ORDER BY o.id)
              FROM weave_review_reasons o FORCE INDEX (ix_review_instance)
             WHERE o.instance_id = i.id AND o.closed_at IS NULL) AS reasons
      FROM (SELECT k.id, (SELECT MIN(r.opened_at) FROM weave_review_reasons r FORCE INDEX (ix_review_instance)
                           WHERE r.instance_id = k.id AND r.closed_at IS NULL) AS waiting_since
              FROM weave_instances k FORCE INDEX (ix_instance_status)
             WHERE k.namespace_id = v_ns AND k.status = 'NEEDS_REVIEW'
               AND (v_allowed = '*' OR k.definition_id IN (SELECT d.id FROM weave_definitions d
                                                             WHERE d.namespace_id = v_ns
                                                               AND _weave_queue_refused(d.queues, v_allowed) IS NULL))
             ORDER BY waiting_since, k.id
             LIMIT v_limit) AS w
      STRAIGHT_JOIN weave_instances i FORCE INDEX (PRIMARY) ON i.id = w.id
     ORDER BY w.waiting_since, w.id;
END
