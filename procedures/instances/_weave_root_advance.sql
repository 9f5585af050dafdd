-- The graph walk of R-7..R-9, run by the ROOT checkpoint and inline after any step settles. At most
-- in_budget step changes happen here; when more steps are ready the ROOT checkpoint stays due now.
-- The caller holds the instance row lock and owns the transaction. The event of a step that settled just before
-- the walk (_weave_step_close) is the walk's to write, first, under the number the settling update took for it:
-- the instance's event_seq as the walk reads it. When that step was the last, the settling update has ended the
-- instance as well (R-9) and taken the next number for its INSTANCE_SUCCEEDED; the walk inserts the two events
-- together and removes the instance's checkpoints. A walk that leaves nothing for later removes the ROOT
-- checkpoint, when the caller says one may be there (in_checkpointed): a start has written none.
CREATE PROCEDURE _weave_root_advance(
        IN  in_namespace_id BIGINT UNSIGNED,
        IN  in_instance_id  BIGINT UNSIGNED,
        IN  in_now          DATETIME(6),
        IN  in_budget       INT,
        IN  in_checkpointed BOOLEAN,
        IN  in_event        VARCHAR(48),
        IN  in_step_key     VARCHAR(64),
        IN  in_seq          INT UNSIGNED,
        IN  in_facts        LONGTEXT,
        OUT out_outcome     VARCHAR(16))
    COMMENT 'Internal. Description: activates ready steps (R-7) under the new-work conditions (R-8), or completes the
