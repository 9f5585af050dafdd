-- Back to level 18: the credentials that expire are found by reading them all.
ALTER TABLE weave_credentials DROP KEY ix_credential_expiry;
