-- The transactional outbox (S-16): the signal commits or rolls back together with the caller's own
-- business rows, with no relay. The caller owns the transaction: this routine never starts, commits
-- or rolls it back, and refuses to run outside one (in autocommit mode its writes would commit one by
-- one). A savepoint proves that a transaction is open, portably: outside one, autocommit has already
-- discarded it and ROLLBACK TO SAVEPOINT fails with 1305 (MariaDB and MySQL 8 alike; MySQL has no
-- @@in_transaction, and information_schema.INNODB_TRX is a cache refreshed at most every 100 ms).
-- On an error, only this routine's own writes are undone (back to that savepoint) and the error is
-- raised: the caller's rows and its transaction are left to the caller, who can still commit them.
-- The isolation level is the caller's; every decision reads the latest rows, under the instance's lock (see
-- _weave_signal_accept).
CREATE PROCEDURE weave_signal_send_in_tx(
        IN in_token                 VARCHAR(512),
        IN in_namespace             VARCHAR(200),
        IN in_workflow_id           VARCHAR(64),
        IN in_idempotency_key       LONGTEXT,
        IN in_name                  LONGTEXT,
        IN in_payload_version       LONGTEXT,
        IN in_target_step_key       LONGTEXT,
        IN in_target_activation_seq BIGINT,
        IN in_correlation_key       LONGBLOB,
        IN in_payload               LONGBLOB,
        IN in_reason                LONGTEXT,
        IN in_evidence_ref          LONGTEXT)
    COMMENT 'Description: weave_signal_send inside the caller''s open transaction (transactional outbox): same rules,
receipts and audit; never commits and never rolls the caller''s transaction back. On an error it undoes only its
own writes and raises; the caller decides. Nothing is visible to others until the caller commits.
Parameters: as weave_signal_send.
Result set: as weave_signal_send.
Errors: 50011 NOT_IN_TRANSACTION when called outside a transaction (autocommit on, no START TRANSACTION); 50017
CLOCK_FIXED when the session''s timestamp is set (SET timestamp); otherwise as weave_signal_send.
Rules: S-16, S-1..S-9, R-3, R-4.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_receipt LONGTEXT;
    DECLARE v_replayed TINYINT;
    DECLARE v_outside TINYINT DEFAULT 0;
    DECLARE v_marked TINYINT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        IF v_marked = 1 THEN
            BEGIN
                -- A deadlock has already rolled the whole transaction back, and the savepoint with it.
                DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
                ROLLBACK TO SAVEPOINT weave_signal_send;
            END;
        END IF;
        RESIGNAL;
    END;

    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 SET v_outside = 1;
        SAVEPOINT weave_signal_send;
        ROLLBACK TO SAVEPOINT weave_signal_send;
    END;
    IF v_outside = 1 THEN
        CALL _weave_raise(50011, 'NOT_IN_TRANSACTION: open a transaction first; this entry point never commits');
    END IF;
    CALL _weave_clock_own();
    SET v_marked = 1;
    CALL _weave_signal_accept(in_token, in_namespace, in_workflow_id, in_idempotency_key, in_name,
                              in_payload_version, in_target_step_key, in_target_activation_seq, in_correlation_key,
                              in_payload, in_reason, in_evidence_ref, 0, v_receipt, v_replayed);
    SELECT JSON_VALUE(v_receipt, '$.signal_id') AS signal_id, JSON_VALUE(v_receipt, '$.workflow_id') AS workflow_id,
           JSON_VALUE(v_receipt, '$.idempotency_key') AS idempotency_key, JSON_VALUE(v_receipt, '$.status') AS status,
           JSON_VALUE(v_receipt, '$.disposition') AS disposition, JSON_VALUE(v_receipt, '$.accepted_at') AS accepted_at,
           JSON_VALUE(v_receipt, '$.expires_at') AS expires_at,
           JSON_VALUE(v_receipt, '$.request_digest') AS request_digest, v_receipt AS receipt,
           v_replayed AS replayed;
END
