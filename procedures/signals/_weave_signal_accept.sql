-- The one body of Send (S-1..S-9), shared by weave_signal_send (its own transaction) and
-- weave_signal_send_in_tx (the caller's transaction, S-16), so the two entry points can never answer
-- differently. It never starts, commits or rolls back: the entry point owns the transaction.
--
-- Everything stateless is checked before anything is locked or written (S-1: a violation stores
-- nothing). Then the R-3 lock order: the sender's credential (shared, in the authorisation), the
-- instance's identity (shared) and the instance row. The step, its wait and the signals are read
-- under the instance's lock, which orders every change of them, and read again with locks only when
-- the caller's REPEATABLE READ snapshot is older than the instance's last change (see the read
-- below), so the caller's isolation level does not matter: a send inside a REPEATABLE READ
-- transaction decides from the same latest rows as one under READ COMMITTED. Sends to one instance
-- queue on its row lock, so one idempotency key can never be accepted twice, and the per-instance
-- count of S-6 is exact.
--
-- Settle at Send (in_wake, from weave_signal_send): a signal accepted PENDING for a WAITING SIGNAL wait is
-- decided in Send's own transaction by the handler that the wait's checkpoint and the signal candidate run
-- (_weave_signal_advance), under the instance lock already held. S-11 holds because the handler, not this
-- routine, picks the winner: the first PENDING match by (accepted_at, id) under the lock, which may be an
-- earlier signal than this one. R-8 holds because the successors go through the ROOT walk inline, deferred
-- on the ROOT checkpoint when new work may not start yet. The decision's clock is the acceptance's (read
-- once, after the locks, R-2). Early signals (no wait yet), POLL final signals and sends inside a caller's
-- transaction keep the candidate path. A handler that cannot decide (facts that do not verify, R-6) never
-- makes acceptance fail: its work is undone back to a savepoint and the signal stays PENDING with its
-- checkpoint due now, for the candidate path to back off and report.
CREATE PROCEDURE _weave_signal_accept(
        IN  in_token                 VARCHAR(512),
        IN  in_namespace             VARCHAR(200),
        IN  in_workflow_id           VARCHAR(64),
        IN  in_idempotency_key       LONGTEXT,
        IN  in_name                  LONGTEXT,
        IN  in_payload_version       LONGTEXT,
        IN  in_target_step_key       LONGTEXT,
        IN  in_target_activation_seq BIGINT,
        IN  in_correlation_key       LONGBLOB,
        IN  in_payload               LONGBLOB,
        IN  in_reason                LONGTEXT,
        IN  in_evidence_ref          LONGTEXT,
        IN  in_wake                  TINYINT,
        OUT out_receipt              LONGTEXT,
        OUT out_replayed             TINYINT)
    COMMENT 'Internal. Description: authorises, validates and stores one signal, or answers the first receipt of
its idempotency key. in_wake = 1: a signal accepted PENDING for a WAITING SIGNAL wait is decided at once (Settle at
Send). out_receipt: the frozen receipt JSON; out_replayed: 1 for a replay, 0 for a first acceptance.
Errors: as weave_signal_send.'
    MODIFIES SQL DATA
BEGIN
    DECLARE v_ns BIGINT UNSIGNED;
    DECLARE v_cred BIGINT UNSIGNED;
    DECLARE v_actor VARCHAR(128);
    DECLARE v_inst BIGINT UNSIGNED;
    DECLARE v_identity BIGINT UNSIGNED;  -- the instance's starting identity, for its lock
    DECLARE v_locked BIGINT UNSIGNED;  -- the instance's event_seq as locked: its latest committed change
    DECLARE v_seen BIGINT UNSIGNED;  -- the event_seq of the instance this read saw
    DECLARE v_digest CHAR(64);
    DECLARE v_status_inst VARCHAR(16);
    DECLARE v_deadline DATETIME(6);
    DECLARE v_count INT UNSIGNED;
    DECLARE v_existing BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_existing_digest CHAR(64);
    DECLARE v_existing_receipt LONGTEXT;
    DECLARE v_type VARCHAR(16) DEFAULT NULL;
    DECLARE v_spec LONGTEXT;
    DECLARE v_contract_name VARCHAR(128);
    DECLARE v_contract_version VARCHAR(32);
    DECLARE v_payload_type VARCHAR(16);
    DECLARE v_json_type VARCHAR(16);
    DECLARE v_payload_text LONGTEXT;
    DECLARE v_step BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_k INT UNSIGNED;
    DECLARE v_activation BIGINT UNSIGNED;
    DECLARE v_wait BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_wait_kind VARCHAR(16);
    DECLARE v_wait_status VARCHAR(16);
    DECLARE v_wait_deadline DATETIME(6);
    DECLARE v_wait_corr VARBINARY(512);
    DECLARE v_status VARCHAR(16) DEFAULT 'PENDING';
    DECLARE v_disposition VARCHAR(32) DEFAULT NULL;
    DECLARE v_available DATETIME(6);
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_receipt LONGTEXT;
    DECLARE v_now DATETIME(6);
    DECLARE v_step_status VARCHAR(16);
    DECLARE v_wakes BOOLEAN DEFAULT FALSE;  -- decided in this transaction, by the wait's own handler
    DECLARE v_woke VARCHAR(16) DEFAULT NULL;
    DECLARE v_errno INT;

    SET out_replayed = 0, out_receipt = NULL;

    -- S-2: 401 / 404 (another namespace looks missing) / 403 scope and every queue of the pinned definition.
    CALL _weave_instance_authorize(in_token, in_namespace, in_workflow_id, 'workflows:signal',
                                   v_ns, v_cred, v_actor, v_inst, v_identity);

    -- S-1: stateless field rules, each at its own code; nothing is locked or stored yet.
    IF in_name IS NULL OR CHAR_LENGTH(in_name) = 0 THEN
        CALL _weave_raise(50116, 'NAME_INVALID: name is required (1-128 printable ASCII characters)');
    END IF;
    IF CHAR_LENGTH(in_name) > 128 THEN
        CALL _weave_raise(50101, 'NAME_TOO_LONG: name must be at most 128 characters');
    END IF;
    -- \z, not $, ends each pattern: $ also matches before a final newline, which is no printable ASCII.
    IF NOT (in_name REGEXP '^[ -~]+\\z') THEN
        CALL _weave_raise(50116, 'NAME_INVALID: name must be printable ASCII');
    END IF;
    IF in_payload_version IS NULL OR NOT (in_payload_version REGEXP '^[ -~]{1,32}\\z') THEN
        CALL _weave_raise(50102, 'PAYLOAD_VERSION_INVALID: payload_version must be 1-32 printable ASCII characters');
    END IF;
    IF in_target_step_key IS NULL OR CHAR_LENGTH(in_target_step_key) NOT BETWEEN 1 AND 64 THEN
        CALL _weave_raise(50103, 'TARGET_STEP_INVALID: target_step_key must be 1-64 characters');
    END IF;
    IF in_target_activation_seq IS NULL OR in_target_activation_seq < 1 THEN
        CALL _weave_raise(50104, 'ACTIVATION_SEQUENCE_INVALID: target_activation_sequence must be a positive integer');
    END IF;
    IF in_correlation_key IS NULL OR OCTET_LENGTH(in_correlation_key) = 0 THEN
        CALL _weave_raise(50106, 'CORRELATION_KEY_MISSING: correlation_key is required');
    END IF;
    IF OCTET_LENGTH(in_correlation_key) > 512 THEN
        CALL _weave_raise(50105, 'CORRELATION_KEY_TOO_LONG: correlation_key must be at most 512 bytes');
    END IF;
    -- Exact bytes are kept, so they must already be UTF-8: a conversion that changes them found bad bytes.
    IF CAST(CONVERT(in_correlation_key USING utf8mb4) AS BINARY) <> in_correlation_key THEN
        CALL _weave_raise(50130, 'CORRELATION_KEY_INVALID: correlation_key must be UTF-8');
    END IF;
    -- Explicit JSON null is a payload; SQL NULL is a missing payload.
    IF in_payload IS NULL THEN
        CALL _weave_raise(50108, 'PAYLOAD_MISSING: payload is required (JSON null is a payload)');
    END IF;
    IF OCTET_LENGTH(in_payload) > 262144 THEN
        CALL _weave_raise(50107, 'PAYLOAD_TOO_LARGE: payload must be at most 256 KiB as received');
    END IF;
    IF CAST(CONVERT(in_payload USING utf8mb4) AS BINARY) <> in_payload THEN
        CALL _weave_raise(50109, 'PAYLOAD_INVALID: payload must be UTF-8');
    END IF;
    -- JSON functions read the text (MySQL refuses binary strings); the stored payload stays the bytes received.
    SET v_payload_text = CONVERT(in_payload USING utf8mb4);
    -- MariaDB's JSON_VALID alone also passes numbers such as 1. and escapes such as \x (_weave_json_strict).
    IF NOT _weave_json_strict(v_payload_text) THEN
        CALL _weave_raise(50109, 'PAYLOAD_INVALID: payload must be one JSON value, nested at most 31 levels, '
                                 'no key twice, no number past a double');
    END IF;
    IF in_reason IS NULL OR CHAR_LENGTH(in_reason) NOT BETWEEN 1 AND 1024 THEN
        CALL _weave_raise(50111, 'REASON_INVALID: reason is required, 1-1024 characters');
    END IF;
    IF in_evidence_ref IS NOT NULL AND (CHAR_LENGTH(in_evidence_ref) NOT BETWEEN 1 AND 512
                                        OR in_evidence_ref REGEXP '[\\s\\p{Z}\\p{Cc}]') THEN
        CALL _weave_raise(50112, 'EVIDENCE_REF_INVALID: evidence_ref must be 1-512 chars without whitespace or controls');
    END IF;
    IF in_idempotency_key IS NULL OR NOT (in_idempotency_key REGEXP '^[!-~]{1,128}\\z') THEN
        CALL _weave_raise(50113, 'IDEMPOTENCY_KEY_INVALID: 1-128 printable ASCII characters, no space');
    END IF;
    SET v_digest = _weave_signal_digest(in_name, in_payload_version, in_target_step_key, in_target_activation_seq,
                                        in_correlation_key, in_payload, in_reason, in_evidence_ref, 'CANONICAL');
    IF v_digest IS NULL THEN
        -- Valid JSON syntax with no value behind it, such as a lone surrogate escape ("\ud800").
        CALL _weave_raise(50109, 'PAYLOAD_INVALID: payload must be one JSON value of valid Unicode text');
    END IF;

    -- R-3: the instance's identity, then the instance row (waiting, never skipping); never the app's row, which every
    -- task creation of the app updates (_pulse_slot_take), and which a send waiting here, or inside a caller's
    -- transaction that may last, would hold up.
    CALL _weave_instance_lock(v_inst, v_identity, v_locked);
    IF v_locked IS NULL THEN
        CALL _weave_raise(50003, 'NOT_FOUND: no such object in this namespace');
    END IF;
    -- R-2, S-11: accepted_at is read after the instance lock, so per instance it follows lock (commit) order
    -- and the first signal by (accepted_at, id) is the first that the instance's decisions could see. It is never
    -- earlier than the instance's last decision (its updated_at), even on a writer whose clock is behind the one
    -- that took it (a failover, a multi-writer cluster, a clock stepped back). The
    -- lock is held already when this statement starts (its clock is its start time), so the clock is read
    -- here, in _weave_now's expression. S-4: the same read finds the signal stored under this idempotency key,
    -- if there is one. S-7, S-8: it also reads the target step and its current wait, with the step's contract
    -- from the pinned definition. Every key is unique, so it is one row with or without each of them. The
    -- instance's lock, taken before, orders everything here: every change of the instance, its steps, waits and
    -- signals is a decision that holds it and writes an event (R-4), which moves the instance's event_seq. So the
    -- read is a plain one, and locks nothing more. A locking read would lock the gaps where a key is missing at
    -- REPEATABLE READ, the level of a caller's transaction around weave_signal_send_in_tx at the server's default:
    -- a gap runs to the next row of the index, another instance's or another namespace's, and every send, step or
    -- wait written into it would wait until that caller committed. A plain read at READ COMMITTED (the engine's
    -- own transactions) sees every change committed before the lock; one of a caller's REPEATABLE READ snapshot
    -- taken earlier may not, and then the event_seq it saw is not the one locked: it reads again, locking, as
    -- only a locking read reads past its snapshot.
    -- The step key is compared byte for byte as well: its column's collation pads, so 'approval ' would find the
    -- step 'approval' and a signal would be stored for a key that no step has.
    SELECT i.event_seq, i.status, i.deadline_at, i.signal_count,
           GREATEST(UTC_TIMESTAMP(6) + INTERVAL (SELECT clock_offset_us FROM weave_install WHERE id = 1) MICROSECOND,
                    i.updated_at),
           g.id, g.request_digest, g.receipt,
           s.type,
           (SELECT ds.spec FROM weave_definition_steps ds
             WHERE ds.definition_id = i.definition_id AND ds.step_key = in_target_step_key),
           s.id, s.status, s.activation_seq, s.activation_id, w.id, w.kind, w.status, w.deadline_at,
           w.correlation_key
      INTO v_seen, v_status_inst, v_deadline, v_count, v_now, v_existing, v_existing_digest, v_existing_receipt,
           v_type, v_spec, v_step, v_step_status, v_k, v_activation, v_wait, v_wait_kind, v_wait_status,
           v_wait_deadline, v_wait_corr
      FROM weave_instances i
      LEFT JOIN weave_signals g
        ON g.namespace_id = v_ns AND g.instance_id = i.id AND g.idempotency_key = in_idempotency_key
      LEFT JOIN weave_steps s ON s.instance_id = i.id AND s.step_key = in_target_step_key
                             AND BINARY s.step_key = BINARY in_target_step_key
      LEFT JOIN weave_waits w ON w.activation_id = s.activation_id AND w.kind IN ('SIGNAL', 'POLL_FINAL')
     WHERE i.id = v_inst;
    IF NOT (v_seen <=> v_locked) THEN
        -- The clock was read above, after the lock; only the instance's last decision may be later than the one
        -- the snapshot showed.
        SELECT i.event_seq, i.status, i.deadline_at, i.signal_count, GREATEST(v_now, i.updated_at),
               g.id, g.request_digest, g.receipt,
               s.type,
               (SELECT ds.spec FROM weave_definition_steps ds
                 WHERE ds.definition_id = i.definition_id AND ds.step_key = in_target_step_key),
               s.id, s.status, s.activation_seq, s.activation_id, w.id, w.kind, w.status, w.deadline_at,
               w.correlation_key
          INTO v_seen, v_status_inst, v_deadline, v_count, v_now, v_existing, v_existing_digest,
               v_existing_receipt, v_type, v_spec, v_step, v_step_status, v_k, v_activation, v_wait, v_wait_kind, v_wait_status,
               v_wait_deadline, v_wait_corr
          FROM weave_instances i
          LEFT JOIN weave_signals g
            ON g.namespace_id = v_ns AND g.instance_id = i.id AND g.idempotency_key = in_idempotency_key
          LEFT JOIN weave_steps s ON s.instance_id = i.id AND s.step_key = in_target_step_key
                                 AND BINARY s.step_key = BINARY in_target_step_key
          LEFT JOIN weave_waits w ON w.activation_id = s.activation_id AND w.kind IN ('SIGNAL', 'POLL_FINAL')
         WHERE i.id = v_inst FOR UPDATE;
    END IF;
    -- The clock and a step's spec always answer: one empty was cut short (see _weave_root_advance), and the signal
    -- was stored with its contract and payload type unchecked.
    IF v_status_inst IS NOT NULL AND (v_now IS NULL OR (v_type IS NOT NULL AND v_spec IS NULL)) THEN
        CALL _weave_raise(50016, 'INTERRUPTED: the send''s read of its instance and step came back empty; nothing is changed');
    END IF;

    accept: BEGIN
        -- S-4: the idempotency identity is answered before any limit or target rule (S-6).
        IF v_existing IS NOT NULL THEN
            -- A signal stored by an earlier release carries its digest in an earlier form.
            IF v_existing_digest <> v_digest AND NOT _weave_signal_digest_earlier(in_name, in_payload_version,
                   in_target_step_key, in_target_activation_seq, in_correlation_key, in_payload, in_reason,
                   in_evidence_ref, v_existing_digest) THEN
                CALL _weave_raise(50005, 'IDEMPOTENCY_CONFLICT: this key was accepted with a different request');
            END IF;
            SET out_receipt = _weave_signal_receipt(v_existing, v_existing_receipt), out_replayed = 1;
            LEAVE accept;
        END IF;

        -- S-6: at most 1024 stored signals per instance, rejected and settled ones included.
        IF v_count >= 1024 THEN
            CALL _weave_raise(50006, 'SIGNAL_LIMIT_REACHED: this instance already holds 1024 signals');
        END IF;

        -- S-7: the target is a step of the pinned definition with a signal contract that this request meets. Its
        -- type is the step row's (copied from the definition at the start), its contract the definition's (both
        -- read above, under the instance's lock, with the step and its current wait for S-8 below).
        IF v_type = 'SIGNAL' THEN
            SET v_contract_name = JSON_VALUE(v_spec, '$.signal.name'),
                v_contract_version = JSON_VALUE(v_spec, '$.signal.payload_version'),
                v_payload_type = COALESCE(JSON_VALUE(v_spec, '$.signal.payload_type'), 'any');
        ELSEIF v_type = 'POLL' AND JSON_TYPE(JSON_EXTRACT(v_spec, '$.final_signal')) = 'OBJECT' THEN
            SET v_contract_name = JSON_VALUE(v_spec, '$.final_signal.name'),
                v_contract_version = JSON_VALUE(v_spec, '$.final_signal.payload_version'),
                v_payload_type = 'result';
        ELSE
            CALL _weave_raise(50103, 'TARGET_STEP_INVALID: no SIGNAL step or POLL with final_signal has this key');
        END IF;
        IF BINARY in_name <> BINARY v_contract_name OR BINARY in_payload_version <> BINARY v_contract_version THEN
            CALL _weave_raise(50114, 'CONTRACT_MISMATCH: name and payload_version must equal the step''s signal contract');
        END IF;
        SET v_json_type = JSON_TYPE(v_payload_text);
        IF v_payload_type = 'result' THEN
            -- A final signal carries a result object (04-polls) with a final status, never a pending one. The status
            -- is compared by its characters (JSON_VALUE decodes escapes, which MariaDB's JSON_CONTAINS compares as
            -- written), as a round's status is classified and as the race reads the signal's.
            IF v_json_type <> 'OBJECT' OR COALESCE(JSON_TYPE(JSON_EXTRACT(v_payload_text, '$.status')), '') <> 'STRING' THEN
                CALL _weave_raise(50110, 'PAYLOAD_TYPE_MISMATCH: a final signal carries a result object with a status');
            END IF;
            IF NOT (COALESCE(JSON_CONTAINS(JSON_EXTRACT(v_spec, '$.result.success'),
                                           JSON_QUOTE(JSON_VALUE(v_payload_text, '$.status'))), 0)
                    OR COALESCE(JSON_CONTAINS(JSON_EXTRACT(v_spec, '$.result.review'),
                                              JSON_QUOTE(JSON_VALUE(v_payload_text, '$.status'))), 0)) THEN
                CALL _weave_raise(50109, 'PAYLOAD_INVALID: a final signal''s status must be a success or review status');
            END IF;
        ELSEIF v_payload_type <> 'any' AND NOT (
                   (v_payload_type = 'object' AND v_json_type = 'OBJECT')
                OR (v_payload_type = 'array' AND v_json_type = 'ARRAY')
                OR (v_payload_type = 'string' AND v_json_type = 'STRING')
                OR (v_payload_type = 'number' AND v_json_type IN ('INTEGER', 'DOUBLE', 'DECIMAL', 'UNSIGNED INTEGER'))
                OR (v_payload_type = 'boolean' AND v_json_type = 'BOOLEAN')
                OR (v_payload_type = 'null' AND v_json_type = 'NULL')) THEN
            CALL _weave_raise(50110, 'PAYLOAD_TYPE_MISMATCH: payload is not of the declared payload_type');
        END IF;

        -- S-8: the activation sequence, from the step and its current wait (read above, under the instance's lock).
        IF v_step IS NULL THEN
            CALL _weave_raise(50007, 'INVALID_STATE: the instance has no row for this step');
        END IF;
        IF (v_k = 0 AND in_target_activation_seq <> 1) OR (v_k > 0 AND in_target_activation_seq > v_k) THEN
            CALL _weave_raise(50115, 'FUTURE_ACTIVATION: target_activation_sequence is beyond the current activation');
        END IF;
        IF in_target_activation_seq <> v_k THEN
            -- Only the target activation's own wait decides; an early or stale signal has none.
            SET v_wait = NULL;
        END IF;

        -- S-9: stored directly as REJECTED, the first reason that applies, in this order.
        IF v_status_inst IN ('CANCELLING', 'CANCELLED', 'SUCCEEDED') THEN
            SET v_disposition = 'INSTANCE_SETTLED';
        ELSEIF in_target_activation_seq < v_k THEN
            SET v_disposition = 'STALE_ACTIVATION';
        -- A step reactivated as k (C-4) is PENDING without an activation row until the ROOT advance opens its wait:
        -- a signal for k is then early (S-10), not one for a settled step.
        ELSEIF in_target_activation_seq = v_k AND (v_activation IS NOT NULL OR v_step_status <> 'PENDING')
               AND (v_wait IS NULL OR v_wait_status <> 'WAITING') THEN
            SET v_disposition = 'STEP_SETTLED';
        ELSEIF v_now >= v_deadline OR (v_wait IS NOT NULL AND v_now >= v_wait_deadline) THEN
            SET v_disposition = 'LATE';
        ELSEIF v_wait IS NOT NULL AND CAST(in_correlation_key AS BINARY) <> v_wait_corr THEN
            SET v_disposition = 'CORRELATION_MISMATCH';
        END IF;
        IF v_disposition IS NOT NULL THEN
            SET v_status = 'REJECTED';
        END IF;
        -- available_at is only the next check time (S-14): at once when a wait can consume the signal,
        -- otherwise when an unmatched early signal expires (S-10: the instance deadline at acceptance).
        SET v_available = IF(v_status = 'PENDING' AND v_wait IS NOT NULL, v_now, v_deadline);

        -- S-5: the receipt is frozen in the signal's own insert (stored without the id that the insert gives the
        -- row, _weave_signal_receipt) and answered byte-identical to every replay.
        SET v_receipt = JSON_OBJECT(
            'workflow_id', CONCAT('wf_', v_inst), 'idempotency_key', in_idempotency_key, 'status', v_status,
            'disposition', v_disposition, 'accepted_at', DATE_FORMAT(v_now, '%Y-%m-%dT%H:%i:%s.%fZ'),
            'expires_at', DATE_FORMAT(v_deadline, '%Y-%m-%dT%H:%i:%s.%fZ'), 'request_digest', v_digest);
        INSERT INTO weave_signals (namespace_id, instance_id, idempotency_key, request_digest, name, payload_version,
                                   target_step_key, target_activation_seq, correlation_key, payload, payload_bytes,
                                   reason, evidence_ref, credential_id, actor, status, disposition, accepted_at,
                                   expires_at, available_at, consumed_at, receipt)
        VALUES (v_ns, v_inst, in_idempotency_key, v_digest, in_name, in_payload_version, in_target_step_key,
                in_target_activation_seq, in_correlation_key, in_payload, OCTET_LENGTH(in_payload), in_reason,
                in_evidence_ref, v_cred, v_actor,
                v_status, v_disposition, v_now, v_deadline, v_available, IF(v_status = 'PENDING', NULL, v_now),
                v_receipt);
        SET v_id = LAST_INSERT_ID();
        SET v_receipt = _weave_signal_receipt(v_id, v_receipt);
        -- S-6: the signal is counted in the statement that numbers its event (as _weave_event numbers one).
        UPDATE weave_instances SET signal_count = signal_count + 1, event_seq = LAST_INSERT_ID(event_seq + 1),
                                   updated_at = v_now, version = version + 1
         WHERE id = v_inst;
        INSERT INTO weave_events (instance_id, seq, namespace_id, type, step_key, activation_seq, occurred_at, data)
        VALUES (v_inst, LAST_INSERT_ID(), v_ns, IF(v_status = 'PENDING', 'SIGNAL_ACCEPTED', 'SIGNAL_REJECTED'),
                in_target_step_key, in_target_activation_seq, v_now,
                JSON_OBJECT('signal_id', CONCAT('sig_', v_id), 'idempotency_key', in_idempotency_key, 'name', in_name,
                            'status', v_status, 'disposition', v_disposition, 'actor', v_actor,
                            'early', v_status = 'PENDING' AND v_wait IS NULL));
        -- Its audit row (R-4, S-12: the acceptance proof), written here as its event is, without a nested call:
        -- every signal is accepted here.
        INSERT INTO weave_audit (namespace_id, instance_id, credential_id, actor, action, idempotency_key,
                                 request_digest, accepted_at, deadline_at, reason, details, response, created_at)
        VALUES (v_ns, v_inst, v_cred, v_actor, 'signal.accept', in_idempotency_key, v_digest, v_now, v_deadline,
                in_reason, JSON_OBJECT('signal_id', CONCAT('sig_', v_id), 'status', v_status,
                                       'disposition', v_disposition, 'target_step_key', in_target_step_key,
                                       'target_activation_sequence', in_target_activation_seq + 0,
                                       'evidence_ref', in_evidence_ref),
                v_receipt, v_now);
        SET out_receipt = v_receipt;
        SET v_wakes = in_wake = 1 AND v_status = 'PENDING' AND v_wait IS NOT NULL AND v_wait_kind = 'SIGNAL'
                      AND v_wait_status = 'WAITING' AND v_step_status = 'ACTIVE';
        IF v_wakes THEN
            -- Settle at Send (see the head of this file): the wait's own handler decides now.
            SAVEPOINT weave_signal_wake;
            wake: BEGIN
                DECLARE EXIT HANDLER FOR SQLEXCEPTION
                BEGIN
                    GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
                    -- A deadlock took the whole transaction: Send fails as a transient error. So does an interrupt
                    -- (KILL QUERY, max_statement_time, or a read one emptied): caught here, the acceptance went on to
                    -- its COMMIT with the kill still pending, and the server skipped that COMMIT without a word, so
                    -- Send answered a receipt for a signal left uncommitted in an open transaction.
                    IF _weave_error_ends_call(v_errno) THEN
                        RESIGNAL;
                    END IF;
                    ROLLBACK TO SAVEPOINT weave_signal_wake;
                    SET v_woke = 'LATER';
                END;
                CALL _weave_signal_advance(v_ns, v_inst, in_target_step_key, v_activation, v_now, v_id, v_count = 0,
                                           v_woke);
            END wake;
        END IF;
        IF v_status = 'PENDING' AND v_wait IS NOT NULL AND (NOT v_wakes OR v_woke = 'LATER') THEN
            -- S-3: the active wait's checkpoint looks at once (its handler re-derives the deadline). A new
            -- signal is news, so it ends a backoff, but it leaves the failure count to the failures. A SIGNAL
            -- step in review gets no new checkpoint: its wait waits for the step's recovery, and a checkpoint of
            -- a step not ACTIVE is one that keeps failing or none (M-4.18); its run would only remove it.
            UPDATE weave_pending_advances
               SET due_at = LEAST(due_at, v_now), available_at = v_now, version = version + 1
             WHERE namespace_id = v_ns AND instance_id = v_inst AND step_key = in_target_step_key
               AND activation_id = v_activation;
            IF ROW_COUNT() = 0 AND (v_step_status = 'ACTIVE' OR v_wait_kind <> 'SIGNAL') THEN
                CALL _weave_checkpoint_set(v_ns, v_inst, in_target_step_key,
                                           IF(v_wait_kind = 'SIGNAL', 'SIGNAL', 'POLL'), v_activation, v_now, v_now);
            END IF;
        END IF;
    END accept;
END
