-- Weave schema, level 20: a round keeps its result's size. A page of rounds ends once its results pass 8 MiB, and to
-- find where, it added up the sizes of every result in its window: each read whole from its pages, up to 1,000
-- results of up to 1 MiB each, about a gigabyte read to answer 8 MiB. The size is written with the result now, and a
-- page reads it instead. Rounds that ended before this level have none, and are measured as before until purged.
-- Its cost: four bytes a round, written in the statement that writes the result.
-- depends: 0019.credential-expiry-index

ALTER TABLE weave_poll_rounds
    ADD COLUMN result_bytes INT UNSIGNED NULL COMMENT 'The size of result in bytes, written with it (NULL: no result, or a round that ended before level 20).';
