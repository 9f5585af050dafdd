-- A routine that only reads needs to know whose namespace it reads, not who asks: the credential and its
-- actor are for the audit rows and events of decisions, and a reader writes none. A function, so that a
-- reader's namespace is one declaration: DECLARE v_ns ... DEFAULT _weave_namespace_authorize(...).
CREATE FUNCTION _weave_namespace_authorize(
        in_token     VARCHAR(512),
        in_namespace VARCHAR(200),
        in_scope     VARCHAR(64))
    RETURNS BIGINT UNSIGNED
    COMMENT 'Internal. Description: authorises in_token for in_scope in in_namespace (no queues) and returns the
namespace id. Errors: those of _weave_authorize.'
    NOT DETERMINISTIC
    READS SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_allowed VARCHAR(2048);
    CALL _weave_authorize(in_token, in_namespace, in_scope, NULL, v_ns, v_cred, v_actor, v_allowed);
    RETURN v_ns;
END
