CREATE PROCEDURE weave_app_list(
        IN in_token     VARCHAR(512),
        IN in_namespace VARCHAR(200))
    COMMENT 'Description: every app of the namespace with its quota, status and the tasks it has in flight.
Parameters: in_token (admin), in_namespace.
Result set: name, max_in_flight, status, in_flight (QUEUED and RUNNING tasks), waiting (work deferred for the
app: in its line for room, QUOTA_FULL, or for it to be enabled, APP_DISABLED), created_at, updated_at.
Errors: 50001 UNAUTHENTICATED, 50002 FORBIDDEN, 50003 NOT_FOUND.
Rules: K-8.'
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT _weave_namespace_authorize(in_token, in_namespace, 'admin');
    SELECT a.name, a.max_in_flight, a.status,
           -- The app's counter (K-8): slots taken by task creations less those given back by task ends.
           CAST(a.slots_taken - (SELECT SUM(r.released) FROM pulse_slot_releases r
                                  WHERE r.owner_kind = 'APP' AND r.owner_id = a.id) AS UNSIGNED) AS in_flight,
           -- Its line (R-8, R-18): one index entry a waiter, no other row read.
           (SELECT COUNT(*) FROM weave_pending_advances w FORCE INDEX (ix_checkpoint_room_line)
             WHERE w.deferred_reason IN ('QUOTA_FULL', 'APP_DISABLED') AND w.deferred_for = a.id) AS waiting,
           a.created_at, a.updated_at
      FROM weave_apps a WHERE a.namespace_id = v_ns ORDER BY a.name;
END
