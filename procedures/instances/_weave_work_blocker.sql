-- R-8's conditions for new work that can clear by themselves, in one place for every decision that
-- creates work (the ROOT walk activating steps, a POLL starting its next round): what stands in the way,
-- as the deferral's 'CODE: detail', or NULL when nothing does. A function without SQL, so that asking
-- costs no statement; the caller has read the four states in its decision: the instance's and the identity's under
-- their locks, the app's as committed (no decision locks the app's row: _weave_instance_lock).
CREATE FUNCTION _weave_work_blocker(
        in_instance BIGINT UNSIGNED,
        in_status   VARCHAR(16),
        in_control  VARCHAR(16),
        in_gate     VARCHAR(16),
        in_identity VARCHAR(16),
        in_app      VARCHAR(16))
    RETURNS VARCHAR(64)
    COMMENT 'Internal. Description: why new work must wait (R-8): PAUSED (control), GATE_CLOSED (the instance is not
RUNNING or its gate is closed, or a cancel of in_instance decides its facts in this session), IDENTITY_DISABLED (the
starting identity), APP_DISABLED, in that order; NULL when nothing stands in the way. The instance deadline is the
caller''s: passed, it is a review, not a deferral.
Rules: R-8, R-18.'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN CASE
        WHEN in_control = 'PAUSED' THEN 'PAUSED: instance paused'
        WHEN in_status <> 'RUNNING' OR in_gate <> 'OPEN' THEN 'GATE_CLOSED: gate closed'
        -- A cancel deciding the instance's facts due before it starts no new work (weave_instance_cancel).
        WHEN @weave_facts_only <=> in_instance THEN 'GATE_CLOSED: a cancel decides the facts due before it'
        WHEN in_identity <> 'ACTIVE' THEN 'IDENTITY_DISABLED: starting identity disabled'
        WHEN in_app <> 'ACTIVE' THEN 'APP_DISABLED: app disabled'
    END;
END
