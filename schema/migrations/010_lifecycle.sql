-- 010_lifecycle: archive, delete (tombstones), retention rules, blob garbage collection and
-- withdrawn datasets (API.md "Lifecycle").

-- A version is ready, archived (hidden from lists, never routed or promoted) or deleted (a
-- tombstone: the record, its audit entries and its signature stay; its artifact is gone).
ALTER TABLE versions ADD COLUMN status TEXT NOT NULL DEFAULT 'ready';
ALTER TABLE versions ADD COLUMN archived_at TEXT;
ALTER TABLE versions ADD COLUMN archived_by TEXT;
ALTER TABLE versions ADD COLUMN deleted_at TEXT;
ALTER TABLE versions ADD COLUMN deleted_by TEXT;
ALTER TABLE versions ADD COLUMN deletion_reason TEXT;
CREATE INDEX versions_artifact ON versions(artifact);

-- A blob row outlives its bytes: live (bytes stored), deleting (a collector is removing the
-- bytes: gc_owner, since gc_at_ms) or reclaimed (bytes gone; the row keeps the size and file
-- manifest that tombstones show). last_used_ms moves with every upload of the same bytes, so
-- the grace period counts from the last time anyone sent them.
ALTER TABLE blobs ADD COLUMN state TEXT NOT NULL DEFAULT 'live';
ALTER TABLE blobs ADD COLUMN last_used_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE blobs ADD COLUMN gc_owner TEXT;
ALTER TABLE blobs ADD COLUMN gc_at_ms INTEGER;
UPDATE blobs SET last_used_ms = CAST((julianday(created_at) - 2440587.5) * 86400000 AS INTEGER);

-- An upload committing its bytes pins the digest first (replica = who), so a collector never
-- removes bytes that an upload is putting in place.
CREATE TABLE blob_pins (
    token   TEXT PRIMARY KEY,
    digest  TEXT NOT NULL,
    replica TEXT NOT NULL,
    at_ms   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX blob_pins_digest ON blob_pins(digest);

-- One retention rule per model; last_run_ms makes the periodic run fire once per interval
-- whichever replica leads.
CREATE TABLE retention (
    model_id    INTEGER PRIMARY KEY REFERENCES models(id),
    rule        TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    updated_by  TEXT NOT NULL,
    last_run_ms INTEGER NOT NULL DEFAULT 0
);

-- A withdrawn dataset must no longer be used (licence, privacy).
ALTER TABLE datasets ADD COLUMN withdrawn_at TEXT;
ALTER TABLE datasets ADD COLUMN withdrawn_by TEXT;
ALTER TABLE datasets ADD COLUMN withdrawn_reason TEXT;

-- Cluster-wide periodic jobs (garbage collection): a job runs when a replica moves
-- last_run_ms forward, so it fires once per interval whichever replica leads.
CREATE TABLE jobs (
    name        TEXT PRIMARY KEY,
    last_run_ms INTEGER NOT NULL
);
