"""What usually helps with each review reason: one vocabulary for every place that shows an open reason."""

from __future__ import annotations

# The reasons of an instance itself (naming no step) that retry closes (weave_instance_retry, which says them in its
# own SQL); INSTANCE_DEADLINE, the other reason of an instance, is closed by deadline. Retry also sends on a step in
# review for CANDIDATE_FAILING alone, where it can go on. The console offers retry while such a reason is open, and
# invariant M-4.24 holds every reason of an instance to one of its actions.
RETRY_CLOSES = ("CANDIDATE_FAILING", "OWNERSHIP_MISMATCH")

# What usually helps, per review reason code: the operations guide's table ("What each reason means and what usually
# helps"), in the few words a page or a terminal line has room for; the console and `weave workflows show` give it
# beside each open reason. tests/console/test_console_http.py holds the guide and this to the same codes.
REVIEW_HELP = {
    "INSTANCE_DEADLINE": "New work was needed after the instance deadline: extend the deadline (the instance goes on "
                         "by itself), or cancel. When the detail names what it was deferred for (room, a disabled "
                         "app or identity), clear that too, or it waits on.",
    "TIMER_TRUNCATED": "The deadline cut the timer short: extend the deadline (it has passed), then reactivate the "
                       "step (the full delay again, from now), or resolve it to accept the shorter wait.",
    "TASK_FAILED": "The handler failed for good (see last_error): fix the cause, then reactivate (a new task with "
                   "fresh attempts, the same handler version), or resolve with the output. HTTP_EFFECT_UNKNOWN: "
                   "check the remote system first.",
    "TASK_UNKNOWN": "The worker's lease ran out, so the effect is unknown: check the external system; if it happened, "
                    "resolve with its result, if not, reactivate. A late report, if one came, is shown with the "
                    "step's task (weave workflows explain, the console's instance page).",
    "TASK_EXPIRED": "No attempt started before the task's deadline (no worker for its queue, workers busy, or its "
                    "mutex key held; see why): start workers or free the key, then reactivate.",
    "POLL_FAILED": "A round's task failed, or expired before a worker took it (see kind and why): fix the handler, "
                   "the remote side or the workers, then reactivate, or resolve.",
    "POLL_UNKNOWN": "A round's effect is unknown (its lease ran out): check the remote side, then reactivate, or "
                    "resolve.",
    "POLL_INVALID_RESULT": "A round answered no valid result object (see invalid_because): fix the handler, then "
                           "reactivate, or resolve.",
    "POLL_REVIEW_VALUE": "The remote system answered a review status: decide, then resolve with the result, or "
                         "reactivate to ask again.",
    "POLL_ROUNDS_EXHAUSTED": "Still pending when the rounds ran out: continue with extra rounds (and a later poll "
                             "deadline once that has passed too), or reactivate, or resolve.",
    "POLL_DEADLINE": "Still pending at the poll deadline: continue with a later poll deadline, or reactivate, or "
                     "resolve. When the detail names a deferral, the next round waited for what its reason says "
                     "(room, a disabled app) and never ran: clear that first.",
    "POLL_DEADLINE_IN_FLIGHT": "The poll deadline came while a round ran: wait until its task settles, then continue, "
                               "reactivate or resolve.",
    "FINAL_RESULT_CONFLICT": "The poll's answer and its final signal disagree: find out which is true, and resolve "
                             "with it.",
    "SIGNAL_TIMEOUT": "No matching signal came before the deadline: the step's signals say why each did not win; then "
                      "reactivate (senders target the new activation) or resolve with the payload.",
    "ACCEPTANCE_PROOF_MISMATCH": "A stored signal no longer matches its acceptance's audit row: treat it as a "
                                 "security incident, then resolve or reactivate.",
    "OWNERSHIP_MISMATCH": "Rows that should point at each other do not (corruption, a bad restore, manual edits), so "
                          "the task's outcome was set aside: investigate and repair the rows, then retry the "
                          "instance (the outcome is verified again, applied only if it now holds), or cancel.",
    "ACTIVATION_FAILED": "The step's inputs could not be made from what is frozen (see detail): reactivating fails the "
                         "same way, so resolve the step, or cancel and start again with a corrected input.",
    "QUEUE_NOT_FOUND": "The queue the definition names is gone: create it again, then reactivate, or resolve.",
    "APP_NOT_FOUND": "The app the instance runs under is gone: create it again, then reactivate, or resolve.",
    "CANDIDATE_FAILING": "A decision failed three times in a row with the same error (see detail): fix what the error "
                         "names, then retry the instance: a step goes on where it stopped, keeping its due time, "
                         "deadline, signals, rounds and task outcome. Or reactivate or resolve the step.",
}
