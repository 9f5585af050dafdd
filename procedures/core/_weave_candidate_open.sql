-- Inlined: installed as a block in each routine that calls it, not called (procedures/inlining.py).
-- The opening every candidate advancer shares (R-6, R-13): find the instance the candidate names, take
-- the decision's locks in R-3 order (the instance SKIP LOCKED, so orchestrators never queue behind each
-- other). The caller owns the transaction and re-reads its own candidate row under these locks, and
-- reads the clock in that same statement (R-2: after the locks that order the decision; the statement
-- starts once the instance lock is held, and a statement's clock is the time it started). The clock is
-- never read in the instance lock's own statement: even a SKIP LOCKED read may take its lock later than
-- its start, after a decision that committed meanwhile with a later time (the M-4.16 invariant saw it
-- under a stalled server).
-- This is _weave_instance_lock's sequence fused for the hot path, three statements in all: one read of
-- the candidate with its instance; the identity, share-locked (never the app's row: see _weave_instance_lock);
-- the instance.
CREATE PROCEDURE _weave_candidate_open(
        IN  in_class         VARCHAR(16),
        IN  in_id            BIGINT UNSIGNED,
        OUT out_namespace_id BIGINT UNSIGNED,
        OUT out_instance_id  BIGINT UNSIGNED,
        OUT out_status       VARCHAR(16),
        OUT out_last         DATETIME(6),
        OUT out_open         INT UNSIGNED,
        OUT out_pending      INT UNSIGNED,
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: locks the instance of a CHECKPOINT, SIGNAL or INBOX candidate for its decision.
out_status: the instance''s status, read under its lock; out_last: its updated_at, the time of its last decision, which
the caller''s clock must not go before (R-2); out_open: its count of steps not SUCCEEDED, out_pending: of those, PENDING
(_weave_facts_before takes both). out_outcome: NULL (locked:
decide), GONE (no such candidate or instance) or BUSY (another node holds the instance).
Errors: 50007 INVALID_STATE when an INBOX event names an instance that does not exist.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_named BIGINT UNSIGNED DEFAULT NULL;  -- the instance id the candidate names, found or not
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_dummy BIGINT UNSIGNED;
    DECLARE v_locked BIGINT UNSIGNED DEFAULT NULL;

    SET out_namespace_id = NULL, out_instance_id = NULL, out_status = NULL, out_last = NULL, out_open = NULL,
        out_pending = NULL, out_outcome = 'GONE';
    IF in_class = 'CHECKPOINT' THEN
        SELECT c.instance_id, i.id, i.credential_id, i.namespace_id INTO v_named, v_inst, v_cred, v_ns
          FROM weave_pending_advances c LEFT JOIN weave_instances i ON i.id = c.instance_id
         WHERE c.id = in_id;
    ELSEIF in_class = 'SIGNAL' THEN
        SELECT c.instance_id, i.id, i.credential_id, i.namespace_id INTO v_named, v_inst, v_cred, v_ns
          FROM weave_signals c LEFT JOIN weave_instances i ON i.id = c.instance_id
         WHERE c.id = in_id;
    ELSEIF in_class = 'INBOX' THEN
        SELECT c.instance_id, i.id, i.credential_id, i.namespace_id INTO v_named, v_inst, v_cred, v_ns
          FROM pulse_inbox c LEFT JOIN weave_instances i ON i.id = c.instance_id
         WHERE c.id = in_id;
    END IF;
    opening: BEGIN
        IF v_inst IS NULL THEN  -- no such instance: what _weave_instance_lock answers with 0
            IF in_class = 'INBOX' AND v_named IS NOT NULL THEN
                CALL _weave_raise(50007, 'INVALID_STATE: inbox event of an instance that does not exist');
            END IF;
            LEAVE opening;
        END IF;
        SELECT id INTO v_dummy FROM weave_credentials WHERE id = v_cred LOCK IN SHARE MODE;  -- never the app's row
        -- (see _weave_instance_lock)
        SELECT id, status, updated_at, open_steps, pending_steps
          INTO v_locked, out_status, out_last, out_open, out_pending
          FROM weave_instances WHERE id = v_inst FOR UPDATE SKIP LOCKED;
        IF v_locked IS NULL THEN
            SET out_outcome = 'BUSY', out_status = NULL, out_last = NULL, out_open = NULL, out_pending = NULL;
            LEAVE opening;
        END IF;
        SET out_namespace_id = v_ns, out_instance_id = v_inst, out_outcome = NULL;
    END opening;
END
