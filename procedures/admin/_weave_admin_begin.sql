-- The opening every admin decision shares, inside the transaction its public routine has just started:
-- authenticate and authorise the token (the credential is read shared, first in the R-3 lock order), then
-- read the clock once, after that lock (R-2). The queues are those the decision acts on: a credential
-- restricted to some queues administers only those (a queue's capacity, a credential for them).
CREATE PROCEDURE _weave_admin_begin(
        IN  in_token          VARCHAR(512),
        IN  in_namespace      VARCHAR(200),
        IN  in_scope          VARCHAR(64),
        IN  in_queues         VARCHAR(4096),
        OUT out_namespace_id  BIGINT UNSIGNED,
        OUT out_credential_id BIGINT UNSIGNED,
        OUT out_actor         VARCHAR(128),
        OUT out_now           DATETIME(6),
        OUT out_allowed       VARCHAR(2048))
    COMMENT 'Internal. Description: authorises in_token for in_scope and the queues in_queues (a comma list, or * for
every queue; NULL = none) in in_namespace, then reads the engine clock; out_allowed is the credential''s own queues
(a comma list, or *), for a decision that learns its queues later (_weave_queues_check).
Errors: those of _weave_authorize.'
    READS SQL DATA
BEGIN
    CALL _weave_authorize(in_token, in_namespace, in_scope, in_queues, out_namespace_id, out_credential_id, out_actor,
                          out_allowed);
    CALL _weave_now(out_now);
END
