-- Back to level 7: a claim without a namespace reads the queues in their primary key's order again.
ALTER TABLE weave_queues DROP KEY ix_queue_name;
