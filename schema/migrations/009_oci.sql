-- 009_oci: versions as OCI artifacts (API.md "OCI distribution (read-only)"). A version's
-- image manifest, config and signature referrer are computed once, from what never changes
-- in the version, and served byte-identical ever after: the same version keeps the same
-- manifest digest across restarts, replicas and migrations (modelgated migrate copies this
-- table too).
CREATE TABLE oci_manifests (
    version_id      INTEGER PRIMARY KEY REFERENCES versions(id),
    digest          TEXT NOT NULL,
    manifest        TEXT NOT NULL,
    config_digest   TEXT NOT NULL,
    config          TEXT NOT NULL,
    referrer_digest TEXT,
    referrer        TEXT,
    bundle_digest   TEXT,
    created_at      TEXT NOT NULL
);
CREATE INDEX oci_manifests_digest ON oci_manifests(digest);
CREATE INDEX oci_manifests_config ON oci_manifests(config_digest);
CREATE INDEX oci_manifests_referrer ON oci_manifests(referrer_digest);
CREATE INDEX oci_manifests_bundle ON oci_manifests(bundle_digest);

-- A layer holding one file of an archive is named by that file's sha256.
CREATE INDEX blob_files_sha256 ON blob_files(sha256);
