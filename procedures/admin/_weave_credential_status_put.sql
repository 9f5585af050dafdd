-- The one decision behind disabling a credential and enabling it again: the same authorization (an admin of every
-- queue of the credential, as for its creation), the same lock, one audit row each time, even when nothing changes.
CREATE PROCEDURE _weave_credential_status_put(
        IN in_token         VARCHAR(512),
        IN in_namespace     VARCHAR(200),
        IN in_credential_id VARCHAR(64),
        IN in_status        VARCHAR(16),
        OUT out_actor       VARCHAR(128))
    COMMENT 'Internal. Description: sets a credential of the namespace DISABLED (disabled_at kept from the first time) or
ACTIVE again (disabled_at cleared), audited as credential.disable or credential.enable, in the caller''s
transaction; out_actor: the credential''s actor.
Enabling a disabled credential makes the checkpoints deferred IDENTITY_DISABLED for it due at once.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: S-2, R-8.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_admin BIGINT UNSIGNED;
    DECLARE v_admin_actor VARCHAR(128);
    DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_queues VARCHAR(2048);
    DECLARE v_allowed VARCHAR(2048);  -- the credential's own queues
    DECLARE v_enabling BOOLEAN DEFAULT FALSE;  -- DISABLED until now, ACTIVE from now
    DECLARE v_ended INT DEFAULT 0;  -- the console sessions a disable ended
    DECLARE v_wait BIGINT UNSIGNED DEFAULT @@SESSION.innodb_lock_wait_timeout;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SET SESSION innodb_lock_wait_timeout = v_wait; RESIGNAL; END;
    CALL _weave_admin_begin(in_token, in_namespace, 'admin', NULL, v_ns, v_admin, v_admin_actor, v_now, v_allowed);
    IF in_credential_id REGEXP '^cred_[0-9]{1,19}\\z' THEN
        -- Every decision of the credential's instances takes its row shared (R-3), and a shared lock asked for after
        -- this exclusive one queues behind it: waiting as long as the session allows behind a long holder (a Send
        -- inside a caller's transaction, S-16) would hold the runners of all those instances as long. A second at
        -- most, then a lock wait, which the caller tries again (transient).
        SET SESSION innodb_lock_wait_timeout = LEAST(v_wait, 1);
        SELECT id, actor, queues, status = 'DISABLED' AND in_status = 'ACTIVE'
          INTO v_id, out_actor, v_queues, v_enabling FROM weave_credentials
         WHERE id = CAST(SUBSTRING(in_credential_id, 6) AS UNSIGNED) AND namespace_id = v_ns FOR UPDATE;
        SET SESSION innodb_lock_wait_timeout = v_wait;
    END IF;
    IF v_id IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such object in this namespace');
    END IF;
    -- An admin restricted to some queues disables and enables only the credentials of its queues (one for every queue
    -- only from an admin of every queue), as it creates only those.
    CALL _weave_queues_check(v_queues, v_allowed);
    UPDATE weave_credentials
       SET status = in_status, disabled_at = IF(in_status = 'DISABLED', COALESCE(disabled_at, v_now), NULL)
     WHERE id = v_id;
    IF v_enabling THEN
        -- The work its instances deferred while it was disabled looks again now (R-8), as resume does for a pause.
        CALL _weave_deferrals_wake('IDENTITY_DISABLED', v_id, v_now);
    END IF;
    IF in_status = 'DISABLED' THEN
        -- A disable ends the credential's console sessions for good: were they only refused while it is disabled,
        -- enabling it again would let every browser left signed in, and every cookie taken, back in. A sign-in
        -- holds the credential shared until it commits, so none is left half-made behind this delete. Through the
        -- credential's index, forced, in the READ COMMITTED transaction its callers open: a scan (which the
        -- optimizer prefers on a small table) would lock every other credential's sessions too, and at REPEATABLE
        -- READ the gap after this credential's entries would keep the next credential's sign-ins waiting.
        DELETE s FROM weave_console_sessions s FORCE INDEX (ix_console_session_credential) WHERE s.credential_id = v_id;
        SET v_ended = ROW_COUNT();
    END IF;
    CALL _weave_audit(v_ns, 0, v_admin, v_admin_actor,
                      IF(in_status = 'DISABLED', 'credential.disable', 'credential.enable'), NULL, NULL, v_now, NULL,
                      NULL, IF(in_status = 'DISABLED',
                               JSON_OBJECT('credential_id', in_credential_id, 'console_sessions_ended', v_ended + 0),
                               JSON_OBJECT('credential_id', in_credential_id)), NULL);
END
