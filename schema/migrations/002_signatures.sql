-- 002_signatures: the model-signing bundle of each version, stored at creation
-- and served byte-identical.
CREATE TABLE version_signatures (
    version_id INTEGER PRIMARY KEY REFERENCES versions(id),
    keyid      TEXT NOT NULL,
    bundle     TEXT NOT NULL
);
