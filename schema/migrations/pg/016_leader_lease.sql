-- The leadership: one row, a lease with an expiry on the database's clock, renewed by its
-- holder with its heartbeat and taken by another replica, with the next epoch, once it ran
-- out (instead of a session advisory lock, which a paused or partitioned leader keeps).
-- Work only the leader does (the rollout clock) commits only while its epoch still holds
-- the lease.
CREATE TABLE leader_lease (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    holder   TEXT NOT NULL,
    epoch    BIGINT NOT NULL,
    until_ms BIGINT NOT NULL
);

-- Each claim of a smoke test gets a token of its own: its result counts only while that
-- claim still runs the test (a replica paused past its lease, whose test was queued again
-- and run elsewhere, records nothing when it wakes).
ALTER TABLE smoke_tests ADD COLUMN claim_token TEXT;
