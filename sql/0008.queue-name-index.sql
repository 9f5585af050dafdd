-- Weave schema, level 8: queues found by name. A claim named its queues by a comma list and matched every
-- queue row against it (FIND_IN_SET), so each claim, the empty claims of idle workers included, read every
-- queue of every namespace: 3,001 queue rows and 1,202 key reads for one queue of one namespace among 1,000
-- namespaces of three queues each. A claim now looks its queues up by name through this index, by name and
-- namespace when it names one.
-- depends: 0001.schema

ALTER TABLE weave_queues ADD KEY ix_queue_name (name, namespace_id);
