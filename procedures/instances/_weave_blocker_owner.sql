-- What a deferral for a disabled identity or app waits for (R-8): that identity or app, whose enabling makes the
-- deferral due at once (_weave_credential_status_put, _weave_provision_put). A function without SQL, beside
-- _weave_work_blocker, whose answer it reads.
CREATE FUNCTION _weave_blocker_owner(
        in_why      VARCHAR(256),
        in_identity BIGINT UNSIGNED,
        in_app      BIGINT UNSIGNED)
    RETURNS BIGINT UNSIGNED
    COMMENT 'Internal. Description: for the reason _weave_work_blocker answered (in_why), the identity (IDENTITY_DISABLED)
or app (APP_DISABLED) the deferral waits for, of in_identity and in_app; NULL for any other reason.
Rules: R-8, R-18.'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN CASE
        WHEN in_why LIKE 'IDENTITY\_DISABLED:%' THEN in_identity
        WHEN in_why LIKE 'APP\_DISABLED:%' THEN in_app
    END;
END
