-- Live canary analysis (API.md "Live canary analysis"): every interval in which the leader
-- measured a rolling-out promotion's candidate and baseline on live metrics. The newest 500
-- of a promotion are kept. phase and step_index say which stage of the rollout it judged
-- (a stage ends only after one of its own intervals passed); metrics is the JSON list
-- [{"name","candidate","baseline","verdict","detail"}].
CREATE TABLE promotion_intervals (
    promotion_id TEXT NOT NULL REFERENCES promotions(id),
    seq          BIGINT NOT NULL,
    at           TEXT NOT NULL,
    at_ms        BIGINT NOT NULL,
    phase        TEXT NOT NULL,
    step_index   BIGINT NOT NULL,
    weight       BIGINT NOT NULL,
    verdict      TEXT NOT NULL,
    metrics      TEXT NOT NULL,
    PRIMARY KEY (promotion_id, seq)
);
