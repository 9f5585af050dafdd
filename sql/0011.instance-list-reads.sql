-- Weave schema, level 11: instances listed by control and by review code without reading the namespace.
-- A list of the PAUSED instances of a namespace (GET /workflows?control=PAUSED, the console's filter) walked the
-- namespace newest first and kept the paused ones: beside 300,000 settled instances it read 300,052 rows for a
-- page of 7. Instances keep their control once settled, so a paused instance of the history is an answer like a
-- live one: the list reads the range of ix_instance_control for the control asked for, which holds only answers.
-- Its cost: one more index entry written by every instance start, moved by every pause and resume.
-- A list by review code walked the namespace the same way (600,115 rows for a page of 5): it now reads the open
-- reasons of that code in that namespace, in instance order, on ix_review_open, whose range was every open reason
-- of every namespace. Same entries, so no write pays more; weave_status reads its closed_at prefix as before.
-- depends: 0010.task-app-index

ALTER TABLE weave_instances ADD KEY ix_instance_control (namespace_id, control, id);

ALTER TABLE weave_review_reasons DROP KEY ix_review_open,
    ADD KEY ix_review_open (closed_at, code, namespace_id, instance_id);
