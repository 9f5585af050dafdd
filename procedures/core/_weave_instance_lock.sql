-- Lock order R-3 for every decision about one instance: identity -> app -> queues (by name) ->
-- instance. The identity is read shared (concurrent decisions of one credential do not queue). The app
-- and queue rows are not locked here at all: quota and capacity live in their in-flight counters, which
-- _pulse_slot_take changes with one guarded conditional UPDATE only where a task is created (R-8,
-- M-4.7), so decisions of one app do not queue behind each other on its row (a shared lock here would
-- turn that UPDATE into a lock upgrade, and two upgrades deadlock). Nor is the app's row taken shared for a
-- definition without queues: a decision waiting here for a held instance would hold it all that time, every
-- task creation of the app would queue behind it, and every start behind them (one busy instance stalled its
-- whole app). Its status is read committed, as a definition with queues reads it; an enabling that commits
-- between that read and a deferral costs that deferral its back-off (at most ten seconds).
-- The caller passes the instance's identity, which never changes once the instance exists: the
-- authorisation reads it with the instance it resolves, so it is not read twice. The orchestrator's
-- candidates use the same sequence fused into _weave_candidate_open, which skips a locked instance
-- instead of waiting (R-13).
CREATE PROCEDURE _weave_instance_lock(
        IN  in_instance_id BIGINT UNSIGNED,
        IN  in_identity_id BIGINT UNSIGNED,
        OUT out_seq        BIGINT UNSIGNED)
    COMMENT 'Internal. Description: locks the identity (shared) and the instance in R-3 order, waiting for each;
in_identity_id is the instance''s (as read with it, unlocked: it never changes); the app''s row is never locked
here. out_seq: the instance''s event_seq as locked, the latest committed (a snapshot of a caller''s REPEATABLE READ
transaction may hold an earlier one); NULL: the instance does not exist.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_dummy BIGINT UNSIGNED;
    SELECT id INTO v_dummy FROM weave_credentials WHERE id = in_identity_id LOCK IN SHARE MODE;
    SELECT event_seq INTO out_seq FROM weave_instances WHERE id = in_instance_id FOR UPDATE;
END
