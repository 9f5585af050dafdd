-- Only the SHA-256 of the token is stored; the token itself is returned once, here. A retry with the create's
-- idempotency key answers which credential it made, without its token: the caller who lost the answer can then
-- disable it, instead of leaving a live credential nobody holds the token of. A credential made by one that expires
-- expires no later: an admin given a few days could otherwise make itself an admin that never expires.
CREATE PROCEDURE weave_credential_create(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200),
        IN in_actor     VARCHAR(512),
        IN in_scopes    VARCHAR(1024),
        IN in_queues    VARCHAR(4096),
        IN in_expires_at DATETIME(6),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: creates a credential with scopes and allowed queues; the token is returned once.
Parameters: in_token (admin scope and every queue of in_queues: a credential for every queue only from one for every
queue), in_namespace, in_actor (1-128 chars), in_scopes (comma list of admin, definitions:publish, workflows:read,
workflows:start, workflows:signal, workflows:control, workflows:review; at most 512 chars), in_queues (comma list of
queue names, or *), in_expires_at (UTC, later than the engine clock: the credential stops authenticating then; NULL:
never, or when the token''s own credential expires, if it does; no later than that), in_idempotency_key (NULL, or
1-128 printable ASCII, no space: the create''s key among the namespace''s credential creates).
Result set: credential_id, actor, scopes, queues, status, expires_at, token, replayed (1 when a retry with the key
answers the first create again: the credential it made, as it was made, and token NULL).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT (the key created
another credential), 50113 IDEMPOTENCY_KEY_INVALID, 50116 NAME_INVALID, 50118 DEADLINE_INVALID
(in_expires_at not later than now, or later than the token''s own credential''s expiry), 50120 SCOPES_INVALID.
Rules: S-2, M-2.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_admin BIGINT UNSIGNED;
    DECLARE v_admin_actor VARCHAR(128);
    DECLARE v_token VARCHAR(64);
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_rest VARCHAR(1024);
    DECLARE v_scope VARCHAR(1024);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_request LONGTEXT;  -- what the create asks, for its idempotency key
    DECLARE v_answer LONGTEXT;  -- the key's first answer, when it has one
    DECLARE v_expires DATETIME(6);  -- the new credential's expiry (set once in_expires_at is known to be a time)
    DECLARE v_bound DATETIME(6) DEFAULT NULL;  -- the expiry of the credential whose token asks
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_credential_create', v_tx);
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', NULL, v_ns, v_admin, v_admin_actor, v_now, v_allowed);
    IF in_actor IS NULL OR CHAR_LENGTH(in_actor) NOT BETWEEN 1 AND 128 OR in_actor REGEXP '[[:cntrl:]]' THEN
        CALL _weave_raise(50116, 'NAME_INVALID: actor must be 1-128 printable chars');
    END IF;
    IF in_scopes IS NULL OR in_scopes = '' THEN
        CALL _weave_raise(50120, 'SCOPES_INVALID: at least one scope is needed');
    END IF;
    IF CHAR_LENGTH(in_scopes) > 512 THEN  -- the column's width
        CALL _weave_raise(50120, 'SCOPES_INVALID: the scope list is at most 512 characters');
    END IF;
    SET v_rest = in_scopes;
    WHILE v_rest <> '' DO
        SET v_scope = SUBSTRING_INDEX(v_rest, ',', 1);
        SET v_rest = IF(LOCATE(',', v_rest) > 0, SUBSTRING(v_rest, LOCATE(',', v_rest) + 1), '');
        -- Matched as _weave_authorize matches it (FIND_IN_SET): exactly. An IN list would let 'workflows:read ' pass
        -- (the collation pads spaces), and the credential would hold a scope that never grants anything.
        IF FIND_IN_SET(v_scope, 'admin,definitions:publish,workflows:read,workflows:start,workflows:signal,'
                                'workflows:control,workflows:review') = 0 THEN
            CALL _weave_raise(50120, CONCAT('SCOPES_INVALID: unknown scope ', LEFT(v_scope, 64)));
        END IF;
    END WHILE;
    IF in_queues IS NULL OR (in_queues <> '*' AND NOT (in_queues REGEXP '^[A-Za-z0-9_.:-]{1,64}(,[A-Za-z0-9_.:-]{1,64})*\\z'))
       OR CHAR_LENGTH(in_queues) > 2048 THEN
        CALL _weave_raise(50116, 'NAME_INVALID: queues must be * or a comma list of queue names');
    END IF;
    CALL _weave_queues_check(in_queues, v_allowed);  -- once the list is known to be one (S-2)
    -- A date that is no time (a zero month or day: a session without NO_ZERO_DATE passes it) is NULL to COALESCE,
    -- and later than the clock to a comparison: refused here rather than by the column.
    IF in_expires_at IS NOT NULL AND COALESCE(in_expires_at) IS NULL THEN
        CALL _weave_raise(50118, 'DEADLINE_INVALID: expires_at must be a time of the calendar');
    END IF;
    SET v_request = JSON_OBJECT('actor', in_actor, 'scopes', in_scopes, 'queues', in_queues,
                                'expires_at', DATE_FORMAT(in_expires_at, '%Y-%m-%dT%H:%i:%s.%fZ'));
    CALL _weave_admin_replay(v_ns, 'credential.create', in_idempotency_key, SHA2(v_request, 256),
                             'created another credential', v_answer);
    IF in_idempotency_key IS NOT NULL THEN
        CALL _weave_now(v_now);  -- R-2: after the namespace's lock, which a try of the same key may have held
    END IF;
    IF v_answer IS NOT NULL THEN
        COMMIT;
        SELECT JSON_VALUE(v_answer, '$.credential_id') AS credential_id, in_actor AS actor, in_scopes AS scopes,
               in_queues AS queues, 'ACTIVE' AS status,
               CAST(STR_TO_DATE(JSON_VALUE(v_answer, '$.expires_at'), '%Y-%m-%dT%H:%i:%s.%fZ') AS DATETIME(6))
                 AS expires_at, NULL AS token, 1 AS replayed;
    ELSE
        IF in_expires_at <= v_now THEN
            CALL _weave_raise(50118, CONCAT('DEADLINE_INVALID: expires_at must be later than the engine clock (',
                                            DATE_FORMAT(v_now, '%Y-%m-%dT%H:%i:%s.%fZ'), ')'));
        END IF;
        SET v_expires = in_expires_at;
        SELECT expires_at INTO v_bound FROM weave_credentials WHERE id = v_admin;
        IF v_bound IS NOT NULL THEN
            IF v_expires > v_bound THEN
                CALL _weave_raise(50118, CONCAT('DEADLINE_INVALID: expires_at must be no later than this token''s own ',
                                                'expiry (', DATE_FORMAT(v_bound, '%Y-%m-%dT%H:%i:%s.%fZ'), ')'));
            END IF;
            SET v_expires = COALESCE(v_expires, v_bound);
        END IF;
        SET v_token = CONCAT('wv_', LOWER(HEX(RANDOM_BYTES(24))));
        INSERT INTO weave_credentials (namespace_id, actor, token_hash, scopes, queues, status, created_at,
                                       expires_at)
        VALUES (v_ns, in_actor, SHA2(v_token, 256), in_scopes, in_queues, 'ACTIVE', v_now, v_expires);
        SET v_cred = LAST_INSERT_ID();
        CALL _weave_audit(v_ns, 0, v_admin, v_admin_actor, 'credential.create', in_idempotency_key,
                          IF(in_idempotency_key IS NULL, NULL, SHA2(v_request, 256)), v_now, NULL, NULL,
                          JSON_OBJECT('credential_id', CONCAT('cred_', v_cred), 'actor', in_actor,
                                      'scopes', in_scopes, 'queues', in_queues,
                                      'expires_at', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ')),
                          IF(in_idempotency_key IS NULL, NULL,
                             JSON_OBJECT('credential_id', CONCAT('cred_', v_cred),
                                         'expires_at', DATE_FORMAT(v_expires, '%Y-%m-%dT%H:%i:%s.%fZ'))));
        COMMIT;
        SELECT CONCAT('cred_', v_cred) AS credential_id, in_actor AS actor, in_scopes AS scopes,
               in_queues AS queues, 'ACTIVE' AS status, v_expires AS expires_at, v_token AS token, 0 AS replayed;
    END IF;
END
