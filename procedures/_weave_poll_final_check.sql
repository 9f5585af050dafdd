-- The one place where a POLL's final signal (05-signals, F-1..F-9) meets the POLL's own rules. Both POLL
-- decision points call it, with the instance locked and the step's rows up to date in the transaction:
--   - the POLL checkpoint handler, first, before it decides anything (a deadline outcome, a new round);
--     a signal accepted for the step makes that checkpoint due at once (R-5: one row per step, due at the
--     earliest of its reasons), so this is where an accepted final signal is looked at;
--   - the round outcome consumer, right after the round record got its outcome and result time, before
--     the step is settled, sent to review or scheduled for its next round.
-- Until final signals land it decides nothing: out_outcome NULL means "no final signal decides now, go on
-- with the query's own rules". A non-NULL out_outcome means this routine settled the step (or sent it to
-- review, or saved a winner and waits for the in-flight query) and the caller must stop there.
CREATE PROCEDURE _weave_poll_final_check(
        IN  in_namespace_id  BIGINT UNSIGNED,
        IN  in_instance_id   BIGINT UNSIGNED,
        IN  in_step_key      VARCHAR(64),
        IN  in_activation_id BIGINT UNSIGNED,
        IN  in_now           DATETIME(6),
        OUT out_outcome      VARCHAR(16))
    COMMENT 'Internal. Description: applies the final-signal race of a POLL activation (its POLL_FINAL wait against the
latest round). out_outcome: NULL when nothing is decided here (the caller goes on), else the outcome the caller
reports after stopping. Currently decides nothing.
Rules: F-1..F-9 (hook), P-10.'
    MODIFIES SQL DATA
BEGIN
    SET out_outcome = NULL;
END
