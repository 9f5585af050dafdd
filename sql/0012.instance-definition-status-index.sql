-- Weave schema, level 12: instances of a definition by status. A list with a status and a definition (GET
-- /workflows?status=CANCELLED&definition=..., the console's two filters together) walked the status's range and
-- kept the rows of the definition: every CANCELLED instance of the namespace when the definition had none, or
-- 156 rows for a page of 50 where a definition had a third of them beside 300,000 settled instances (15 beside
-- 300). ix_instance_definition_status holds the status after the definition, in place of ix_instance_definition,
-- so the page is the range of both; a definition alone is read from the newest page of each status's range (five
-- at most), merged.
-- Its cost: the entry is moved by every status change of an instance (its finish, a review, a cancel), where it
-- was written once at the start; no index is added.
-- depends: 0011.instance-list-reads

ALTER TABLE weave_instances DROP KEY ix_instance_definition,
    ADD KEY ix_instance_definition_status (namespace_id, definition_name, status, id);
