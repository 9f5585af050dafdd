-- A signal's receipt as every answer gives it (S-5): the stored receipt (frozen in the signal's own insert, so
-- without the id the insert gives the row) with its signal_id first. The first answer and every replay compose
-- it here, so they are byte-identical.
CREATE FUNCTION _weave_signal_receipt(
        in_signal_id BIGINT UNSIGNED,
        in_stored    LONGTEXT)
    RETURNS LONGTEXT
    COMMENT 'Internal. Description: the receipt JSON of signal in_signal_id from its stored receipt in_stored (the
receipt without its leading signal_id field).
Rules: S-5.'
    DETERMINISTIC
    NO SQL
BEGIN
    RETURN CONCAT('{"signal_id": "sig_', in_signal_id, '", ', SUBSTRING(in_stored, 2));
END
