-- Weave schema, level 21: a signal keeps its payload's size. A page of an instance's signals ends once its payloads
-- pass 8 MiB, and to find where, it added up the sizes of every payload in its window, each read whole: up to 1,000
-- payloads of up to 256 KiB. The size is written with the signal now, and a page reads it instead. Signals accepted
-- before this level have none, and are measured as before until purged.
-- Its cost: four bytes a signal, written by the insert that writes it.
-- depends: 0020.round-result-bytes

ALTER TABLE weave_signals
    ADD COLUMN payload_bytes INT UNSIGNED NULL COMMENT 'The size of payload in bytes, written with it (NULL: a signal accepted before level 21).';
