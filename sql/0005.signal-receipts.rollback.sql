-- The receipt stored whole again, its signal_id first.
UPDATE weave_signals
   SET receipt = CONCAT('{"signal_id": "sig_', id, '", ', SUBSTRING(receipt, 2))
 WHERE LEFT(receipt, 14) <> '{"signal_id": ';

ALTER TABLE weave_signals
    MODIFY receipt LONGTEXT NOT NULL COMMENT 'Frozen receipt JSON returned to every replay.';
