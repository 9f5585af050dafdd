-- Weave schema, level 16: a step whose activation failed (R-18: its inputs could not resolve, its queue or app was
-- gone) keeps that activation's number. Its review reason and event always named the number; the step stayed at 0
-- when its first activation failed, so a recovery guarded by the number the operator saw was refused, and a
-- reactivation made number 1 again. The routines now write the number on the step as it goes to review; the steps
-- left in review that way by an earlier level take it here.
-- Its cost: none in writes; the update reads the open review reasons.
-- depends: 0015.credential-expiry

UPDATE weave_steps s
  JOIN weave_review_reasons r ON r.instance_id = s.instance_id AND r.step_key = s.step_key AND r.closed_at IS NULL
   AND r.code IN ('ACTIVATION_FAILED', 'QUEUE_NOT_FOUND', 'APP_NOT_FOUND') AND r.activation_seq = 1
   SET s.activation_seq = 1
 WHERE s.status = 'NEEDS_REVIEW' AND s.activation_id IS NULL AND s.activation_seq = 0;
