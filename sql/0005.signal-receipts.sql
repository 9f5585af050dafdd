-- A signal's receipt is stored without its signal_id, which is the row's own id: the receipt is frozen in the
-- insert of its signal, instead of an update of the row just inserted. Every answer composes the receipt the same
-- way (_weave_signal_receipt), so replays stay byte-identical (S-5). Receipts stored before lose their leading
-- signal_id field, byte for byte.
-- depends: 0001.schema

UPDATE weave_signals
   SET receipt = CONCAT('{', SUBSTRING(receipt, CHAR_LENGTH(CONCAT('{"signal_id": "sig_', id, '", ')) + 1))
 WHERE LEFT(receipt, CHAR_LENGTH(CONCAT('{"signal_id": "sig_', id, '", '))) = CONCAT('{"signal_id": "sig_', id, '", ');

ALTER TABLE weave_signals
    MODIFY receipt LONGTEXT NOT NULL COMMENT 'Frozen receipt JSON returned to every replay, without its leading signal_id (the row''s own id): _weave_signal_receipt composes it.';
