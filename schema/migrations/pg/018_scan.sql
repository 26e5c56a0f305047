-- Artifact safety scan (API.md "Artifact safety scan"): the report the scanner wrote for a
-- blob at upload (or at its last rescan), and per version the copy taken at its creation
-- (a rescan refreshes the copies of the versions citing the blob).

-- JSON as text: {"verdict":"clean|unsafe|unknown","scanner","findings":[…]}; NULL: stored
-- before the scanner existed, which no policy takes for clean.
ALTER TABLE blobs ADD COLUMN scan TEXT;
ALTER TABLE versions ADD COLUMN scan TEXT;

-- The scan report as an OCI referrer of a version's manifest (GET /v2/{model}/referrers):
-- the referrer manifest and the report blob, content-addressed, kept the first time a
-- referrers list shows them so that they can be fetched by digest (a rescan makes new ones;
-- old ones stay addressable). kind: 'manifest' or 'report'.
CREATE TABLE oci_scan_refs (
    digest     TEXT NOT NULL,
    version_id BIGINT NOT NULL REFERENCES versions(id),
    kind       TEXT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (digest, version_id)
);
