-- 021_quotas: storage quotas per team (API.md "Quotas and cost").

-- A team's quota on the unique bytes it keeps: the digests its tokens uploaded (blob_teams)
-- and those its models' live versions cite, each counted once. No row: no quota.
-- alert_pct: the highest threshold (0, 80, 100) already announced, so each crossing is
-- announced once; it falls back when use falls below a threshold.
CREATE TABLE team_quotas (
    team          TEXT PRIMARY KEY,
    storage_bytes BIGINT NOT NULL,
    alert_pct     BIGINT NOT NULL DEFAULT 0,
    updated_at    TEXT NOT NULL,
    updated_by    TEXT NOT NULL
);

-- Bytes an upload in flight reserved for each team of its token before it put them under
-- their digest (pin: its blob_pins token). A hold counts only while its pin exists, so one
-- left by a replica that died goes with the pin that garbage collection clears.
CREATE TABLE quota_holds (
    pin    TEXT NOT NULL,
    team   TEXT NOT NULL,
    digest TEXT NOT NULL,
    size   BIGINT NOT NULL,
    PRIMARY KEY (pin, team)
);
CREATE INDEX quota_holds_team ON quota_holds(team);

CREATE INDEX blob_teams_team ON blob_teams(team);

-- What a smoke test measured of the cost of serving (API.md "Quotas and cost"): requests
-- per second under the test's own load, and the profile's cost per hour over it, per
-- thousand requests. NULL: not measured, or no cost configured for its profile.
ALTER TABLE smoke_tests ADD COLUMN throughput_rps DOUBLE PRECISION;
ALTER TABLE smoke_tests ADD COLUMN cost_per_1k_requests DOUBLE PRECISION;
