ALTER TABLE weave_poll_rounds DROP KEY ix_round_instance;
