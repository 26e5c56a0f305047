-- 015_tenancy: bytes and lineage belong to teams (API.md "Tenancy: bytes and lineage belong
-- to teams").

-- The teams whose tokens uploaded each digest: uploading the bytes proves possession, so a
-- team-scoped token reads (and cites) bytes its teams uploaded, or that a model it can read
-- cites. A global token's upload names no team.
CREATE TABLE blob_teams (
    digest TEXT NOT NULL,
    team   TEXT NOT NULL,
    PRIMARY KEY (digest, team)
);
-- The uploads before this release: the teams of the token (by name) that first sent them.
INSERT INTO blob_teams (digest, team)
    SELECT DISTINCT b.digest, jsonb_array_elements_text(t.teams::jsonb) FROM blobs b
    JOIN tokens t ON t.name = b.created_by;

-- 1 once the last live version citing the digest was deleted: the bytes are gone to
-- everyone but admins until garbage collection takes them, and cited again only after
-- they were uploaded again (which sets it back to 0).
ALTER TABLE blobs ADD COLUMN released BIGINT NOT NULL DEFAULT 0;

-- Dataset records belong to the registering token's teams (owner: a team; '' for a global
-- token's record): one digest may have a record per owner, and a version's lineage and
-- withdrawal flags follow only records owned by its model's owners or global ones.
ALTER TABLE dataset_parents DROP CONSTRAINT dataset_parents_child_fkey;
ALTER TABLE dataset_parents DROP CONSTRAINT dataset_parents_parent_fkey;
ALTER TABLE dataset_parents DROP CONSTRAINT dataset_parents_pkey;
ALTER TABLE datasets DROP CONSTRAINT datasets_pkey;
ALTER TABLE datasets ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE datasets ADD PRIMARY KEY (digest, owner);
ALTER TABLE dataset_parents ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE dataset_parents ADD PRIMARY KEY (owner, child, parent);
CREATE INDEX dataset_parents_child ON dataset_parents(child);
