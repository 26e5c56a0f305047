-- Several processes on one database: see the SQLite migration of the same number.
CREATE TABLE replicas (
    id           TEXT PRIMARY KEY,
    address      TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    last_seen_ms BIGINT NOT NULL
);
ALTER TABLE outbox ADD COLUMN lease_owner TEXT;
ALTER TABLE outbox ADD COLUMN lease_token TEXT;
ALTER TABLE smoke_tests ADD COLUMN owner TEXT;
ALTER TABLE smoke_tests ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
CREATE SEQUENCE model_epoch_seq;
CREATE TABLE model_epochs (
    model TEXT PRIMARY KEY,
    epoch BIGINT NOT NULL,
    seq   BIGINT NOT NULL DEFAULT 0 -- model_epoch_seq at its last change
);
CREATE INDEX model_epochs_seq ON model_epochs(seq);
CREATE TABLE signing_keys (
    keyid          TEXT PRIMARY KEY,
    hint           TEXT NOT NULL UNIQUE,
    public_pem     TEXT NOT NULL,
    private_pem    TEXT,
    created_at     TEXT NOT NULL,
    last_active_ms BIGINT NOT NULL
);
