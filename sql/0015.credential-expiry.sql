-- Weave schema, level 15: a credential may expire. A token that lives for ever outlives the job, the person or the
-- machine it was made for, and revoking it needs someone to remember it; one made to expire stops authenticating
-- at its time, on the engine clock, as if disabled then. Existing credentials keep no expiry (NULL).
-- Its cost: none in writes; the authorisation reads the clock only for a credential that expires.
-- depends: 0014.audit-reads

ALTER TABLE weave_credentials
    ADD COLUMN expires_at DATETIME(6) NULL COMMENT 'When the credential stops authenticating (engine clock); NULL: never.'
    AFTER disabled_at;
