-- Weave schema, level 14: the audit trail read a namespace at a time. ix_audit_namespace held (namespace, time) and
-- no read used it; it now holds the instance between them, so that a namespace's own actions (instance 0:
-- credentials, apps, queues, definitions, console sign-ins, retention runs) and one instance's audit rows are each
-- one range in time order (weave_audit_list), however long the engine's history beside them.
-- Its cost: none in writes (the same entries, eight bytes wider).
-- depends: 0013.metrics-rollup

ALTER TABLE weave_audit DROP KEY ix_audit_namespace,
    ADD KEY ix_audit_namespace (namespace_id, instance_id, created_at);
