-- Several processes on one database (the second release): who is alive, whose leases are
-- whose, and which model's cached reads a write made stale.

-- Every running modelgated, by a random id chosen at start; last_seen_ms moves with its
-- heartbeat. A lease whose owner was not seen lately belongs to a dead process.
CREATE TABLE replicas (
    id           TEXT PRIMARY KEY,
    address      TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    last_seen_ms INTEGER NOT NULL
) WITHOUT ROWID;

-- An outbox lease names its holder and a token only that claim knows: the outcome of a
-- delivery counts only if the lease is still the one it was given.
ALTER TABLE outbox ADD COLUMN lease_owner TEXT;
ALTER TABLE outbox ADD COLUMN lease_token TEXT;

-- A running smoke test, likewise: who runs it, and until when that claim holds.
ALTER TABLE smoke_tests ADD COLUMN owner TEXT;
ALTER TABLE smoke_tests ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;

-- Moves with every audited change of a model (its versions, aliases, policies): cached
-- answers about the model are valid while it stays put.
CREATE TABLE model_epochs (
    model TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL
) WITHOUT ROWID;

-- The cluster's signing keys: every public key any replica signed with (so every replica
-- publishes and verifies with all of them), and the one private key replicas share when
-- none is given with --signing-key (stored like the webhook secrets: the database is
-- trusted with secrets already).
CREATE TABLE signing_keys (
    keyid          TEXT PRIMARY KEY,
    hint           TEXT NOT NULL UNIQUE,
    public_pem     TEXT NOT NULL,
    private_pem    TEXT,
    created_at     TEXT NOT NULL,
    last_active_ms INTEGER NOT NULL
) WITHOUT ROWID;
