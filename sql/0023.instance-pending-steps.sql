-- Weave schema, level 23: how many of an instance's steps are PENDING (not activated), on the instance row.
-- A decision of an instance with more than one open step read the facts of its other steps that came before it
-- (R-13, F-9): four reads, of the checkpoints, the task outcomes in the inbox, the queued tasks and the running
-- attempts, about 220 us of the database's CPU, in every decision of a chain but its last, whose successors are open
-- but PENDING. A PENDING step holds no facts: it has no activation, so no checkpoint, task, attempt or outcome of its
-- own (a reactivation, which sends a step back to PENDING, is refused while a task of the instance is unsettled, and
-- removes the step's checkpoint). With the count on the row the decision reads that row already, the four reads are
-- made only when another step may hold facts, and otherwise only the instance's ROOT checkpoint is looked up, the one
-- fact a step's decision waits for when the others are PENDING. The count is set at the start (every step PENDING),
-- lowered in the statements that take a step out of PENDING (its activation, its review when it cannot be activated,
-- a cancel), and raised by a reactivation; an invariant (M-4.9c) checks it against the step rows. Existing installs
-- are filled from the steps at upgrade time: only a live instance (RUNNING or NEEDS_REVIEW) has PENDING steps (a
-- settled one has none, a cancel cancels them), so the instances read are the live ones alone, through each
-- namespace's status range, with their steps.
-- depends: 0022.instance-facts-index

ALTER TABLE weave_instances
    ADD COLUMN pending_steps SMALLINT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'Steps of the instance PENDING (not activated); changed in the statements that move a step in or out.'
        AFTER open_steps;

UPDATE weave_instances i
  JOIN (SELECT s.instance_id, COUNT(*) AS n
          FROM weave_namespaces ns
          STRAIGHT_JOIN (SELECT 'RUNNING' AS status UNION ALL SELECT 'NEEDS_REVIEW') AS live
          STRAIGHT_JOIN weave_instances l FORCE INDEX (ix_instance_status)
            ON l.namespace_id = ns.id AND l.status = live.status
          STRAIGHT_JOIN weave_steps s FORCE INDEX (uq_step_key) ON s.instance_id = l.id AND s.status = 'PENDING'
         GROUP BY s.instance_id) p
    ON p.instance_id = i.id
   SET i.pending_steps = p.n;
