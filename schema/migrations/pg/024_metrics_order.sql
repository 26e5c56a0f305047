-- A version's metrics in the order they came (version_id, then seq): a version read walks
-- this index instead of sorting the version's metrics in a temporary tree on every read.
CREATE INDEX version_metrics_order ON version_metrics(version_id, seq);
