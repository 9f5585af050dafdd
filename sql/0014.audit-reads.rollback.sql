-- Back to level 13: the audit rows of a namespace in time order, whatever their instance.
ALTER TABLE weave_audit DROP KEY ix_audit_namespace,
    ADD KEY ix_audit_namespace (namespace_id, created_at);
