-- Response caches kept coherent across replicas without a round trip per read (PostgreSQL;
-- on SQLite the columns stay 0): a replica answers from memory only while it holds a cache
-- lease, renewed with its heartbeat; a write waits until every replica holding one has
-- applied it (cache_seen: every change up to this model_epochs sequence number) or until
-- that lease ran out.
ALTER TABLE replicas ADD COLUMN cache_until_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replicas ADD COLUMN cache_seen INTEGER NOT NULL DEFAULT 0;

-- Which private key the cluster signs with: the newest one activated (a rotation with
-- `modelgated keys rotate --database URL` activates a new one; running replicas follow).
ALTER TABLE signing_keys ADD COLUMN activated_ms INTEGER NOT NULL DEFAULT 0;
