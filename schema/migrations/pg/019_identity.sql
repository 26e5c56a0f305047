-- 019_identity: single sign-on and IdP tokens (API.md "Identity").
-- An IdP group's mapping to roles, teams and aliases; an SSO user's are the union of their
-- groups' (roles a bit mask as in tokens, teams and aliases JSON arrays).
CREATE TABLE identity_groups (
    name       TEXT PRIMARY KEY,
    roles      BIGINT NOT NULL,
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

-- Trusted publishers (CI without stored secrets): the whole PUT body as JSON, and its
-- issuer for the exchange's lookup.
CREATE TABLE trusted_publishers (
    name       TEXT PRIMARY KEY,
    issuer     TEXT NOT NULL,
    config     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL
);
CREATE INDEX trusted_publishers_issuer ON trusted_publishers(issuer);

-- Each CI token's jti is exchanged once, across every replica: kept until the token
-- expires (and then purged by later exchanges).
CREATE TABLE exchange_jti (
    issuer     TEXT NOT NULL,
    jti        TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    PRIMARY KEY (issuer, jti)
);

-- Tokens a token exchange issued: short-lived, scoped to models too, and carrying the
-- publisher object versions they create record (JSON).
ALTER TABLE tokens ADD COLUMN expires_ms BIGINT;
ALTER TABLE tokens ADD COLUMN models TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tokens ADD COLUMN publisher TEXT;
-- Expiring tokens (an SSO user's session, a CI run's exchange) carry a person's or a
-- publisher's name, which many of them share: only long-lived tokens' names are unique.
DROP INDEX tokens_live_name;
CREATE UNIQUE INDEX tokens_live_name ON tokens(name) WHERE revoked_at IS NULL AND expires_ms IS NULL;

-- Signed release attestations (API.md "Signed releases"): one Sigstore bundle per alias
-- generation, signed in the generation's transaction; payload_sha256 is what the next
-- generation's attestation names as its predecessor (a chain).
CREATE TABLE alias_attestations (
    alias_id       BIGINT NOT NULL REFERENCES aliases(id),
    generation     BIGINT NOT NULL,
    keyid          TEXT NOT NULL,
    bundle         TEXT NOT NULL,
    payload_sha256 TEXT NOT NULL,
    bundle_sha256  TEXT NOT NULL,
    PRIMARY KEY (alias_id, generation)
);
CREATE INDEX alias_attestations_bundle ON alias_attestations(bundle_sha256);
-- Which versions each signed generation routes: /v2/ lists the attestation as a referrer
-- of each one's manifest.
CREATE TABLE attestation_versions (
    model_id   BIGINT NOT NULL REFERENCES models(id),
    version    BIGINT NOT NULL,
    alias_id   BIGINT NOT NULL REFERENCES aliases(id),
    generation BIGINT NOT NULL,
    PRIMARY KEY (model_id, version, alias_id, generation)
);
-- The OCI referrer manifests made for attestations (their subject is a version's manifest,
-- known once it is first pulled), kept so a digest names the same bytes for ever.
CREATE TABLE oci_attestation_manifests (
    model_id BIGINT NOT NULL REFERENCES models(id),
    digest   TEXT NOT NULL,
    manifest TEXT NOT NULL,
    PRIMARY KEY (model_id, digest)
);

-- Who approved, as a person (the approver's IdP issuer and subject; NULL for a token of
-- nobody in particular): release attestations carry it.
ALTER TABLE promotion_approvals ADD COLUMN issuer TEXT;
ALTER TABLE promotion_approvals ADD COLUMN subject TEXT;

-- Single sign-on in progress (authorization code + PKCE): one row per /ui/sso/login, taken
-- (deleted) by its callback, so state and nonce are single-use on every replica.
CREATE TABLE sso_logins (
    state_hash    TEXT PRIMARY KEY,
    nonce         TEXT NOT NULL,
    code_verifier TEXT NOT NULL,
    created_ms    BIGINT NOT NULL
);
