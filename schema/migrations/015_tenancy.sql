-- 015_tenancy: bytes and lineage belong to teams (API.md "Tenancy: bytes and lineage belong
-- to teams").

-- The teams whose tokens uploaded each digest: uploading the bytes proves possession, so a
-- team-scoped token reads (and cites) bytes its teams uploaded, or that a model it can read
-- cites. A global token's upload names no team.
CREATE TABLE blob_teams (
    digest TEXT NOT NULL,
    team   TEXT NOT NULL,
    PRIMARY KEY (digest, team)
) WITHOUT ROWID;
-- The uploads before this release: the teams of the token (by name) that first sent them.
INSERT INTO blob_teams (digest, team)
    SELECT DISTINCT b.digest, j.value FROM blobs b JOIN tokens t ON t.name = b.created_by,
    json_each(t.teams) j;

-- 1 once the last live version citing the digest was deleted: the bytes are gone to
-- everyone but admins until garbage collection takes them, and cited again only after
-- they were uploaded again (which sets it back to 0).
ALTER TABLE blobs ADD COLUMN released INTEGER NOT NULL DEFAULT 0;

-- Dataset records belong to the registering token's teams (owner: a team; '' for a global
-- token's record): one digest may have a record per owner, and a version's lineage and
-- withdrawal flags follow only records owned by its model's owners or global ones. The
-- tables are rebuilt for their new keys; owner comes last, as PostgreSQL's ADD COLUMN puts
-- it (modelgated migrate copies rows by position). Rowid tables: in a WITHOUT ROWID table
-- whose key is not its leading columns, SQLite 3.40's integrity_check reports false NULLs.
CREATE TABLE datasets_owned (
    digest           TEXT NOT NULL,
    name             TEXT NOT NULL,
    uri              TEXT,
    description      TEXT,
    created_at       TEXT NOT NULL,
    created_by       TEXT NOT NULL,
    withdrawn_at     TEXT,
    withdrawn_by     TEXT,
    withdrawn_reason TEXT,
    owner            TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (digest, owner)
);
INSERT INTO datasets_owned SELECT digest, name, uri, description, created_at, created_by,
    withdrawn_at, withdrawn_by, withdrawn_reason, '' FROM datasets;
CREATE TABLE dataset_parents_owned (
    child  TEXT NOT NULL,
    parent TEXT NOT NULL,
    owner  TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (owner, child, parent)
);
INSERT INTO dataset_parents_owned SELECT child, parent, '' FROM dataset_parents;
DROP TABLE dataset_parents;
DROP TABLE datasets;
ALTER TABLE datasets_owned RENAME TO datasets;
ALTER TABLE dataset_parents_owned RENAME TO dataset_parents;
CREATE INDEX dataset_parents_parent ON dataset_parents(parent);
CREATE INDEX dataset_parents_child ON dataset_parents(child);
