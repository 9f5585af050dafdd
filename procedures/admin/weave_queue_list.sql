CREATE PROCEDURE weave_queue_list(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200))
    COMMENT 'Description: every queue of the namespace with its capacity and the tasks it holds.
Parameters: in_token (admin), in_namespace.
Result set: name, capacity, queued, running, created_at, updated_at.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: K-8.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT _weave_namespace_authorize(in_token, in_namespace, 'admin');
    SELECT q.name, q.capacity,
           (SELECT COUNT(*) FROM pulse_tasks t WHERE t.queue_id = q.id AND t.status = 'QUEUED') AS queued,
           (SELECT COUNT(*) FROM pulse_tasks t WHERE t.queue_id = q.id AND t.status = 'RUNNING') AS running,
           q.created_at, q.updated_at
      FROM weave_queues q WHERE q.namespace_id = v_ns ORDER BY q.name;
END
