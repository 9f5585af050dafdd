-- Sign-out deletes the row: the cookie left in a browser then points at nothing. Closing a session that
-- is already gone is a no-op, so a repeated sign-out is harmless.
CREATE PROCEDURE weave_console_session_close(
        IN in_session_hash VARCHAR(128))
    COMMENT 'Description: ends a console session (sign-out); ending one that does not exist is a no-op.
Parameters: in_session_hash (SHA-256 hex of the session id the cookie carries).
Result set: closed (1 when a session ended, 0 when there was none).
Errors: 50013 IN_TRANSACTION.
Rules: R-1, R-4.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_console_session_close', v_tx);  -- READ COMMITTED: no gap locks on the sessions
    CALL _weave_now(v_now);
    -- The session's row is locked, never its credential's: a disable locks the credential, then its sessions (R-3),
    -- and a sign-out that took them the other way round could deadlock with it. The actor is read without a lock.
    SELECT s.id, s.namespace_id, s.credential_id, (SELECT c.actor FROM weave_credentials c WHERE c.id = s.credential_id)
      INTO v_id, v_ns, v_cred, v_actor
      FROM weave_console_sessions s
     WHERE s.session_hash = in_session_hash FOR UPDATE;
    IF v_id IS NOT NULL AND v_actor IS NULL THEN  -- a credential stays: cut short (see _weave_root_advance)
        CALL _weave_raise(50016, 'INTERRUPTED: the sign-out''s read of its actor came back empty; nothing is changed');
    END IF;
    IF v_id IS NOT NULL THEN
        DELETE FROM weave_console_sessions WHERE id = v_id;
        CALL _weave_audit(v_ns, 0, v_cred, v_actor, 'console.sign_out', NULL, NULL, v_now, NULL, NULL,
                          JSON_OBJECT(), NULL);
    END IF;
    COMMIT;
    SELECT IF(v_id IS NULL, 0, 1) AS closed;
END
