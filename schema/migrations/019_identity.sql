-- 019_identity: single sign-on and IdP tokens (API.md "Identity").
-- An IdP group's mapping to roles, teams and aliases; an SSO user's are the union of their
-- groups' (roles a bit mask as in tokens, teams and aliases JSON arrays).
CREATE TABLE identity_groups (
    name       TEXT PRIMARY KEY,
    roles      INTEGER NOT NULL,
    teams      TEXT NOT NULL DEFAULT '[]',
    aliases    TEXT NOT NULL DEFAULT '[]',
    updated_at TEXT NOT NULL,
    updated_by TEXT NOT NULL
);

-- Who published a version: {"kind":"token|sso|trusted","name","issuer","subject","claims"}
-- (JSON), also in its signed statement. NULL for versions from before this migration.
ALTER TABLE versions ADD COLUMN publisher TEXT;

-- The person behind a token an SSO user created (separation of duties compares people):
-- both NULL for tokens of nobody in particular.
ALTER TABLE tokens ADD COLUMN person_issuer TEXT;
ALTER TABLE tokens ADD COLUMN person_subject TEXT;