instance (R-9); in_checkpointed: a ROOT checkpoint may exist (FALSE only at the start, which wrote none).
in_event, in_step_key, in_seq, in_facts: the event of the step that settled just before the walk (in_event NULL:
none), written as the first event of the walk under the instance''s event_seq, which the caller has raised for it
(by two when it ended the instance: that step was its last); that step''s checkpoint, if any, is removed by the walk.
out_outcome: IDLE, ACTIVATED, MORE, DEFERRED, REVIEW or SUCCEEDED.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_status VARCHAR(16);
    DECLARE v_control VARCHAR(16);
    DECLARE v_gate VARCHAR(16);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_def BIGINT UNSIGNED;
    DECLARE v_cred_status VARCHAR(16);
    DECLARE v_app_status VARCHAR(16);
    DECLARE v_cred BIGINT UNSIGNED;  -- the instance's identity and app: what a deferral for them waits for
    DECLARE v_app BIGINT UNSIGNED;
    DECLARE v_step BIGINT UNSIGNED;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_result VARCHAR(256);
    DECLARE v_waits_for BIGINT UNSIGNED;  -- what a deferral waits for: its room's app or queue, or a disabled one
    DECLARE v_unfinished INT;
    DECLARE v_ready INT;
    DECLARE v_readiness VARCHAR(64);  -- ready steps 'count:position:id' (count 0: none)
    DECLARE v_list VARCHAR(1024) DEFAULT NULL;  -- when several are ready: the first in_budget ids, comma-separated
    DECLARE v_listed INT DEFAULT 0;  -- how many ids v_list holds
    DECLARE v_why VARCHAR(64) DEFAULT NULL;
    DECLARE v_last BOOLEAN;  -- the instance is RUNNING and every step has SUCCEEDED: it ends here (R-9)
    DECLARE v_event_no INT UNSIGNED;  -- the instance's event_seq: in_event's number, when there is one
    DECLARE v_ended BOOLEAN;  -- the step that settled before the walk was the last: its update ended the instance
    DECLARE v_deferral LONGTEXT;
    DECLARE v_checkpoints VARCHAR(64);  -- the instance's checkpoints 'all:closing:own' (see below)
    DECLARE v_cps_all INT UNSIGNED;
    DECLARE v_cps_closing INT UNSIGNED;
    DECLARE v_cps_own INT UNSIGNED;  -- what the new work had been waiting for, when it met the deadline deferred

    -- One read: the instance's R-8 states (with its identity and app), how many of its steps are unfinished (the
    -- count its row keeps, lowered by the statement that settles a step), and how many are ready (PENDING with
    -- every after-step SUCCEEDED) with the first ready one by position, packed as 'count:position:id'. The
    -- instance row is read first, as a constant, so the server sees at once that a subquery whose condition needs
    -- PENDING steps (the count its row keeps) finds nothing when none is left, and skips most of its planning (the
    -- settlement of a last step, or of one whose siblings are all activated: about 45 us of database CPU for the
    -- read, 115-145 with the count's subquery, 20,000 times in a loop). A
    -- step's unfinished after-steps are an anti-join, not a NOT EXISTS: a dependent subquery gets a cache, which
    -- is a temporary table for every read. The instance's steps are read through their key, never by a scan: where
    -- a few large instances are most of the table (a new installation) the optimizer would rather scan it, and the
    -- read would grow with every other instance. Activating a step changes no other step's readiness, so when
    -- several are ready the walk below reads their list once.
    SELECT i.status, i.control, i.gate, i.deadline_at, i.definition_id, c.status, a.status, i.credential_id, i.app_id,
           i.open_steps, i.event_seq,
           (SELECT CONCAT(COUNT(*), ':', COALESCE(MIN(CONCAT(LPAD(s.position, 10, '0'), ':', s.id)), ''))
              FROM weave_steps s FORCE INDEX (uq_step_key)
              LEFT JOIN (weave_definition_edges e
                         JOIN weave_steps p ON p.instance_id = in_instance_id AND p.step_key = e.after_key
                          AND p.status <> 'SUCCEEDED')
                ON e.definition_id = i.definition_id AND e.step_key = s.step_key
             WHERE i.pending_steps > 0 AND s.instance_id = in_instance_id AND s.status = 'PENDING'
               AND e.step_key IS NULL),
           (SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(k.step_key IN ('', COALESCE(in_step_key, ''))), 0), ':',
                          COALESCE(SUM(k.step_key = COALESCE(in_step_key, '')), 0))
              FROM weave_pending_advances k FORCE INDEX (uq_checkpoint)
             WHERE k.instance_id = in_instance_id
               AND (i.open_steps = 0 OR i.status = 'SUCCEEDED' OR k.step_key IN ('', COALESCE(in_step_key, ''))))
      INTO v_status, v_control, v_gate, v_deadline, v_def, v_cred_status, v_app_status, v_cred, v_app, v_unfinished,
           v_event_no, v_readiness, v_checkpoints
      FROM weave_instances i
      JOIN weave_credentials c ON c.id = i.credential_id
      JOIN weave_apps a ON a.id = i.app_id
     WHERE i.id = in_instance_id;
    -- The caller holds the instance's row, and the count always answers: a read that came back empty was cut short.
    -- A KILL QUERY that lands in a subquery of a SELECT's select list gives that subquery no value (NULL, or 0 for an
    -- EXISTS) and no error, and the server forgets the kill (MariaDB 10.11): the walk went on as if nothing were
    -- ready, and the caller committed a start or a settlement whose next step never activated, with nothing due to
    -- say so. It is the interrupt it is: the decision is undone, and tried again.
    IF v_status IS NULL OR v_readiness IS NULL OR v_checkpoints IS NULL THEN
        CALL _weave_raise(50016, 'INTERRUPTED: the walk''s read of the instance came back empty; nothing is changed');
    END IF;
    -- The checkpoints the walk's deletes remove, counted before (every one of the instance's, counted only when it has
    -- no open step left and may end, so that a decision of a wide instance reads two keys, not its every wait; its
    -- ROOT and the settled step's; the settled step's): a KILL QUERY that lands in a DELETE ends its scan early, with
    -- no error and no warning, and the decision committed with its checkpoint left behind (MariaDB 10.11, seen under
    -- kills aimed at the walk). A delete that removed fewer is that interrupt, and undoes the decision.
    SET v_cps_all = CAST(SUBSTRING_INDEX(v_checkpoints, ':', 1) AS UNSIGNED),
        v_cps_closing = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(v_checkpoints, ':', 2), ':', -1) AS UNSIGNED),
        v_cps_own = CAST(SUBSTRING_INDEX(v_checkpoints, ':', -1) AS UNSIGNED);
    SET v_ready = CAST(SUBSTRING_INDEX(v_readiness, ':', 1) AS UNSIGNED),
        v_step = IF(v_ready = 0, NULL, CAST(SUBSTRING_INDEX(v_readiness, ':', -1) AS UNSIGNED));
    SET v_ended = in_event IS NOT NULL AND v_status = 'SUCCEEDED';
    SET v_last = v_status = 'RUNNING' AND v_step IS NULL AND v_unfinished = 0;
    IF in_event IS NOT NULL AND NOT v_ended THEN
        INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
        VALUES (in_instance_id, v_event_no, in_namespace_id, in_event, in_step_key, in_seq, in_now,
                COALESCE(in_facts, '{}'));
    END IF;

    root: BEGIN
        IF v_ended THEN
            -- R-9: two rows of VALUES (an INSERT ... SELECT of a UNION costs twice as much).
            INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
            VALUES (in_instance_id, v_event_no - 1, in_namespace_id, in_event, in_step_key, in_seq, in_now,
                    COALESCE(in_facts, '{}')),
                   (in_instance_id, v_event_no, in_namespace_id, 'INSTANCE_SUCCEEDED', '', 0, in_now, '{}');
            DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id;
            IF ROW_COUNT() <> v_cps_all THEN
                CALL _weave_raise(50016, 'INTERRUPTED: a delete of the walk came back short; nothing is changed');
            END IF;
            SET out_outcome = 'SUCCEEDED';
            LEAVE root;
        END IF;
        IF v_status <> 'RUNNING' THEN
            SET out_outcome = 'IDLE';
            LEAVE root;
        END IF;

        IF v_step IS NULL THEN
            IF v_last THEN
                -- R-9 for a walk with no settled step before it (a settled last step has ended the instance in
                -- its own update, above): every step has SUCCEEDED, as when a person resolved the last one. The
                -- status changes in the statement that takes the number of the instance's event.
                UPDATE weave_instances SET status = 'SUCCEEDED', finished_at = in_now,
                       event_seq = LAST_INSERT_ID(event_seq + 1), updated_at = in_now,
                       version = version + 1
                 WHERE id = in_instance_id;
                INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at,
                                          data)
                VALUES (in_instance_id, LAST_INSERT_ID(), in_namespace_id, 'INSTANCE_SUCCEEDED', '', 0, in_now, '{}');
                DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id;
                IF ROW_COUNT() <> v_cps_all THEN
                    CALL _weave_raise(50016, 'INTERRUPTED: a delete of the walk came back short; nothing is changed');
                END IF;
                SET out_outcome = 'SUCCEEDED';
            ELSE
                SET out_outcome = 'IDLE';
            END IF;
            LEAVE root;
        END IF;

        -- New work is needed (R-8).
        IF in_now >= v_deadline THEN
            -- Work that waited for room, or for its app or identity, until the deadline: the review says so, for
            -- extending the deadline alone would not let it start.
            SELECT JSON_OBJECT('reason', deferred_reason,
                               'since', DATE_FORMAT(deferred_since, '%Y-%m-%dT%H:%i:%s.%fZ'), 'detail', last_error)
              INTO v_deferral
              FROM weave_pending_advances
             WHERE instance_id = in_instance_id AND step_key = '' AND deferred_reason IS NOT NULL;
            CALL _weave_review_open(in_namespace_id, in_instance_id, 'INSTANCE_DEADLINE', '', 0,
                 JSON_OBJECT('deadline_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'),
                             'checked_at', DATE_FORMAT(in_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
                             'deferred', JSON_EXTRACT(v_deferral, '$')), in_now);
            SET out_outcome = 'REVIEW';
            LEAVE root;
        END IF;
        SET v_why = _weave_work_blocker(in_instance_id, v_status, v_control, v_gate, v_cred_status, v_app_status);
        IF v_why IS NOT NULL THEN
            -- Resume makes ROOT due at once (C-1), so a paused instance can wait long between checks; so does
            -- enabling the identity or the app that is disabled (the deferral names it, and backs off up to ten
            -- seconds: _weave_checkpoint_defer). A closed gate is looked at every second. Never past the
            -- instance deadline (not passed yet, above): the work waiting here is new work, and at that deadline
            -- it is a review (R-8), which a pause must not put off (C-1: no deadline moves).
            SET v_waits_for = _weave_blocker_owner(v_why, v_cred, v_app);
            CALL _weave_checkpoint_defer(in_namespace_id, in_instance_id, '', 'ROOT', 0,
                 LEAST(in_now + INTERVAL IF(v_control = 'PAUSED', 60, IF(v_waits_for IS NULL, 1, 10)) SECOND,
                       v_deadline), in_now, v_why, v_waits_for);
            SET out_outcome = 'DEFERRED';
            LEAVE root;
        END IF;

        IF v_ready > 1 AND in_budget > 1 THEN
            -- Several steps are ready: the first in_budget of them, in the order the walk activates them, are read
            -- once. A readiness read goes over every step of the instance, so reading the next ready step after
            -- each activation would cost a fan-out of n steps n reads of n steps. Activating a step changes no
            -- other step's readiness, and every writer of the instance's steps holds its row, so the list stays
            -- true through the walk. It is fetched whole before any step is activated: the cursor's NOT FOUND
            -- handler must not be in scope of the activations' calls.
            ready: BEGIN
                DECLARE v_id BIGINT UNSIGNED;
                DECLARE v_end BOOLEAN DEFAULT FALSE;
                DECLARE c_ready CURSOR FOR
                    SELECT s.id FROM weave_steps s FORCE INDEX (uq_step_key)
                      LEFT JOIN (weave_definition_edges e
                                 JOIN weave_steps p ON p.instance_id = in_instance_id AND p.step_key = e.after_key
                                  AND p.status <> 'SUCCEEDED')
                        ON e.definition_id = v_def AND e.step_key = s.step_key
                     WHERE s.instance_id = in_instance_id AND s.status = 'PENDING' AND e.step_key IS NULL
                     ORDER BY s.position, s.id LIMIT in_budget;
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = TRUE;
                OPEN c_ready;
                ids: LOOP
                    FETCH c_ready INTO v_id;
                    IF v_end THEN
                        LEAVE ids;
                    END IF;
                    SET v_list = CONCAT_WS(',', v_list, v_id), v_listed = v_listed + 1;
                END LOOP;
                CLOSE c_ready;
            END ready;
        END IF;

        WHILE v_step IS NOT NULL AND v_done < in_budget DO
            CALL _weave_step_activate(in_namespace_id, in_instance_id, v_step, in_now, v_result, v_waits_for);
            IF v_result = 'REVIEW' THEN
                -- R-18: the step went to review; a recovery action makes ROOT due again.
                SET out_outcome = 'REVIEW';
                LEAVE root;
            ELSEIF v_result <> 'ACTIVATED' THEN
                -- Quota or capacity full: nothing was written for this step; wait in line (R-8), and look again
                -- at the latest at the instance deadline, where the work still waiting is a review.
                CALL _weave_checkpoint_defer(in_namespace_id, in_instance_id, '', 'ROOT', 0, v_deadline, in_now,
                                             v_result, v_waits_for);
                SET out_outcome = 'DEFERRED';
                LEAVE root;
            END IF;
            SET v_done = v_done + 1, v_ready = v_ready - 1, v_step = NULL;
            IF v_ready > 0 AND v_done < v_listed THEN
                SET v_step = CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(v_list, ',', v_done + 1), ',', -1) AS UNSIGNED);
            END IF;
        END WHILE;

        IF v_ready > 0 THEN
            CALL _weave_checkpoint_set(in_namespace_id, in_instance_id, '', 'ROOT', 0, in_now, in_now);
            SET out_outcome = 'MORE';
        ELSE
            SET out_outcome = 'ACTIVATED';
        END IF;
    END root;
    -- Nothing left for later (IDLE, REVIEW, ACTIVATED): no ROOT checkpoint stays. DEFERRED and MORE have set it;
    -- SUCCEEDED has removed every checkpoint of the instance. The step that has just settled (in_step_key)
    -- loses its own checkpoint here too, in the same statement where there is one.
    IF in_checkpointed AND out_outcome IN ('IDLE', 'REVIEW', 'ACTIVATED') THEN
        DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id
           AND step_key IN ('', COALESCE(in_step_key, ''));
        IF ROW_COUNT() <> v_cps_closing THEN
            CALL _weave_raise(50016, 'INTERRUPTED: a delete of the walk came back short; nothing is changed');
        END IF;
    ELSEIF in_step_key IS NOT NULL AND out_outcome IN ('DEFERRED', 'MORE') THEN
        DELETE FROM weave_pending_advances WHERE instance_id = in_instance_id AND step_key = in_step_key;
        IF ROW_COUNT() <> v_cps_own THEN
            CALL _weave_raise(50016, 'INTERRUPTED: a delete of the walk came back short; nothing is changed');
        END IF;
    END IF;
END
