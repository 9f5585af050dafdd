-- Creates a namespace (if it does not exist) and a bootstrap credential for it. It takes no token:
-- whoever can CALL it already holds database rights. The credential holds exactly admin and
-- definitions:publish, so it has no signal or workflow rights (S-2); an admin creates those.
CREATE PROCEDURE weave_namespace_bootstrap(IN in_namespace VARCHAR(200))
    COMMENT 'Description: creates the namespace if missing and a new bootstrap credential; the token is shown once.
Parameters: in_namespace - 1-64 chars of [A-Za-z0-9_.-], not . or .. (a segment of the API''s paths).
Result set: namespace, credential_id, actor, scopes, queues, token.
Errors: 50116 NAME_INVALID.
Rules: S-2, M-1.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_token VARCHAR(64);
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_claim('weave_namespace_bootstrap', v_tx);
    -- A namespace names the API's paths (/v1/namespaces/{ns}), where most HTTP clients resolve . and .. away.
    IF in_namespace IS NULL OR NOT (in_namespace REGEXP '^[A-Za-z0-9_.-]{1,64}\\z') OR in_namespace IN ('.', '..') THEN
        CALL _weave_raise(50116, 'NAME_INVALID: namespace must be 1-64 chars of A-Z a-z 0-9 _ . -, and not . or ..');
    END IF;
    CALL _weave_now(v_now);
    INSERT IGNORE INTO weave_namespaces (name, created_at) VALUES (in_namespace, v_now);
    SELECT id INTO v_ns FROM weave_namespaces
     WHERE name = in_namespace AND OCTET_LENGTH(name) = OCTET_LENGTH(in_namespace) FOR UPDATE;
    SET v_token = CONCAT('wv_', LOWER(HEX(RANDOM_BYTES(24))));
    INSERT INTO weave_credentials (namespace_id, actor, token_hash, scopes, queues, status, created_at)
    VALUES (v_ns, 'bootstrap', SHA2(v_token, 256), 'admin,definitions:publish', '*', 'ACTIVE', v_now);
    SET v_cred = LAST_INSERT_ID();
    CALL _weave_audit(v_ns, 0, v_cred, 'bootstrap', 'namespace.bootstrap', NULL, NULL, v_now, NULL, NULL,
                      JSON_OBJECT('namespace', in_namespace, 'credential_id', CONCAT('cred_', v_cred)), NULL);
    COMMIT;
    SELECT in_namespace AS namespace, CONCAT('cred_', v_cred) AS credential_id, 'bootstrap' AS actor,
           'admin,definitions:publish' AS scopes, '*' AS queues, v_token AS token;
END
