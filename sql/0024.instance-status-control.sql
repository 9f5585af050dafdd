-- Weave schema, level 24: the instances' status index carries each one's control (ACTIVE or PAUSED).
-- The live figures (weave status, /metrics, the console's dashboard) count the instances of each live status through
-- this index, one range per namespace, and how many of them are paused. Control was only on the row, so each count
-- looked up every live instance's row for it: 100 ms of the database a read with 100,000 timers running, where the
-- index entries alone take 33 ms. With control in the index entry, after the id that orders each status's range
-- (lists and the review queue read it in that order still), the count reads the index alone. Its cost: a pause or a
-- resume rewrites the instance's entry in this index, as a change of status already does.
-- depends: 0023.instance-pending-steps

ALTER TABLE weave_instances DROP KEY ix_instance_status, ADD KEY ix_instance_status (namespace_id, status, id, control);
