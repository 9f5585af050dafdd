-- Weave schema, level 6: the rounds of an instance in index order. The instance's answer (weave_instance_get,
-- and the start's) listed the rounds of its current activations sorted by step position through a temporary
-- table, created even when there is no round: about a quarter of a millisecond on every start and GET. With
-- this index the rounds are read in (activation, round) order, without a sort.
-- depends: 0001.schema

ALTER TABLE weave_poll_rounds ADD KEY ix_round_instance (instance_id, activation_id, round_no);
