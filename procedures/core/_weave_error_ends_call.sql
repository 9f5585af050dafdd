-- What a decision run behind a savepoint cannot undo alone (Settle at Send, Settle at Report, a cancel's facts): a
-- deadlock has rolled the whole transaction back already, and an interrupt (KILL QUERY, max_statement_time, a read
-- one emptied, 50016) caught and passed over would let the caller go on to a COMMIT the server skips without a word,
-- with the kill still pending. Any other error is the guarded decision's own: rolled back to the savepoint, it is
-- left for the candidate path, which retries and books it.
CREATE FUNCTION _weave_error_ends_call(in_errno INT)
    RETURNS BOOLEAN
    COMMENT 'Internal. Description: TRUE for the errors that end the whole call rather than a guarded decision alone:
1213 (deadlock), 1317 (query interrupted), 1969 (statement time exceeded), 50016 (INTERRUPTED).'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN in_errno IN (1213, 1317, 1969, 50016);
END
