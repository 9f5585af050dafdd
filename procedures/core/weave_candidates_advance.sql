-- Several due candidates of one class in one call, each still its own decision in its own transaction
-- (R-1, R-10): the call saves the round trip, the routine call and the caller's bookkeeping per
-- candidate, and lets the commits of several callers group. Each candidate is re-verified under its
-- locks exactly as by its own advancer (the same decision routine: _weave_checkpoint_decide for
-- weave_checkpoint_advance, _weave_inbox_decide for weave_inbox_consume), so a list from an old scan is
-- safe. A failure stops the call: the decisions already committed stay, the failing one is rolled back,
-- and the caller advances the rest one by one with the class's advancer, which books that failure (R-12).
CREATE PROCEDURE weave_candidates_advance(IN in_class VARCHAR(16), IN in_ids LONGTEXT)
    COMMENT 'Description: advances each candidate of a list, in order, each in its own transaction.
Parameters: in_class - CHECKPOINT or INBOX; in_ids - JSON array of 1..1000 candidate ids of that class (from
weave_scan; each an integer of 1-19 digits).
Result set: id, outcome - one row per candidate, outcomes as weave_checkpoint_advance (CHECKPOINT) or
weave_inbox_consume (INBOX); made_due - on every row, 1 when any decision of the call made a candidate due at its
own time (as weave_checkpoint_advance).
Errors: 50121 LIMIT_INVALID for a list that is not 1..1000 ids (checked before the first decision); 50100
INVALID_ARGUMENT for another class; otherwise as the class''s advancer (the decisions before the failing one stay
committed).
Rules: R-1, R-6, R-10, R-12, R-13.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_n INT DEFAULT 0;
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_outcome VARCHAR(16);
    DECLARE v_results LONGTEXT DEFAULT '[]';
    DECLARE v_due_before BIGINT DEFAULT @weave_made_due;  -- the session's count of candidates made due so far
    DECLARE v_tx BOOLEAN DEFAULT FALSE;  -- TRUE once this routine has started its own transaction
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN IF v_tx THEN ROLLBACK; END IF; RESIGNAL; END;
    -- Refused inside a caller's transaction (R-1): on MariaDB the probe is a variable read, with no call unless
    -- it finds one open (as _weave_transaction_begin probes); elsewhere _weave_transaction_own probes.
    IF VERSION() LIKE '%MariaDB%' THEN
        IF @@in_transaction = 1 THEN CALL _weave_transaction_own('weave_candidates_advance'); END IF;
    ELSE
        CALL _weave_transaction_own('weave_candidates_advance');
    END IF;
    CALL _weave_clock_own();  -- its transactions decide by the server's clock (R-2)

    -- Ids only (digits, at most 19: within BIGINT UNSIGNED), checked before the first decision: the cast below would
    -- refuse a fraction, a string or a number too big with a server error (1292) once the earlier decisions had
    -- committed, and read a negative id as another (-1 as 2^64 - 1), a null or an array as no id at all.
    IF in_ids IS NULL OR NOT JSON_VALID(in_ids) OR JSON_TYPE(in_ids) <> 'ARRAY'
       OR JSON_LENGTH(in_ids) NOT BETWEEN 1 AND 1000
       OR NOT (in_ids REGEXP '^[[:space:]]*\\[[0-9,[:space:]]*\\][[:space:]]*$') OR in_ids REGEXP '[0-9]{20}' THEN
        CALL _weave_raise(50121, 'LIMIT_INVALID: give a JSON array of 1..1000 candidate ids');
    END IF;
    IF in_class IS NULL OR in_class NOT IN ('CHECKPOINT', 'INBOX') THEN
        CALL _weave_raise(50100, 'INVALID_ARGUMENT: lists are advanced for the classes CHECKPOINT and INBOX');
    END IF;
    SET v_n = JSON_LENGTH(in_ids);
    SET v_tx = TRUE;
    WHILE v_i < v_n DO
        SET v_id = CAST(JSON_VALUE(in_ids, CONCAT('$[', v_i, ']')) AS UNSIGNED);
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        IF in_class = 'CHECKPOINT' THEN
            CALL _weave_checkpoint_decide(v_id, v_outcome);
        ELSE
            CALL _weave_inbox_decide(v_id, v_outcome);
        END IF;
        COMMIT;
        SET v_results = JSON_ARRAY_APPEND(v_results, '$', JSON_ARRAY(v_id, v_outcome));
        SET v_i = v_i + 1;
    END WHILE;
    SELECT j.id, j.outcome, NOT (@weave_made_due <=> v_due_before) AS made_due
      FROM JSON_TABLE(v_results, '$[*]' COLUMNS (ord FOR ORDINALITY, id BIGINT UNSIGNED PATH '$[0]',
                                                 outcome VARCHAR(16) PATH '$[1]')) j
     ORDER BY j.ord;
END
