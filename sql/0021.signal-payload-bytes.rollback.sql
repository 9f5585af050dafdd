-- Back to level 20: a page of signals measures each payload it may answer.
ALTER TABLE weave_signals DROP COLUMN payload_bytes;
