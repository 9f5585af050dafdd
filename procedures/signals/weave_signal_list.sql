-- Listing is keyset-paginated on the acceptance sequence (the signal id), so pages stay stable while
-- new signals arrive; an instance holds at most 1024 signals (S-6), so each page is a small range. Its
-- payloads are not small: each may carry 256 KiB, so a page of 1,000 could be 250 MiB, built whole by the
-- server, the API and the client for one request. A page therefore ends early once its payloads pass
-- 8 MiB (it always holds one signal), and its cursor leads on from there.
CREATE PROCEDURE weave_signal_list(
        IN in_token       VARCHAR(512),
        IN in_namespace   VARCHAR(200),
        IN in_workflow_id VARCHAR(64),
        IN in_status      VARCHAR(64),
        IN in_limit       INT,
        IN in_after_id    VARCHAR(64))
    COMMENT 'Description: the signals of an instance in acceptance order, optionally of one status, in pages.
Parameters: in_token (workflows:read and every queue of the pinned definition), in_namespace, in_workflow_id,
in_status (NULL, PENDING, CONSUMED, REJECTED or EXPIRED), in_limit (1..1000, NULL = 100; a page ends before it once
its payloads pass 8 MiB), in_after_id (NULL, or the next_cursor of the previous page: a sig_... id).
Result set 1: as weave_signal_get, one row per signal.
Result set 2: next_cursor - the cursor of the next page, NULL on the last page.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50100 INVALID_ARGUMENT (status or cursor), 50121
LIMIT_INVALID.
Rules: S-5, M-3.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_limit INT;
    DECLARE v_after BIGINT UNSIGNED DEFAULT 0;
    DECLARE v_last BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_more BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_prev INT;
    DECLARE v_cut BIGINT UNSIGNED DEFAULT NULL;     -- the page's last signal within the byte budget
    DECLARE v_window BIGINT UNSIGNED DEFAULT NULL;  -- its last signal within the limit
    CALL _weave_instance_find(in_token, in_namespace, in_workflow_id, v_ns, v_inst);
    SET v_limit = _weave_page_limit(in_limit);
    IF in_status IS NOT NULL AND in_status NOT IN ('PENDING', 'CONSUMED', 'REJECTED', 'EXPIRED') THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: status must be PENDING, CONSUMED, REJECTED or EXPIRED');
    END IF;
    SET v_after = _weave_cursor_id(in_after_id, 'sig_', 'INVALID_ARGUMENT: the cursor must be a sig_... id');
    -- Ids only grow, so a signal accepted while the page is read can only lengthen a later page. The cut is found by
    -- the sizes kept with the payloads, not the payloads themselves (a signal accepted before level 21 is measured).
    SET v_prev = v_limit - 1;
    SELECT MAX(IF(before_bytes < 8388608, id, NULL)), MAX(id) INTO v_cut, v_window
      FROM (SELECT id, SUM(bytes) OVER (ORDER BY id) - bytes AS before_bytes
              FROM (SELECT id, COALESCE(payload_bytes, OCTET_LENGTH(payload)) AS bytes
                      FROM weave_signals
                     WHERE instance_id = v_inst AND namespace_id = v_ns AND id > v_after
                       AND (in_status IS NULL OR status = in_status)
                     ORDER BY id LIMIT v_limit) w) b;
    SELECT CONCAT('sig_', id) AS signal_id, CONCAT('wf_', instance_id) AS workflow_id, idempotency_key, name,
           payload_version, target_step_key, target_activation_seq AS target_activation_sequence,
           CONVERT(correlation_key USING utf8mb4) AS correlation_key, LOWER(HEX(correlation_key)) AS correlation_key_hex,
           CONVERT(payload USING utf8mb4) AS payload, reason, evidence_ref, actor, status, disposition, accepted_at,
           expires_at, consumed_at, request_digest
      FROM weave_signals
     WHERE instance_id = v_inst AND namespace_id = v_ns AND id > v_after AND (in_status IS NULL OR status = in_status)
       AND id <= v_cut
     ORDER BY id LIMIT v_limit;
    IF v_cut < v_window THEN  -- ended by the byte budget: the rest of the window follows
        SELECT CONCAT('sig_', v_cut) AS next_cursor;
    ELSE
        SELECT id INTO v_last FROM weave_signals
         WHERE instance_id = v_inst AND namespace_id = v_ns AND id > v_after
           AND (in_status IS NULL OR status = in_status)
         ORDER BY id LIMIT 1 OFFSET v_limit;
        IF v_last IS NOT NULL THEN
            SELECT id INTO v_more FROM weave_signals
             WHERE instance_id = v_inst AND namespace_id = v_ns AND id > v_after
               AND (in_status IS NULL OR status = in_status)
             ORDER BY id LIMIT 1 OFFSET v_prev;
        END IF;
        SELECT IF(v_more IS NULL, NULL, CONCAT('sig_', v_more)) AS next_cursor;
    END IF;
END
