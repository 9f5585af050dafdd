-- C-2 cancel: CANCELLING with the gate CLOSED; queued tasks are cancelled at once and running ones asked
-- to stop (their real outcome is still collected, K-5); waiting waits are cancelled, pending signals
-- rejected INSTANCE_SETTLED, every non-final step CANCELLED and open review reasons closed. The
-- instance becomes CANCELLED (final) when no task of it is in flight any more. The decision itself is
-- _weave_instance_control, shared with pause and resume. The facts of the instance that fell due before it are
-- decided first, as a running orchestrator would have decided them.
CREATE PROCEDURE weave_instance_cancel(
        IN in_token           VARCHAR(512),
        IN in_namespace       VARCHAR(200),
        IN in_workflow_id     VARCHAR(64),
        IN in_reason          VARCHAR(4096),
        IN in_idempotency_key VARCHAR(512))
    COMMENT 'Description: cancels an instance (C-2); cancelling a CANCELLING or CANCELLED instance is a no-op success.
Parameters: in_token (workflows:control and every queue of the definition), in_namespace, in_workflow_id, in_reason
(1-1024 chars), in_idempotency_key (1-128 printable ASCII, no space).
Result set: workflow_id, status (CANCELLING or CANCELLED), changed, replayed.
Result sets 2-6: the instance as it is now, as weave_instance_get answers it (the action''s scope is enough).
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND, 50005 IDEMPOTENCY_CONFLICT, 50007 INVALID_STATE
(SUCCEEDED), 50111 REASON_INVALID, 50113 IDEMPOTENCY_KEY_INVALID.
Rules: C-2, C-6, K-5, S-9, R-8, R-13, F-9.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_changed TINYINT;
    DECLARE v_replayed TINYINT;
    DECLARE v_behind BOOLEAN;
    DECLARE v_inst BIGINT UNSIGNED;  -- the instance's id, once the action's opening has found it by its workflow id
    DECLARE v_class VARCHAR(16);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_outcome VARCHAR(16);
    DECLARE v_now DATETIME(6);
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_errno INT;
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    CALL _weave_transaction_begin('weave_instance_cancel', v_tx);  -- refused inside a caller's transaction (R-1)
    CALL _weave_instance_control(in_token, in_namespace, in_workflow_id, in_reason, in_idempotency_key, 'cancel',
                                 TRUE, v_status, v_changed, v_replayed, v_behind);
    IF v_behind THEN
        -- Facts of the instance fell due before the cancel and are still to be decided (the control changed nothing):
        -- they are decided first, earliest first, each in its own transaction and as the orchestrator decides it (a
        -- timer that fell due is settled, a task outcome stored in the inbox applied), at most 32; then the cancel
        -- decides from what they left, authorised and locked again. With every runner down, a cancel would otherwise
        -- end an instance that its facts had ended, and leave the outcome of a task that ran, a charge made, out of
        -- its steps. No new work starts here: to the decisions of this session the instance's gate is shut
        -- (@weave_facts_only, read by the ROOT walk and a POLL's next round), for a cancel must never be what starts
        -- a task; so the facts' own order changes nothing, and no decision waits for another (a lease run out, the
        -- ROOT walk). A deferral this writes for that closed gate is looked at again in a second, should the
        -- cancel then fail.
        COMMIT;
        SET v_inst = CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), @weave_facts_only = v_inst;
        guarded: BEGIN
            -- Whatever ends the call inside (an interrupt, a lost connection), the session decides new work again.
            DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SET @weave_facts_only = NULL; RESIGNAL; END;
            facts: WHILE v_done < 32 DO
                CALL _weave_now(v_now);
                SET v_class = NULL;
                SELECT d.class, d.id INTO v_class, v_id
                  FROM ((SELECT 'CHECKPOINT' AS class, c.id, c.due_at AS due_at
                           FROM weave_pending_advances c FORCE INDEX (uq_checkpoint)
                          WHERE c.instance_id = v_inst AND c.kind <> 'ROOT' AND c.deferred_reason IS NULL
                            AND c.attempts = 0 AND c.due_at <= v_now AND c.available_at <= v_now)
                        UNION ALL
                        (SELECT 'INBOX', x.id, x.occurred_at
                           FROM pulse_inbox x FORCE INDEX (ix_inbox_instance)
                          WHERE x.instance_id = v_inst AND x.state = 'PENDING' AND x.attempts = 0
                            AND x.available_at <= v_now)) d
                 ORDER BY d.due_at, d.class, d.id LIMIT 1;
                IF v_class IS NULL THEN
                    LEAVE facts;
                END IF;
                SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
                START TRANSACTION;
                SAVEPOINT weave_cancel_fact;
                fact: BEGIN
                    -- A decision that fails is undone alone and left to the orchestrator, which books it (R-12): the
                    -- cancel goes on, as an operator's must while the runners are down. An interrupt, a deadlock or a
                    -- lost connection is the whole call's.
                    DECLARE EXIT HANDLER FOR SQLEXCEPTION
                    BEGIN
                        GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
                        IF _weave_error_ends_call(v_errno) THEN
                            RESIGNAL;
                        END IF;
                        ROLLBACK TO SAVEPOINT weave_cancel_fact;
                        SET v_outcome = 'FAILED';
                    END;
                    IF v_class = 'CHECKPOINT' THEN
                        CALL _weave_checkpoint_decide(v_id, v_outcome);
                    ELSE
                        CALL _weave_inbox_decide(v_id, v_outcome);
                    END IF;
                END fact;
                COMMIT;
                IF v_outcome IN ('BUSY', 'FAILED') THEN  -- another node decides, or it is left to the orchestrator
                    LEAVE facts;
                END IF;
                SET v_done = v_done + 1;
            END WHILE;
        END guarded;
        SET @weave_facts_only = NULL;
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        CALL _weave_instance_control(in_token, in_namespace, in_workflow_id, in_reason, in_idempotency_key, 'cancel',
                                     FALSE, v_status, v_changed, v_replayed, v_behind);
    END IF;
    COMMIT;
    SELECT in_workflow_id AS workflow_id, v_status AS status, v_changed AS changed, v_replayed AS replayed;
    -- The instance as it is now, for the credential that acted (its scope is enough, 07-api), in its own snapshot:
    -- REPEATABLE READ whatever the session's level, under which a snapshot would read uncommitted or later rows.
    SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;
    START TRANSACTION WITH CONSISTENT SNAPSHOT;
    CALL _weave_instance_show(in_namespace, CAST(SUBSTRING(in_workflow_id, 4) AS UNSIGNED), NULL);
    COMMIT;
END
