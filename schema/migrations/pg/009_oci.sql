-- Versions as OCI artifacts: see the SQLite migration of the same number.
CREATE TABLE oci_manifests (
    version_id      BIGINT PRIMARY KEY REFERENCES versions(id),
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
CREATE INDEX blob_files_sha256 ON blob_files(sha256);
