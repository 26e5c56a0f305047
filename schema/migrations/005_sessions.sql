-- 005_sessions: reviewer UI sessions. Only the SHA-256 of the cookie value is
-- stored; a session acts as the token it was opened with (revoking the token
-- ends its sessions).
CREATE TABLE ui_sessions (
    id_hash    BLOB PRIMARY KEY,
    token_id   TEXT NOT NULL REFERENCES tokens(id),
    csrf       TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    last_ms    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX ui_sessions_token ON ui_sessions(token_id);
