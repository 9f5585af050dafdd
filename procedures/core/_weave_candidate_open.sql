-- The opening every candidate advancer shares (R-6, R-13): find the instance the candidate names, take
-- the decision's locks in R-3 order (the instance SKIP LOCKED, so orchestrators never queue behind each
-- other), then read the clock (R-2: after the locks that order the decision). The caller owns the
-- transaction and re-reads its own candidate row under these locks.
CREATE PROCEDURE _weave_candidate_open(
        IN  in_class         VARCHAR(16),
        IN  in_id            BIGINT UNSIGNED,
        OUT out_namespace_id BIGINT UNSIGNED,
        OUT out_instance_id  BIGINT UNSIGNED,
        OUT out_now          DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: locks the instance of a CHECKPOINT, SIGNAL or INBOX candidate for its decision and
reads the clock. out_outcome: NULL (locked: decide), GONE (no such candidate or instance) or BUSY (another node
holds the instance).
Errors: 50007 INVALID_STATE when an INBOX event names an instance that does not exist.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_inst BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_locked TINYINT DEFAULT 0;

    SET out_namespace_id = NULL, out_instance_id = NULL, out_now = NULL, out_outcome = 'GONE';
    IF in_class = 'CHECKPOINT' THEN
        SELECT instance_id INTO v_inst FROM weave_pending_advances WHERE id = in_id;
    ELSEIF in_class = 'SIGNAL' THEN
        SELECT instance_id INTO v_inst FROM weave_signals WHERE id = in_id;
    ELSEIF in_class = 'INBOX' THEN
        SELECT instance_id INTO v_inst FROM pulse_inbox WHERE id = in_id;
    END IF;
    opening: BEGIN
        IF v_inst IS NULL THEN
            LEAVE opening;
        END IF;
        CALL _weave_instance_lock(v_inst, 1, out_namespace_id, v_locked);
        IF v_locked = 0 THEN
            SET out_outcome = 'BUSY';
            LEAVE opening;
        ELSEIF v_locked <> 1 THEN
            IF in_class = 'INBOX' THEN
                CALL _weave_raise(50007, 'INVALID_STATE: inbox event of an instance that does not exist');
            END IF;
            LEAVE opening;
        END IF;
        CALL _weave_now(out_now);
        SET out_instance_id = v_inst, out_outcome = NULL;
    END opening;
END
