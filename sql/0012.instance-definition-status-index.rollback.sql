-- Back to level 11: the instances of a definition in id order, whatever their status.
ALTER TABLE weave_instances DROP KEY ix_instance_definition_status,
    ADD KEY ix_instance_definition (namespace_id, definition_name, id);
