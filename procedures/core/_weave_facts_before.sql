-- R-13, F-9: an instance's facts are decided in the order of their stored times, whichever node or scan comes to
-- them first. Served late (every runner down) and out of order, a timer would start its successor's task in an
-- instance whose other wait had run out before the timer fell due, and whose gate that expiry closes. So a decision
-- first reads the earliest stored time among the facts of its instance's other steps that are still to be decided
-- and came before its own time: checkpoints and task outcomes in the inbox (neither deferred for a condition, R-18,
-- nor backing off after a failure, which a person is asked about), queued tasks' deadlines and leases run out. A
-- lost lease's or an expiry's outcome, stored late, counts from the lease's end or the deadline.
-- Each is a read of the instance's own index range, in the order of the facts' times and up to the decision's own,
-- named, so that no plan reads other instances' rows, nor the instance's other work that comes later (a wide
-- fan-out's tasks in flight). Each answers a time, the sentinel for none, so that one cut short by a KILL QUERY (no
-- value, no error) leaves the whole NULL. The step's own facts are its handler's to order (INBOX_FIRST, LEASE_LOST).
-- A PENDING step holds no facts (no activation: no checkpoint, task, attempt or outcome; a reactivation is refused
-- while a task of the instance is unsettled, and removes the step's checkpoint). So the four reads are made only when
-- a step other than the decision's own may hold some: one open and not PENDING (in_open - in_pending, less the
-- decision's own step unless it is the instance's ROOT). When the others are all PENDING, the one fact left is the
-- instance's ROOT checkpoint (activating those steps), a lookup of its key: a chain's decisions but the last made the
-- four reads for successors that had none (about 220 us of the database's CPU each).
-- A function, called in a branch that an instance with one open step does not take: written in the statement as
-- subqueries of its select list, the four reads were planned on every execution of the statement, taken or not
-- (about 190 us of the database's CPU, 20,000 times in a loop); a call not made costs the opening of its tables
-- (about 25 us). Its reads are plain reads of what has committed, without a lock, as a select list's subqueries
-- are, from a locking read too; a RETURN is no statement of the session's.
CREATE FUNCTION _weave_facts_before(
        in_instance_id BIGINT UNSIGNED,
        in_step_key    VARCHAR(64),
        in_before      DATETIME(6),
        in_open        INT,
        in_pending     INT)
    RETURNS DATETIME(6)
    COMMENT 'Internal. Description: the earliest stored time among the facts of the instance''s steps other than
in_step_key (the empty key: the instance''s ROOT) still to be decided that came before in_before: 9999-12-31 when
there is none, NULL when a read was cut short. in_open and in_pending: the instance''s steps not SUCCEEDED and, of
those, PENDING, as locked.
Rules: R-13, F-9.'
    READS SQL DATA
BEGIN
    IF in_open - in_pending > IF(in_step_key = '', 0, 1) THEN
        RETURN LEAST((SELECT COALESCE(MIN(o.due_at), TIMESTAMP'9999-12-31 00:00:00')
                        FROM weave_pending_advances o FORCE INDEX (ix_checkpoint_instance_due)
                       WHERE o.instance_id = in_instance_id AND o.due_at < in_before AND o.step_key <> in_step_key
                         AND o.deferred_reason IS NULL AND o.attempts = 0),
                     (SELECT COALESCE(MIN(x.occurred_at), TIMESTAMP'9999-12-31 00:00:00')
                        FROM pulse_inbox x FORCE INDEX (ix_inbox_instance)
                        JOIN pulse_tasks xt ON xt.id = x.task_id
                       WHERE x.instance_id = in_instance_id AND x.state = 'PENDING' AND x.occurred_at < in_before
                         AND x.attempts = 0 AND xt.step_key <> in_step_key),
                     (SELECT COALESCE(MIN(t.deadline_at), TIMESTAMP'9999-12-31 00:00:00')
                        FROM pulse_tasks t FORCE INDEX (ix_task_instance)
                       WHERE t.instance_id = in_instance_id AND t.status = 'QUEUED' AND t.deadline_at < in_before
                         AND t.step_key <> in_step_key),
                     (SELECT COALESCE(MIN(a.lease_expires_at), TIMESTAMP'9999-12-31 00:00:00')
                        FROM pulse_attempts a FORCE INDEX (ix_attempt_instance)
                        JOIN pulse_tasks lt ON lt.id = a.task_id
                       WHERE a.instance_id = in_instance_id AND a.status = 'RUNNING' AND a.lease_expires_at < in_before
                         AND lt.step_key <> in_step_key));
    END IF;
    IF in_pending > 0 AND in_step_key <> '' THEN  -- the others are PENDING: the ROOT checkpoint that activates them
        RETURN (SELECT COALESCE(MIN(o.due_at), TIMESTAMP'9999-12-31 00:00:00')
                  FROM weave_pending_advances o FORCE INDEX (uq_checkpoint)
                 WHERE o.instance_id = in_instance_id AND o.step_key = '' AND o.due_at < in_before
                   AND o.deferred_reason IS NULL AND o.attempts = 0);
    END IF;
    RETURN TIMESTAMP'9999-12-31 00:00:00';
END
