-- 006_teams: teams, team- and alias-scoped tokens, model owners, approvers' teams
-- (API.md "Teams"). Existing tokens get no teams and no aliases: they stay global.
CREATE TABLE teams (
    name       TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL
) WITHOUT ROWID;

ALTER TABLE tokens ADD COLUMN teams TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tokens ADD COLUMN aliases TEXT NOT NULL DEFAULT '[]';
ALTER TABLE models ADD COLUMN owners TEXT NOT NULL DEFAULT '[]';
ALTER TABLE promotion_approvals ADD COLUMN teams TEXT NOT NULL DEFAULT '[]';
