-- Weave schema, level 7: how many of an instance's steps have not succeeded, on the instance row.
-- The ROOT walk of every settlement and every start counted them with a subquery over the steps and looked for
-- ready steps with a second one; the server prepares and optimizes both on every execution, whether they find
-- anything or not (90-120 of the read's 115-145 us of database CPU). With the count on the row, which the walk
-- holds locked already, the count is a column, and the look for ready steps is cut short at once when no step is
-- left: the settlement of an instance's last step. The count is set at the start (every step PENDING), and
-- lowered in the statement that settles a step SUCCEEDED (the step closing, an operator's resolve); an invariant
-- checks it against the step rows. Existing installs are filled from the steps at upgrade time.
-- depends: 0001.schema

ALTER TABLE weave_instances
    ADD COLUMN open_steps SMALLINT UNSIGNED NOT NULL DEFAULT 0
        COMMENT 'Steps of the instance not SUCCEEDED; lowered in the statement that settles a step SUCCEEDED.'
        AFTER signal_count;

UPDATE weave_instances i
  JOIN (SELECT instance_id, COUNT(*) AS n FROM weave_steps WHERE status <> 'SUCCEEDED' GROUP BY instance_id) s
    ON s.instance_id = i.id
   SET i.open_steps = s.n;
