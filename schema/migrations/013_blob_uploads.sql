-- Uploads in flight to a remote blob backend (s3, oci): one row from before the first byte
-- leaves until the blob row commits (or the upload is aborted cleanly). A row whose replica
-- is gone names leftovers (a multipart upload, a temp object, an upload session) that
-- garbage collection reclaims through the blob layer (store/blob.h, blob_reclaim).
CREATE TABLE blob_uploads (
    id         TEXT PRIMARY KEY,
    backend    TEXT NOT NULL,
    handle     TEXT NOT NULL,
    replica    TEXT NOT NULL,
    started_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX blob_uploads_replica ON blob_uploads (replica);
