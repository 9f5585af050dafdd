-- Weave schema, level 13: the counters of /metrics kept apart from the rows they count.
-- weave_metrics counted the settled waits (with their latency buckets), the signals by status and disposition and
-- the rounds by outcome from their rows at every scrape: about three rows per settled instance, 888,098 rows a
-- scrape beside 300,000 settled instances. Those rows never change once final, so a scrape now folds the ones that
-- became final since the last fold (up to a horizon two minutes back, past any transaction that could still commit
-- one) into these sums, and counts only the rows after the horizon from the rows themselves.
-- The time a row became final is read on an index: a wait's settled_at (ix_wait_settled, as it is), a signal's
-- consumed_at (ix_signal_final, new: one more index entry written by every signal's acceptance, moved by its
-- consumption, rejection or expiry), and a round's new decided_at, written in the statement that records its
-- outcome (ix_round_decided: one more index entry written by every round's start, moved by its outcome).
-- Nothing is folded at upgrade: the first scrapes fold the history kept so far, at most 50,000 rows of each kind
-- a scrape.
-- depends: 0012.instance-definition-status-index

ALTER TABLE weave_poll_rounds
    ADD COLUMN decided_at DATETIME(6) NULL
        COMMENT 'When the outcome was recorded (engine time); NULL while IN_FLIGHT. result_at is the answer''s own time.'
        AFTER result_at,
    ADD KEY ix_round_decided (decided_at);

UPDATE weave_poll_rounds SET decided_at = COALESCE(result_at, created_at) WHERE outcome <> 'IN_FLIGHT';

ALTER TABLE weave_signals ADD KEY ix_signal_final (consumed_at);

CREATE TABLE weave_metric_folds (
    id TINYINT UNSIGNED NOT NULL COMMENT 'Always 1: this table holds a single row.',
    folded_until DATETIME(6) NOT NULL COMMENT 'Rows that became final before this time are counted in the sums.',
    folded_at DATETIME(6) NOT NULL COMMENT 'When the last fold ran (engine time).',
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
  COMMENT='How far the sums of /metrics reach: weave_metrics folds the rows final since, and counts the rest.';

INSERT INTO weave_metric_folds (id, folded_until, folded_at) VALUES (1, '1000-01-01', '1000-01-01');

CREATE TABLE weave_metric_decisions (
    kind VARCHAR(16) NOT NULL COMMENT 'TIMER, SIGNAL or POLL_FINAL.',
    result VARCHAR(16) NOT NULL COMMENT 'SATISFIED or EXPIRED.',
    decisions BIGINT UNSIGNED NOT NULL COMMENT 'Waits decided.',
    latency_us BIGINT UNSIGNED NOT NULL COMMENT 'Sum of their latencies in microseconds.',
    le_0_1 BIGINT UNSIGNED NOT NULL COMMENT 'Of them, decided within 0.1 s.',
    le_0_5 BIGINT UNSIGNED NOT NULL COMMENT 'Within 0.5 s.',
    le_1 BIGINT UNSIGNED NOT NULL COMMENT 'Within 1 s.',
    le_5 BIGINT UNSIGNED NOT NULL COMMENT 'Within 5 s.',
    le_30 BIGINT UNSIGNED NOT NULL COMMENT 'Within 30 s.',
    le_300 BIGINT UNSIGNED NOT NULL COMMENT 'Within 300 s.',
    PRIMARY KEY (kind, result)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
  COMMENT='Folded waits decided, by kind and result, with latency buckets (weave_metrics).';

CREATE TABLE weave_metric_signals (
    status VARCHAR(16) NOT NULL COMMENT 'CONSUMED, REJECTED or EXPIRED.',
    disposition VARCHAR(32) NOT NULL COMMENT 'The disposition, or the empty string for none.',
    signals BIGINT UNSIGNED NOT NULL COMMENT 'Signals folded.',
    PRIMARY KEY (status, disposition)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
  COMMENT='Folded final signals by status and disposition (weave_metrics).';

CREATE TABLE weave_metric_rounds (
    outcome VARCHAR(24) NOT NULL COMMENT 'The round''s outcome.',
    rounds BIGINT UNSIGNED NOT NULL COMMENT 'Rounds folded.',
    PRIMARY KEY (outcome)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
  COMMENT='Folded poll rounds by outcome (weave_metrics).';
