-- Weave schema, level 1: every table of the engine and of Pulse.
-- Tables and indexes only: no foreign keys and no cascades (spec M-1). Every cross-row reference
-- is verified by the routine that relies on it. Routines live in procedures/, not here.
-- depends:

CREATE TABLE weave_install (
    id TINYINT UNSIGNED NOT NULL COMMENT 'Always 1: this table holds a single row.',
    clock_mode VARCHAR(16) NOT NULL COMMENT 'PRODUCTION, or TEST when installed with --test-clock (R-2).',
    clock_offset_us BIGINT NOT NULL DEFAULT 0 COMMENT 'Test clock offset in microseconds added to the server clock; only grows.',
    installed_at DATETIME(6) NOT NULL COMMENT 'When this database was first installed (server UTC).',
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Install-wide settings: clock mode and test clock offset.';

CREATE TABLE weave_routines (
    name VARCHAR(64) NOT NULL COMMENT 'Routine name as installed in information_schema.ROUTINES.',
    kind VARCHAR(16) NOT NULL COMMENT 'PROCEDURE or FUNCTION.',
    digest CHAR(64) NOT NULL COMMENT 'SHA-256 of the routine file that was installed.',
    installed_at DATETIME(6) NOT NULL COMMENT 'When this version of the routine was installed.',
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Routines installed by weave migrate with their digests (R-15, R-16).';

CREATE TABLE weave_namespaces (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal namespace id.',
    name VARCHAR(64) NOT NULL COMMENT 'Namespace name used in API paths.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the namespace was created.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_namespace_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Namespaces: the isolation boundary of every other row.';

CREATE TABLE weave_credentials (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal credential id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace the credential belongs to.',
    actor VARCHAR(128) NOT NULL COMMENT 'Actor name recorded in audit rows for this credential.',
    token_hash CHAR(64) NOT NULL COMMENT 'SHA-256 hex of the bearer token; the token itself is never stored.',
    scopes VARCHAR(512) NOT NULL COMMENT 'Comma-separated scopes, e.g. workflows:read,workflows:signal.',
    queues VARCHAR(2048) NOT NULL COMMENT 'Comma-separated queue names the credential may use, or * for all.',
    status VARCHAR(16) NOT NULL COMMENT 'ACTIVE or DISABLED.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the credential was created.',
    disabled_at DATETIME(6) NULL COMMENT 'When the credential was disabled, if it was.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_credential_token (token_hash),
    KEY ix_credential_namespace (namespace_id, actor)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Identities: hashed bearer tokens with scopes and allowed queues.';

CREATE TABLE weave_apps (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal app id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace the app belongs to.',
    name VARCHAR(64) NOT NULL COMMENT 'App name, unique in its namespace.',
    max_in_flight INT UNSIGNED NOT NULL COMMENT 'Quota: most QUEUED+RUNNING tasks the app may have at once.',
    status VARCHAR(16) NOT NULL COMMENT 'ACTIVE or DISABLED; a disabled app starts no new work.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the app was created.',
    updated_at DATETIME(6) NOT NULL COMMENT 'When quota or status last changed.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_app_name (namespace_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Applications: the owner of instances, with an in-flight task quota.';

CREATE TABLE weave_queues (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal queue id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace the queue belongs to.',
    name VARCHAR(64) NOT NULL COMMENT 'Queue name, unique in its namespace.',
    capacity INT UNSIGNED NOT NULL COMMENT 'Most QUEUED+RUNNING tasks the queue may hold at once.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the queue was created.',
    updated_at DATETIME(6) NOT NULL COMMENT 'When the capacity last changed.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_queue_name (namespace_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Task queues with a capacity, ordered by priority then time.';

CREATE TABLE weave_definitions (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal definition version id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace the definition belongs to.',
    name VARCHAR(128) NOT NULL COMMENT 'Definition name.',
    version INT UNSIGNED NOT NULL COMMENT 'Version number, 1, 2, ... assigned on publish.',
    document LONGTEXT NOT NULL COMMENT 'Canonical JSON of the definition; immutable once published.',
    compiled LONGTEXT NOT NULL COMMENT 'Compiled expression templates per step (skeleton + JSON path bindings).',
    digest CHAR(64) NOT NULL COMMENT 'SHA-256 hex of the canonical document.',
    queues VARCHAR(2048) NOT NULL COMMENT 'Comma-separated queues used by the definition, for permission checks.',
    created_by BIGINT UNSIGNED NOT NULL COMMENT 'Credential that published this version.',
    created_at DATETIME(6) NOT NULL COMMENT 'When this version was published.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_definition_version (namespace_id, name, version),
    CONSTRAINT ck_definition_document CHECK (JSON_VALID(document)),
    CONSTRAINT ck_definition_compiled CHECK (JSON_VALID(compiled))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Published, immutable, numbered definition versions.';

CREATE TABLE weave_definition_steps (
    definition_id BIGINT UNSIGNED NOT NULL COMMENT 'Definition version this step belongs to.',
    step_key VARCHAR(64) NOT NULL COMMENT 'Step key, unique in the definition.',
    position SMALLINT UNSIGNED NOT NULL COMMENT 'Zero-based position of the step in the document.',
    type VARCHAR(16) NOT NULL COMMENT 'TIMER, POLL, SIGNAL or TASK.',
    after_count SMALLINT UNSIGNED NOT NULL COMMENT 'How many steps must succeed before this one activates.',
    spec LONGTEXT NOT NULL COMMENT 'The normalised step document.',
    PRIMARY KEY (definition_id, step_key),
    CONSTRAINT ck_definition_step_spec CHECK (JSON_VALID(spec))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Steps of a definition version, expanded for the graph walk.';

CREATE TABLE weave_definition_edges (
    definition_id BIGINT UNSIGNED NOT NULL COMMENT 'Definition version of the edge.',
    step_key VARCHAR(64) NOT NULL COMMENT 'The step that waits.',
    after_key VARCHAR(64) NOT NULL COMMENT 'A step that must be SUCCEEDED first.',
    PRIMARY KEY (definition_id, step_key, after_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='The after-graph of a definition version: one row per dependency.';

CREATE TABLE weave_instances (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal instance id; the public id is wf_<id>.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    app_id BIGINT UNSIGNED NOT NULL COMMENT 'App that owns the instance and pays its task quota.',
    definition_id BIGINT UNSIGNED NOT NULL COMMENT 'Pinned definition version id.',
    definition_name VARCHAR(128) NOT NULL COMMENT 'Pinned definition name (denormalised for listing).',
    definition_version INT UNSIGNED NOT NULL COMMENT 'Pinned definition version number.',
    input LONGTEXT NOT NULL COMMENT 'Instance input JSON exactly as started.',
    status VARCHAR(16) NOT NULL COMMENT 'RUNNING, SUCCEEDED, NEEDS_REVIEW, CANCELLING or CANCELLED.',
    control VARCHAR(16) NOT NULL COMMENT 'ACTIVE or PAUSED.',
    gate VARCHAR(16) NOT NULL COMMENT 'New-execution gate: OPEN or CLOSED.',
    deadline_at DATETIME(6) NOT NULL COMMENT 'Instance deadline in force; no new work starts at or after it.',
    credential_id BIGINT UNSIGNED NOT NULL COMMENT 'Starting identity; new work needs it ACTIVE (R-8).',
    business_key VARCHAR(256) NULL COMMENT 'Optional business key given at start.',
    idempotency_key VARCHAR(128) NOT NULL COMMENT 'Start idempotency key, unique per namespace.',
    request_digest CHAR(64) NOT NULL COMMENT 'SHA-256 of the start request, to tell a replay from a conflict.',
    version BIGINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'Grows on every change of the instance row.',
    event_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Last event sequence number written for the instance.',
    signal_count INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Stored signals of the instance (at most 1024, S-6).',
    created_at DATETIME(6) NOT NULL COMMENT 'When the instance was started.',
    updated_at DATETIME(6) NOT NULL COMMENT 'When the instance row last changed.',
    finished_at DATETIME(6) NULL COMMENT 'When the instance reached SUCCEEDED or CANCELLED.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_instance_idempotency (namespace_id, idempotency_key),
    KEY ix_instance_namespace (namespace_id, id),
    KEY ix_instance_status (namespace_id, status, id),
    KEY ix_instance_definition (namespace_id, definition_name, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Workflow instances with status, control, gate and deadline.';

CREATE TABLE weave_steps (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal step id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance the step belongs to.',
    step_key VARCHAR(64) NOT NULL COMMENT 'Step key from the definition.',
    position SMALLINT UNSIGNED NOT NULL COMMENT 'Position of the step in the definition, for stable ordering.',
    type VARCHAR(16) NOT NULL COMMENT 'TIMER, POLL, SIGNAL or TASK.',
    status VARCHAR(16) NOT NULL COMMENT 'PENDING, ACTIVE, SUCCEEDED, NEEDS_REVIEW or CANCELLED.',
    activation_seq INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Current activation sequence; 0 until first activated.',
    activation_id BIGINT UNSIGNED NULL COMMENT 'Current activation row id, when activated.',
    output LONGTEXT NULL COMMENT 'Step output JSON once SUCCEEDED.',
    activation_override LONGTEXT NULL COMMENT 'Operator overrides (e.g. timeout_ms) for the next activation, from reactivate.',
    updated_at DATETIME(6) NOT NULL COMMENT 'When the step row last changed.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_step_key (instance_id, step_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Steps of an instance with their current activation and output.';

CREATE TABLE weave_activations (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal activation id; clock checkpoints pin it.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance of the step.',
    step_id BIGINT UNSIGNED NOT NULL COMMENT 'Step this activation belongs to.',
    step_key VARCHAR(64) NOT NULL COMMENT 'Step key (denormalised).',
    seq INT UNSIGNED NOT NULL COMMENT 'Activation sequence 1, 2, ... of the step.',
    frozen LONGTEXT NOT NULL COMMENT 'Resolved inputs frozen at activation: input, keys, handler, contract, priority, retry.',
    correlation_key VARBINARY(512) NULL COMMENT 'Frozen correlation bytes for signal waits, compared byte-exact.',
    started_at DATETIME(6) NOT NULL COMMENT 'When the activation began.',
    deadline_at DATETIME(6) NOT NULL COMMENT 'Instance deadline in force at activation.',
    ended_at DATETIME(6) NULL COMMENT 'When the activation settled or was superseded.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_activation_seq (step_id, seq),
    KEY ix_activation_instance (instance_id, step_key, seq),
    CONSTRAINT ck_activation_frozen CHECK (JSON_VALID(frozen))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='One generation of a step with its frozen inputs.';

CREATE TABLE weave_waits (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal wait id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance of the wait.',
    activation_id BIGINT UNSIGNED NOT NULL COMMENT 'Activation that owns the wait.',
    step_key VARCHAR(64) NOT NULL COMMENT 'Step key (denormalised).',
    activation_seq INT UNSIGNED NOT NULL COMMENT 'Activation sequence (denormalised).',
    kind VARCHAR(16) NOT NULL COMMENT 'TIMER, SIGNAL or POLL_FINAL.',
    status VARCHAR(16) NOT NULL COMMENT 'WAITING, SATISFIED, EXPIRED or CANCELLED.',
    started_at DATETIME(6) NOT NULL COMMENT 'When the wait began (activation start).',
    due_at DATETIME(6) NULL COMMENT 'TIMER: min(started_at + delay, instance deadline) (T-1).',
    planned_due_at DATETIME(6) NULL COMMENT 'TIMER: started_at + delay, before the instance deadline cap.',
    deadline_at DATETIME(6) NULL COMMENT 'SIGNAL / POLL_FINAL: signals accepted at or after it are late.',
    signal_name VARCHAR(128) NULL COMMENT 'Pinned signal name.',
    payload_version VARCHAR(32) NULL COMMENT 'Pinned payload version.',
    payload_type VARCHAR(16) NULL COMMENT 'Pinned payload type (object, array, string, number, boolean, null, any).',
    correlation_key VARBINARY(512) NULL COMMENT 'Pinned correlation bytes.',
    winner_signal_id BIGINT UNSIGNED NULL COMMENT 'The signal that satisfied the wait, if any.',
    settled_at DATETIME(6) NULL COMMENT 'When the wait left WAITING.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_wait_activation (activation_id, kind),
    KEY ix_wait_instance (instance_id, step_key),
    KEY ix_wait_settled (kind, settled_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Durable waits: timers, signal waits and final-signal waits.';

CREATE TABLE weave_poll_states (
    activation_id BIGINT UNSIGNED NOT NULL COMMENT 'The POLL activation this state belongs to.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance of the poll.',
    step_key VARCHAR(64) NOT NULL COMMENT 'Step key (denormalised).',
    state VARCHAR(16) NOT NULL COMMENT 'IN_FLIGHT, WAITING (between rounds), SETTLED or STOPPED.',
    rounds_used INT UNSIGNED NOT NULL COMMENT 'Rounds created so far.',
    max_rounds INT UNSIGNED NOT NULL COMMENT 'Round budget, grown only by continue.',
    interval_ms BIGINT UNSIGNED NOT NULL COMMENT 'Fixed interval between a PENDING result and the next round.',
    poll_deadline DATETIME(6) NOT NULL COMMENT 'min(started_at + timeout_ms, instance deadline); moved only by continue.',
    current_task_id BIGINT UNSIGNED NULL COMMENT 'Task of the round in flight, if any; kept past a deadline review until its outcome is in (P-11).',
    next_poll_at DATETIME(6) NULL COMMENT 'When the next round may start: result time + interval, capped by the deadline.',
    last_outcome VARCHAR(24) NULL COMMENT 'Outcome of the latest settled round.',
    stop_reason VARCHAR(32) NULL COMMENT 'While STOPPED: the review code that stopped the poll (e.g. POLL_DEADLINE); continue reads it.',
    updated_at DATETIME(6) NOT NULL COMMENT 'When the state last changed.',
    PRIMARY KEY (activation_id),
    KEY ix_poll_instance (instance_id),
    KEY ix_poll_state (state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Budgets and schedule of a POLL activation.';

CREATE TABLE weave_poll_rounds (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal round id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance of the poll.',
    activation_id BIGINT UNSIGNED NOT NULL COMMENT 'POLL activation of the round.',
    round_no INT UNSIGNED NOT NULL COMMENT 'Round number 1..n without gaps.',
    task_id BIGINT UNSIGNED NOT NULL COMMENT 'The Pulse task that runs this round.',
    outcome VARCHAR(24) NOT NULL COMMENT 'IN_FLIGHT, POLL_PENDING, DONE, REVIEW_VALUE, INVALID, FAILED, UNKNOWN or CANCELLED.',
    result LONGTEXT NULL COMMENT 'The result object (or failure facts) of the round.',
    result_at DATETIME(6) NULL COMMENT 'The outcome''s own time, from Pulse.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the round was created.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_round_no (activation_id, round_no),
    KEY ix_round_task (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Business rounds of a POLL: one task each.';

CREATE TABLE weave_pending_advances (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal checkpoint id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance to look at again.',
    step_key VARCHAR(64) NOT NULL COMMENT 'Step to look at; the empty string for ROOT, never NULL.',
    kind VARCHAR(8) NOT NULL COMMENT 'ROOT, TIMER, SIGNAL or POLL.',
    activation_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Pinned activation for clock kinds; 0 for ROOT.',
    due_at DATETIME(6) NOT NULL COMMENT 'When the checkpoint is due; never changed by a failure or deferral.',
    available_at DATETIME(6) NOT NULL COMMENT 'Next check time (>= due_at): backoff and deferrals move only this.',
    attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Failed advance attempts so far.',
    last_error VARCHAR(1024) NULL COMMENT 'Last failure message, for operators.',
    version BIGINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'Grows on every change; failure bookkeeping is conditional on it.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the checkpoint row was created.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_checkpoint (instance_id, step_key),
    KEY ix_checkpoint_available (available_at, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Checkpoints: look at this instance or step again at a time (R-5).';

CREATE TABLE weave_review_reasons (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal review reason id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance in review.',
    code VARCHAR(32) NOT NULL COMMENT 'Reason code from the closed list of M-3.',
    step_key VARCHAR(64) NOT NULL DEFAULT '' COMMENT 'Step of the reason; empty for instance-level reasons.',
    activation_seq INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Activation of the reason; 0 for instance-level reasons.',
    detail LONGTEXT NOT NULL COMMENT 'JSON facts behind the reason.',
    opened_at DATETIME(6) NOT NULL COMMENT 'When the reason was opened.',
    closed_at DATETIME(6) NULL COMMENT 'When a recovery action closed it.',
    closed_by VARCHAR(32) NULL COMMENT 'The action that closed it (reactivate, continue, resolve, deadline).',
    PRIMARY KEY (id),
    KEY ix_review_instance (instance_id, closed_at),
    KEY ix_review_open (closed_at, instance_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Why an instance needs a person; open while closed_at is NULL.';

CREATE TABLE weave_events (
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance of the event.',
    seq BIGINT UNSIGNED NOT NULL COMMENT 'Gap-free sequence number per instance, from 1.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    type VARCHAR(48) NOT NULL COMMENT 'Event type, e.g. INSTANCE_STARTED, TIMER_SETTLED.',
    step_key VARCHAR(64) NOT NULL DEFAULT '' COMMENT 'Step of the event, empty for instance events.',
    activation_seq INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Activation of the event, 0 when none.',
    occurred_at DATETIME(6) NOT NULL COMMENT 'Database time of the change.',
    data LONGTEXT NOT NULL COMMENT 'JSON facts of the event.',
    PRIMARY KEY (instance_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Event history: one row per state change, written in its transaction.';

CREATE TABLE weave_audit (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal audit id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the action.',
    instance_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Instance acted on; 0 for namespace-level actions.',
    credential_id BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Credential that acted; 0 for the engine itself.',
    actor VARCHAR(128) NOT NULL COMMENT 'Actor name, or weave.orchestrator for engine decisions.',
    action VARCHAR(48) NOT NULL COMMENT 'What was done, e.g. instance.start, signal.accept, timer.settle.',
    idempotency_key VARCHAR(128) NULL COMMENT 'Idempotency key of the request, when it had one.',
    request_digest CHAR(64) NULL COMMENT 'SHA-256 of the request content, when there was one.',
    accepted_at DATETIME(6) NOT NULL COMMENT 'Database time the action was accepted.',
    deadline_at DATETIME(6) NULL COMMENT 'Deadline in force for the action, when relevant.',
    reason VARCHAR(1024) NULL COMMENT 'Operator reason, for control and recovery actions.',
    details LONGTEXT NOT NULL COMMENT 'JSON details of the action.',
    response LONGTEXT NULL COMMENT 'Frozen answer for idempotent replays of control actions.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the audit row was written.',
    PRIMARY KEY (id),
    KEY ix_audit_instance (instance_id, action, idempotency_key),
    KEY ix_audit_namespace (namespace_id, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Audit trail: who did what, when, under which deadline (R-4).';

CREATE TABLE weave_signals (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal signal id; grows with acceptance order (S-11 tie-break); public id sig_<id>.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the instance.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Target instance.',
    idempotency_key VARCHAR(128) NOT NULL COMMENT 'Sender idempotency key, unique per instance.',
    request_digest CHAR(64) NOT NULL COMMENT 'SHA-256 over the request fields as specified in S-4.',
    name VARCHAR(128) NOT NULL COMMENT 'Signal name.',
    payload_version VARCHAR(32) NOT NULL COMMENT 'Payload version.',
    target_step_key VARCHAR(64) NOT NULL COMMENT 'Target step key.',
    target_activation_seq INT UNSIGNED NOT NULL COMMENT 'Target activation sequence.',
    correlation_key VARBINARY(512) NOT NULL COMMENT 'Correlation bytes exactly as sent.',
    payload LONGBLOB NOT NULL COMMENT 'Payload JSON bytes exactly as received.',
    reason VARCHAR(1024) NOT NULL COMMENT 'Sender reason.',
    evidence_ref VARCHAR(512) NULL COMMENT 'Optional evidence reference; never dereferenced.',
    credential_id BIGINT UNSIGNED NOT NULL COMMENT 'Credential that sent the signal.',
    actor VARCHAR(128) NOT NULL COMMENT 'Actor of that credential.',
    status VARCHAR(16) NOT NULL COMMENT 'PENDING, CONSUMED, REJECTED or EXPIRED.',
    disposition VARCHAR(32) NULL COMMENT 'Disposition reason for REJECTED/EXPIRED signals (M-3).',
    accepted_at DATETIME(6) NOT NULL COMMENT 'Database time of first acceptance.',
    expires_at DATETIME(6) NOT NULL COMMENT 'When an unmatched signal expires (instance deadline at acceptance).',
    available_at DATETIME(6) NOT NULL COMMENT 'Next check time for a PENDING signal; backoff moves only this.',
    consumed_at DATETIME(6) NULL COMMENT 'When the signal got its final status.',
    receipt LONGTEXT NOT NULL COMMENT 'Frozen receipt JSON returned to every replay.',
    attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Failed processing attempts.',
    last_error VARCHAR(1024) NULL COMMENT 'Last processing failure.',
    version BIGINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'Grows on every change.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_signal_idempotency (namespace_id, instance_id, idempotency_key),
    KEY ix_signal_pending (status, available_at, version),
    KEY ix_signal_target (instance_id, target_step_key, target_activation_seq, status, accepted_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='External signals with their frozen receipts and dispositions.';

CREATE TABLE pulse_tasks (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal task id; public id tsk_<id>.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the task.',
    app_id BIGINT UNSIGNED NOT NULL COMMENT 'App whose quota the task uses.',
    queue_id BIGINT UNSIGNED NOT NULL COMMENT 'Queue the task waits in.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance the task serves.',
    step_key VARCHAR(64) NOT NULL COMMENT 'Step the task serves.',
    activation_id BIGINT UNSIGNED NOT NULL COMMENT 'Activation the task serves.',
    round_no INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'POLL round the task runs; 0 for a TASK step.',
    handler VARCHAR(128) NOT NULL COMMENT 'Handler name.',
    handler_version VARCHAR(32) NOT NULL COMMENT 'Handler version.',
    input LONGTEXT NOT NULL COMMENT 'Frozen input JSON handed to the handler.',
    priority INT NOT NULL COMMENT 'Higher runs first.',
    business_key VARCHAR(256) NULL COMMENT 'Frozen business key.',
    mutex_key VARCHAR(256) NULL COMMENT 'Frozen mutex key: two attempts with the same key never run at once.',
    max_attempts INT UNSIGNED NOT NULL COMMENT 'Frozen retry policy: attempt budget.',
    initial_backoff_ms BIGINT UNSIGNED NOT NULL COMMENT 'Frozen retry policy: first backoff.',
    backoff_coefficient DOUBLE NOT NULL COMMENT 'Frozen retry policy: growth factor.',
    max_backoff_ms BIGINT UNSIGNED NOT NULL COMMENT 'Frozen retry policy: backoff cap.',
    timeout_ms BIGINT UNSIGNED NOT NULL COMMENT 'Lease length per attempt hint, from task_timeout_ms.',
    deadline_at DATETIME(6) NOT NULL COMMENT 'No attempt starts at or after it (K-6).',
    status VARCHAR(16) NOT NULL COMMENT 'QUEUED, RUNNING, SUCCEEDED, FAILED, UNKNOWN, CANCELLED or EXPIRED.',
    attempts_used INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Attempts started so far.',
    cancel_requested TINYINT NOT NULL DEFAULT 0 COMMENT '1 when cancellation was requested while RUNNING.',
    available_at DATETIME(6) NOT NULL COMMENT 'Earliest time the next attempt may start.',
    result LONGTEXT NULL COMMENT 'Handler result JSON of the successful attempt.',
    error VARCHAR(2048) NULL COMMENT 'Last failure of the task.',
    created_at DATETIME(6) NOT NULL COMMENT 'When the task was created.',
    updated_at DATETIME(6) NOT NULL COMMENT 'When the task row last changed.',
    finished_at DATETIME(6) NULL COMMENT 'When the task reached a final status.',
    PRIMARY KEY (id),
    KEY ix_task_claim (queue_id, status, priority DESC, available_at, id),
    KEY ix_task_deadline (status, deadline_at),
    KEY ix_task_app (app_id, status),
    KEY ix_task_instance (instance_id, status),
    KEY ix_task_activation (activation_id, round_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Pulse tasks: queued units of work with a frozen retry policy.';

CREATE TABLE pulse_attempts (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal attempt id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the task.',
    task_id BIGINT UNSIGNED NOT NULL COMMENT 'Task of the attempt.',
    attempt_no INT UNSIGNED NOT NULL COMMENT 'Attempt number 1..max_attempts without gaps.',
    worker_id VARCHAR(128) NOT NULL COMMENT 'Worker that claimed the attempt.',
    status VARCHAR(16) NOT NULL COMMENT 'RUNNING, then SUCCEEDED, FAILED (the task may be queued again) or UNKNOWN.',
    lease_expires_at DATETIME(6) NOT NULL COMMENT 'Lease end; extended by heartbeats (K-2).',
    started_at DATETIME(6) NOT NULL COMMENT 'When the attempt was claimed.',
    ended_at DATETIME(6) NULL COMMENT 'When its end was recorded.',
    error VARCHAR(2048) NULL COMMENT 'Failure reported by the worker, or LEASE_LOST.',
    PRIMARY KEY (id),
    UNIQUE KEY uq_attempt_no (task_id, attempt_no),
    KEY ix_attempt_lease (status, lease_expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Attempts of a task, each with a lease.';

CREATE TABLE pulse_permits (
    attempt_id BIGINT UNSIGNED NOT NULL COMMENT 'The attempt holding the permit.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the task.',
    queue_id BIGINT UNSIGNED NOT NULL COMMENT 'Queue of the task.',
    task_id BIGINT UNSIGNED NOT NULL COMMENT 'Task of the attempt.',
    mutex_key VARCHAR(256) NULL COMMENT 'Mutex key of the task, kept after release for history.',
    mutex_held VARCHAR(256) NULL COMMENT 'The mutex key while the permit is held, NULL once released: unique per namespace.',
    taken_at DATETIME(6) NOT NULL COMMENT 'When the attempt started.',
    released_at DATETIME(6) NULL COMMENT 'When Pulse recorded the attempt''s end; NULL while held.',
    PRIMARY KEY (attempt_id),
    KEY ix_permit_mutex (namespace_id, mutex_key, released_at),
    UNIQUE KEY uq_permit_mutex_held (namespace_id, mutex_held)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Execution permits: held exactly while an attempt is RUNNING.';

CREATE TABLE pulse_late_reports (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the task.',
    task_id BIGINT UNSIGNED NOT NULL COMMENT 'Task the report was about.',
    attempt_id BIGINT UNSIGNED NOT NULL COMMENT 'Attempt the report named.',
    worker_id VARCHAR(128) NOT NULL COMMENT 'Worker that reported.',
    kind VARCHAR(16) NOT NULL COMMENT 'What was reported: SUCCEEDED or FAILED.',
    body LONGTEXT NULL COMMENT 'Result or error as reported.',
    reported_at DATETIME(6) NOT NULL COMMENT 'When the report arrived.',
    PRIMARY KEY (id),
    KEY ix_late_task (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Reports for attempts that were no longer current: stored, without effect (K-3).';

CREATE TABLE pulse_inbox (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT COMMENT 'Internal inbox event id.',
    namespace_id BIGINT UNSIGNED NOT NULL COMMENT 'Namespace of the task.',
    task_id BIGINT UNSIGNED NOT NULL COMMENT 'Task whose outcome this is.',
    instance_id BIGINT UNSIGNED NOT NULL COMMENT 'Instance the task serves.',
    kind VARCHAR(16) NOT NULL COMMENT 'SUCCEEDED, FAILED, UNKNOWN, CANCELLED or EXPIRED.',
    result LONGTEXT NULL COMMENT 'Handler result or failure facts.',
    occurred_at DATETIME(6) NOT NULL COMMENT 'The outcome''s own time.',
    state VARCHAR(16) NOT NULL COMMENT 'PENDING until consumed, then CONSUMED, STALE (owner moved on) or MISMATCH (ownership did not verify).',
    consumed_at DATETIME(6) NULL COMMENT 'When the orchestrator consumed it.',
    available_at DATETIME(6) NOT NULL COMMENT 'Next consumption try; backoff moves only this.',
    attempts INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'Failed consumption attempts.',
    last_error VARCHAR(1024) NULL COMMENT 'Last consumption failure.',
    version BIGINT UNSIGNED NOT NULL DEFAULT 1 COMMENT 'Grows on every change.',
    PRIMARY KEY (id),
    KEY ix_inbox_pending (state, available_at, version),
    KEY ix_inbox_task (task_id, occurred_at),
    KEY ix_inbox_instance (instance_id, state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='Task outcomes waiting to be consumed by the orchestrator (K-7).';
