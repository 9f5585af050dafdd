-- Back to level 19: a page of rounds measures each result it may answer.
ALTER TABLE weave_poll_rounds DROP COLUMN result_bytes;
