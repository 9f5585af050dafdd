-- Back to level 14: credentials without an expiry (one that had expired authenticates again: disable it first).
ALTER TABLE weave_credentials DROP COLUMN expires_at;
