-- 004_runner: smoke tests run by the embedded runner.
-- state: queued, running, passed, failed, error. trigger: route, promotion, periodic, manual.
-- gpu_mode: required, preferred, none (from the alias policy's smoke.gpu).
CREATE TABLE smoke_tests (
    id          TEXT PRIMARY KEY,
    version_id  INTEGER NOT NULL REFERENCES versions(id),
    profile     TEXT,
    state       TEXT NOT NULL,
    trigger     TEXT NOT NULL,
    gpu_mode    TEXT NOT NULL,
    gpu         TEXT,
    created_at  TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    started_at  TEXT,
    finished_at TEXT,
    duration_ms INTEGER,
    exit_code   INTEGER,
    latency     TEXT,
    checks      TEXT NOT NULL DEFAULT '[]',
    log_tail    TEXT NOT NULL DEFAULT '',
    reason      TEXT,
    peak_gpu_memory_mib INTEGER
) WITHOUT ROWID;
CREATE INDEX smoke_tests_version ON smoke_tests(version_id, created_ms);
CREATE INDEX smoke_tests_queue ON smoke_tests(state, created_ms) WHERE state IN ('queued', 'running');
