-- 003_release: aliases and their history, policies, promotions, gateways and
-- the transactional outbox.

-- routes: JSON [{"version":n,"weight":w}], weights sum to 100 (or [] when deleted).
CREATE TABLE aliases (
    id         INTEGER PRIMARY KEY,
    model_id   INTEGER NOT NULL REFERENCES models(id),
    name       TEXT NOT NULL,
    generation INTEGER NOT NULL,
    routes     TEXT NOT NULL,
    deleted    INTEGER NOT NULL DEFAULT 0,
    promotion  TEXT,
    updated_at TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    UNIQUE (model_id, name)
);

-- Every generation ever written. kind: set, step, promoted, rollback, abort, delete.
CREATE TABLE alias_history (
    alias_id   INTEGER NOT NULL REFERENCES aliases(id),
    generation INTEGER NOT NULL,
    routes     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    reason     TEXT,
    promotion  TEXT,
    at         TEXT NOT NULL,
    by         TEXT NOT NULL,
    PRIMARY KEY (alias_id, generation)
) WITHOUT ROWID;

-- Versions rolled back from an alias, with the generation of the (latest)
-- rollback: a version is not last-known-good through entries older than it.
CREATE TABLE alias_bad (
    alias_id   INTEGER NOT NULL REFERENCES aliases(id),
    version    INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    at       TEXT NOT NULL,
    by       TEXT NOT NULL,
    reason   TEXT,
    PRIMARY KEY (alias_id, version)
) WITHOUT ROWID;

CREATE TABLE policies (
    model_id   INTEGER NOT NULL REFERENCES models(id),
    alias      TEXT NOT NULL,
    policy     TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    PRIMARY KEY (model_id, alias)
) WITHOUT ROWID;

-- rev grows with every change: writers check it (optimistic concurrency).
CREATE TABLE promotions (
    id               TEXT PRIMARY KEY,
    model_id         INTEGER NOT NULL REFERENCES models(id),
    alias            TEXT NOT NULL,
    version          INTEGER NOT NULL,
    baseline_version INTEGER,
    state            TEXT NOT NULL,
    reason           TEXT,
    policy           TEXT NOT NULL,
    gates            TEXT NOT NULL DEFAULT '[]',
    step_index       INTEGER NOT NULL DEFAULT -1,
    weight           INTEGER NOT NULL DEFAULT 0,
    next_step_at     INTEGER NOT NULL DEFAULT 0,
    rev              INTEGER NOT NULL DEFAULT 1,
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
) WITHOUT ROWID;
-- One active promotion per alias.
CREATE UNIQUE INDEX promotions_active ON promotions(model_id, alias)
    WHERE state IN ('evaluating', 'awaiting_approval', 'rolling_out');
CREATE INDEX promotions_due ON promotions(next_step_at) WHERE state = 'rolling_out';
CREATE INDEX promotions_created ON promotions(created_at);

CREATE TABLE promotion_approvals (
    promotion_id TEXT NOT NULL REFERENCES promotions(id),
    by           TEXT NOT NULL,
    decision     TEXT NOT NULL,
    comment      TEXT,
    at           TEXT NOT NULL,
    PRIMARY KEY (promotion_id, by)
) WITHOUT ROWID;

CREATE TABLE promotion_events (
    seq          INTEGER PRIMARY KEY,
    promotion_id TEXT NOT NULL REFERENCES promotions(id),
    at           TEXT NOT NULL,
    type         TEXT NOT NULL,
    detail       TEXT
);
CREATE INDEX promotion_events_promotion ON promotion_events(promotion_id, seq);

-- Push targets. models/aliases: JSON arrays filtering what a gateway hears (NULL = all).
-- secret: the webhook HMAC key (needed in clear to sign; never returned by the API).
CREATE TABLE gateways (
    name            TEXT PRIMARY KEY,
    kind            TEXT NOT NULL,
    config          TEXT NOT NULL,
    secret          TEXT,
    models          TEXT,
    aliases         TEXT,
    disabled_reason TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO gateways (name, kind, config, created_at, updated_at)
    VALUES ('runner', 'runner', '{}', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
            strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

-- Desired state per (gateway, model, alias): only the newest generation is kept,
-- so an older pending delivery is superseded, never replayed after a newer one.
-- state: pending, in_sync, failing.
CREATE TABLE outbox (
    gateway         TEXT NOT NULL REFERENCES gateways(name) ON DELETE CASCADE,
    model           TEXT NOT NULL,
    alias           TEXT NOT NULL,
    generation      INTEGER NOT NULL,
    payload         TEXT NOT NULL,
    state           TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    lease_until     INTEGER NOT NULL DEFAULT 0, -- a worker holds the row until then (ms)
    written_ms      INTEGER NOT NULL DEFAULT 0, -- for delivery lag
    written_at      TEXT NOT NULL,
    acked_at        TEXT,
    PRIMARY KEY (gateway, model, alias)
) WITHOUT ROWID;
CREATE INDEX outbox_pending ON outbox(next_attempt_at) WHERE state != 'in_sync';
