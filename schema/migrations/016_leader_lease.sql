-- The leadership (PostgreSQL; unused on SQLite, where the one process leads): one row, a
-- lease with an expiry on the database's clock, renewed by its holder with its heartbeat
-- and taken by another replica, with the next epoch, once it ran out. Work only the leader
-- does (the rollout clock) commits only while its epoch still holds the lease.
CREATE TABLE leader_lease (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    holder   TEXT NOT NULL,
    epoch    INTEGER NOT NULL,
    until_ms INTEGER NOT NULL
);
