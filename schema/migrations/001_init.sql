-- 001_init: tokens, blobs, models, versions, datasets, audit log.
-- Times are RFC 3339 UTC strings with milliseconds; JSON columns hold compact JSON text.

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    roles       INTEGER NOT NULL,
    secret_hash BLOB NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE UNIQUE INDEX tokens_live_name ON tokens(name) WHERE revoked_at IS NULL;

CREATE TABLE blobs (
    digest     TEXT PRIMARY KEY,
    size       INTEGER NOT NULL,
    media_type TEXT NOT NULL,
    files      INTEGER,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE blob_files (
    digest TEXT NOT NULL REFERENCES blobs(digest),
    path   TEXT NOT NULL,
    size   INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (digest, path)
) WITHOUT ROWID;

CREATE TABLE models (
    id             INTEGER PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    description    TEXT NOT NULL DEFAULT '',
    tags           TEXT NOT NULL DEFAULT '{}',
    created_at     TEXT NOT NULL,
    created_by     TEXT NOT NULL,
    latest_version INTEGER
);

CREATE TABLE versions (
    id          INTEGER PRIMARY KEY,
    model_id    INTEGER NOT NULL REFERENCES models(id),
    version     INTEGER NOT NULL,
    artifact    TEXT NOT NULL REFERENCES blobs(digest),
    image       TEXT,
    run_id      TEXT,
    source      TEXT,
    params      TEXT NOT NULL DEFAULT '{}',
    tags        TEXT NOT NULL DEFAULT '{}',
    smoke       TEXT,
    resources   TEXT,
    description TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    UNIQUE (model_id, version)
);

CREATE TABLE version_datasets (
    version_id INTEGER NOT NULL REFERENCES versions(id),
    ord        INTEGER NOT NULL,
    digest     TEXT NOT NULL,
    name       TEXT,
    uri        TEXT,
    role       TEXT NOT NULL,
    PRIMARY KEY (version_id, ord)
) WITHOUT ROWID;
CREATE INDEX version_datasets_digest ON version_datasets(digest);

-- Append-only: one row per metric name; seq orders the history.
CREATE TABLE version_metrics (
    seq        INTEGER PRIMARY KEY,
    version_id INTEGER NOT NULL REFERENCES versions(id),
    name       TEXT NOT NULL,
    value      REAL NOT NULL,
    by         TEXT NOT NULL,
    at         TEXT NOT NULL,
    UNIQUE (version_id, name)
);

CREATE TABLE datasets (
    digest      TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    uri         TEXT,
    description TEXT,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL
) WITHOUT ROWID;

-- Parents must be registered first, so the graph is acyclic by construction.
CREATE TABLE dataset_parents (
    child  TEXT NOT NULL REFERENCES datasets(digest),
    parent TEXT NOT NULL REFERENCES datasets(digest),
    PRIMARY KEY (child, parent)
) WITHOUT ROWID;
CREATE INDEX dataset_parents_parent ON dataset_parents(parent);

-- Hash-chained: hash = sha256(prev_hash || canonical entry). audit_head holds
-- the newest seq and hash so that deleting the last rows is detected too.
CREATE TABLE audit (
    seq       INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    actor     TEXT NOT NULL,
    action    TEXT NOT NULL,
    target    TEXT NOT NULL,
    detail    TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
);

CREATE TABLE audit_head (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT NOT NULL
);
