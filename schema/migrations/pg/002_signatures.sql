-- PostgreSQL: folded into 001_init.sql (PostgreSQL arrived with the second release,
-- so no database of this engine was ever at an earlier version). Numbered with SQLite's.
SELECT 1;
