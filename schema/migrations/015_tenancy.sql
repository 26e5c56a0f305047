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

-- 1 once the last live version citing the digest was deleted: the bytes are gone to
-- everyone but admins until garbage collection takes them, and cited again only after
-- they were uploaded again (which sets it back to 0).
ALTER TABLE blobs ADD COLUMN released INTEGER NOT NULL DEFAULT 0;
