-- Back to level 12: every scrape counts the settled rows again.
DROP TABLE weave_metric_rounds;
DROP TABLE weave_metric_signals;
DROP TABLE weave_metric_decisions;
DROP TABLE weave_metric_folds;
ALTER TABLE weave_signals DROP KEY ix_signal_final;
ALTER TABLE weave_poll_rounds DROP KEY ix_round_decided, DROP COLUMN decided_at;
