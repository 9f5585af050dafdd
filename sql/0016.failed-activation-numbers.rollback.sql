-- Back to level 15: nothing to undo. Level 15 reads a failed activation's number on the step as it reads any other:
-- a recovery guarded by it is taken, and a reactivation is the next number.
SELECT 1;
