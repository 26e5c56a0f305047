/*
 * store.h - the only door to persistent state: the database (SQLite today,
 * PostgreSQL later) and the content-addressed blob directory.
 *
 * The API is backend-neutral: no SQL, statements or connections cross it.
 * Records come back as jansson objects in the shapes of API.md; every json_t
 * returned through an out-parameter is a NEW reference owned by the caller.
 * json_t arguments are BORROWED.
 *
 * Every mutation runs in one write transaction that also appends its audit
 * entry, so a change and its audit record are committed together or not at
 * all. `actor` is the name of the token making the change.
 *
 * Thread safety: a struct store may be used from any number of threads at
 * once; reads use a small connection pool, writes are serialised.
 *
 * Return values: MG_OK, or an error code with `err` filled (message says
 * what was wrong and what to do). Out-parameters are untouched on failure.
 */
#ifndef STORE_H
#define STORE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../artifact/archive.h"
#include "../artifact/scan.h"
#include "../artifact/sign.h"

struct store;

struct store_options {
    const char *data_dir; /* created (0700) if missing */
    const char *database; /* NULL: SQLite in data_dir; else a PostgreSQL URL, shared by replicas */
    /* Where blob bytes live (API.md "Running"): NULL for file:<data_dir>/blobs, else
     * file:/DIR, s3://bucket/prefix?endpoint=…&region=…&path_style=true or
     * oci://host:port/repository?insecure=true (store/blob.h). */
    const char *blobs;
    const char *blobs_credentials; /* s3 ACCESS:SECRET or oci USER:PASSWORD file, 0600 */
    const char *host_name;         /* this replica's host (gateways' "host"); NULL: gethostname() */
    bool sync_normal;              /* synchronous=NORMAL instead of FULL */
    unsigned read_conns;           /* read connection pool size (>= 1) */
    struct store_archive_limits archive;
    const struct sign_keyring *keys; /* signs new versions; BORROWED, outlives the store */
    /* The safety scan's caps and --scan-allow names (BORROWED, outlive the store); all
     * zero: the defaults. */
    struct art_scan_opts scan;
    /* MODELGATED_TEST_SCAN=skip, bench/scan.sh's reference only: uploads are not scanned,
     * and their report is "unknown" (never clean: the scan gate and pull refuse them). */
    bool scan_skip;
};

/* Open (creating and migrating if needed; processes opening one PostgreSQL
 * database at once migrate it once). A database written by a newer modelgate
 * is refused with MG_EINVAL; with SQLite, a data directory another process
 * has open, with MG_EUNAVAIL; an unreachable PostgreSQL, with MG_EUNAVAIL.
 * Temp files of interrupted uploads are removed. */
enum mg_code store_open(const struct store_options *opt, struct store **out, struct mg_error *err);

/* Close all connections and free; sets *st to NULL. No call may be in flight. */
void store_close(struct store **st);

/* True when the database accepts a write and the blob backend takes writes; else
 * false with err saying which of them failed (err may be NULL). */
bool store_ready(struct store *st, struct mg_error *err);

/* Check a --blobs URL's syntax without opening anything: "file", "s3" or "oci", or
 * NULL with err filled. */
const char *store_blobs_url_kind(const char *url, struct mg_error *err);

/* The blob backend in use: "file", "s3" or "oci". */
const char *store_blobs_kind(const struct store *st);

/* ---- the cluster (several processes on one PostgreSQL database) --------- */

/* A replica not seen for this long is dead: its leases may be taken over. */
#define STORE_REPLICA_DEAD_MS 10000
/* GET /api/v1/cluster lists replicas seen this recently. */
#define STORE_REPLICA_LISTED_MS 30000

/* This process's id among the replicas (16 hex digits, new at every start). */
const char *store_replica_id(const struct store *st);

/*
 * Wake-ups between replicas (PostgreSQL's LISTEN/NOTIFY): a committed outbox row
 * or delivery outcome notifies every replica, so workers and ?wait requests
 * react at once instead of at their next poll (the polling stays, bounding the
 * delay when a notification is lost); a rotation of the cluster's signing key
 * likewise. Blocks up to timeout_ms for notifications on a connection of its
 * own and says in *wake what they were about. The same call keeps this
 * replica's response cache coherent (store_model_epoch): it applies other
 * replicas' changes and acknowledges them. SQLite: sleeps the timeout (one
 * process hears its own changes directly). One caller at a time, in a loop.
 */
struct store_wake {
    bool outbox; /* outbox rows or delivery outcomes changed */
    bool keys;   /* the cluster's signing key changed (store_signing_key_current) */
};
enum mg_code store_wait_change(struct store *st, int timeout_ms, struct store_wake *wake,
                               struct mg_error *err);

/* "sqlite" or "postgresql". */
const char *store_database_kind(const struct store *st);

/* Now, in milliseconds, on the database's clock (PostgreSQL: measured at each
 * heartbeat; SQLite: this host's). Leases and deadlines use it, so every
 * replica means the same instant. */
int64_t store_clock_ms(struct store *st);

/* Record that this process is alive and serves at address; refresh the clock
 * offset and keep or seek the leadership. Call about once a second. */
enum mg_code store_replica_heartbeat(struct store *st, const char *address, const char *version,
                                     struct mg_error *err);

/* The leader lease (PostgreSQL): its length on the database's clock, and how long before
 * its end the holder stops counting itself leader (renewed with every heartbeat). */
#define STORE_LEADER_LEASE_MS 5000
#define STORE_LEADER_MARGIN_MS 1000

/* Whether this process runs the cluster's timers (rollout steps, periodic
 * smoke tests, recovery of dead replicas' work) now. SQLite: always. With
 * PostgreSQL: the holder of the leader lease (one row, with an expiry on the
 * database's clock and an epoch), until STORE_LEADER_MARGIN_MS before the
 * lease ends unless renewed; once it ran out (the holder died, paused or
 * lost the database), another replica takes it at its next heartbeat, with
 * the next epoch. */
bool store_leader(struct store *st);

/* The epoch of the leadership this process holds now, 0 when it does not lead (SQLite: 1).
 * Leader-only work passes it to the commit it leads to (store_promotion_change.
 * leader_epoch), which then holds only while the lease is still that epoch's. */
int64_t store_leader_epoch(struct store *st);

/* A replica that stops cleanly gives its leader lease up (PostgreSQL): another takes it at
 * its next heartbeat instead of when the lease runs out. This process leads no more. */
enum mg_code store_leader_resign(struct store *st, struct mg_error *err);

/* {"replicas":[{"id","address","version","started_at","last_seen","self"}],
 *  "database","blobs","replica","leader"}; replicas seen in the last 30 s. */
enum mg_code store_cluster(struct store *st, json_t **out, struct mg_error *err);

/* The epoch of model's data: it moves with every committed change of the model
 * (its versions, aliases, policies), on any replica; a cached answer about the
 * model built after reading epoch E is current while the epoch is still E. With
 * PostgreSQL, while this replica holds a cache lease (store_cache_leased) the
 * epoch is known here: a write on any replica returns only after every replica
 * holding a lease applied it, or after that lease ran out. Without one, this
 * reads the database (one read shared by the calls waiting for it). */
enum mg_code store_model_epoch(struct store *st, const char *model, uint64_t *epoch,
                               struct mg_error *err);

/* How long a cache lease lasts from its renewal (each heartbeat renews it): the
 * longest a replica that stopped answering (stopped, partitioned) can hold up
 * writes on the others. */
#define STORE_CACHE_LEASE_MS 3000

/* Whether store_model_epoch answers without asking the database now (SQLite:
 * always). */
bool store_cache_leased(struct store *st);

/* This replica answers nothing from a cache (--response-cache off, or it is
 * stopping): it holds no cache lease from now on, so writes on the others do not
 * wait for it. */
void store_cache_off(struct store *st);

/* For /metrics: whether this replica holds a cache lease (false on SQLite); how
 * many writes waited for other replicas holding one to apply them, and the seconds
 * they waited in all. */
void store_cache_counts(struct store *st, bool *leased, uint64_t *waits, double *wait_s);

/* ---- the cluster's signing keys ------------------------------------------ */

/* The private key (PEM, malloc'd into *shared_pem) every replica of the cluster
 * signs with: the first one ever offered, which this call offers (keyid, hint,
 * public_pem, private_pem of this replica's key) when the database has none. */
enum mg_code store_signing_key_share(struct store *st, const char *keyid, const char *hint,
                                     const char *public_pem, const char *private_pem,
                                     char **shared_pem, struct mg_error *err);

/* The key the cluster signs with now (the newest activated): its keyid and its
 * private PEM (malloc'd into *private_pem; the caller cleanses and frees it).
 * MG_ENOTFOUND when the database holds none. */
enum mg_code store_signing_key_current(struct store *st, char keyid[65], char **private_pem,
                                       struct mg_error *err);

/* `modelgated keys rotate --database URL`: make this key (keyid, hint, PEMs of a
 * key just generated) the one the cluster signs with, on a connection of its own
 * (no store: a running replica holds the data directory), audited, and NOTIFY
 * every replica, which follows at once (store_wait_change's wake->keys) or at its
 * next poll. The database must be at this build's schema version. */
enum mg_code store_signing_key_rotate(const char *database, const char *keyid, const char *hint,
                                      const char *public_pem, const char *private_pem,
                                      struct mg_error *err);

/* Publish a key this replica signs with (at every heartbeat). */
enum mg_code store_signing_key_publish(struct store *st, const char *keyid, const char *hint,
                                       const char *public_pem, struct mg_error *err);

/* Every key published in the database, as GET /api/v1/signing-keys answers: "hint" is
 * the bundle's verificationMaterial.publicKey.hint; "active" is true only for signing_keyid
 * (the key the asking replica signs with now; NULL: none). */
enum mg_code store_signing_keys(struct store *st, const char *signing_keyid, json_t **out,
                                struct mg_error *err);

/* The public PEM (malloc'd) of the published key with this hint; MG_ENOTFOUND. */
enum mg_code store_signing_key_by_hint(struct store *st, const char *hint, char **public_pem,
                                       struct mg_error *err);

/* ---- migrating an embedded installation to shared backends ---------------- */

struct store_migrate_options {
    const char *data_dir;    /* the SQLite installation (locked while copying) */
    const char *to_database; /* a PostgreSQL URL */
    const char *to_blobs;    /* a --blobs URL (file:, s3://, oci://), or NULL to leave blobs where
                              * they are */
    const char *to_blobs_credentials; /* its credentials file, or NULL */
    const struct sign_keyring *keys;  /* the installation's keys: public halves published */
};

/*
 * Copy every record (the audit chain included), the public halves of the
 * signing keys and (with to_blobs) every blob, verified, to the shared
 * backends. Resumable: rows and blobs already there are skipped. Fails unless
 * the destination's audit chain verifies afterwards. *summary (NEW):
 * {"tables":{name:{"rows","copied"}},"blobs":{"count","copied"},"audit":{…},
 * "public_keys":N}.
 */
enum mg_code store_migrate(const struct store_migrate_options *o, json_t **summary,
                           struct mg_error *err);

/* Sign new versions with keys from now on (BORROWED, outlives the store). */
void store_set_keys(struct store *st, const struct sign_keyring *keys);

/* Schema version this binary writes (the number of the newest migration). */
int store_schema_version(void);

/* ---- tokens and roles ------------------------------------------------- */

enum store_role {
    STORE_ROLE_ADMIN = 1u << 0,
    STORE_ROLE_PUBLISHER = 1u << 1,
    STORE_ROLE_REVIEWER = 1u << 2,
    STORE_ROLE_DEPLOYER = 1u << 3,
    STORE_ROLE_READER = 1u << 4,
};

/* Bit for a role name, or 0 if unknown. */
unsigned store_role_from_name(const char *name);

/* JSON array of role names for a bit set. NEW reference. */
json_t *store_roles_to_json(unsigned roles);

#define STORE_TOKEN_NAME_MAX 64
#define STORE_METRICS_MAX 1000    /* metrics one version may hold in all (API: 400 beyond) */
#define STORE_TOKEN_SECRET_LEN 47 /* "mgt_" + 43 base64url chars */

#define STORE_ISSUER_MAX 255   /* an IdP's issuer URL */
#define STORE_SUBJECT_MAX 255  /* an IdP's subject ("sub") */
#define STORE_MAX_SCOPES 16    /* teams, or alias patterns, one token may name */
#define STORE_TEAM_NAME_MAX 63 /* ^[a-z0-9][a-z0-9-]{0,62}$ */

struct store_principal {
    char id[24];
    char name[STORE_TOKEN_NAME_MAX + 1];
    unsigned roles;
    /* API.md "Teams": none means global / every alias */
    char teams[STORE_MAX_SCOPES][STORE_TEAM_NAME_MAX + 1];
    size_t nteams;
    char aliases[STORE_MAX_SCOPES][34]; /* alias names, or a prefix and '*' */
    size_t naliases;
    /* The person behind the credential (API.md "Identity"): an IdP's issuer and subject,
     * both "" for a token nobody in particular holds. Separation of duties compares these. */
    char kind[8]; /* "token", "sso" (an IdP token or SSO session), "trusted" */
    char issuer[STORE_ISSUER_MAX + 1];
    char subject[STORE_SUBJECT_MAX + 1];
    /* A token a trusted publisher's exchange issued: the models it may reach (names, or a
     * prefix and '*'; none: every model) and when it stops working (0: never). */
    char models[STORE_MAX_SCOPES][64];
    size_t nmodels;
    int64_t expires_ms;
};

/*
 * Fill who's teams and aliases from the JSON array texts stored with the token (entries
 * that do not fit are dropped, which only narrows nothing: the API caps both at
 * STORE_MAX_SCOPES). Used wherever a principal is read.
 */
void store_principal_scopes(struct store_principal *who, const char *teams_json,
                            const char *aliases_json);

/* ---- teams --------------------------------------------------------------- */

/* Create a team. MG_EINVAL for a bad name (field "name"), MG_ECONFLICT if it exists.
 * *out: {"name","created_at"} (NEW). */
enum mg_code store_team_create(struct store *st, const char *actor, const char *name, json_t **out,
                               struct mg_error *err);

/* {"items":[{"name","created_at"}],"next_page_token":null} (NEW). */
enum mg_code store_team_list(struct store *st, json_t **out, struct mg_error *err);

/* The owning teams of a model (NEW array), MG_ENOTFOUND when the model does not exist. */
enum mg_code store_model_owners(struct store *st, const char *model, json_t **out,
                                struct mg_error *err);

/* Replace a model's owners with `teams` (a JSON array of existing team names, BORROWED);
 * audited. *out: the Model (NEW). MG_EINVAL naming "teams" for an unknown team. */
enum mg_code store_model_set_owners(struct store *st, const char *actor, const char *model,
                                    const json_t *teams, json_t **out, struct mg_error *err);

/*
 * If no token exists at all, create an admin token named "admin" and write
 * its secret to secret_out (NUL-terminated); *created tells whether it did.
 */
enum mg_code store_token_bootstrap(struct store *st, char secret_out[STORE_TOKEN_SECRET_LEN + 1],
                                   bool *created, struct mg_error *err);

/* Create a token; *out = {"id","name","roles","teams","aliases","token","created_at",
 * "created_by"}. Names are unique among live tokens (MG_ECONFLICT). teams (existing team
 * names) and aliases (alias patterns) are JSON arrays, BORROWED, or NULL for none; the
 * caller validated their shape, the store checks that the teams exist (MG_EINVAL, field
 * "teams"). */
enum mg_code store_token_create(struct store *st, const char *actor, const char *name,
                                unsigned roles, const json_t *teams, const json_t *aliases,
                                json_t **out, struct mg_error *err);

/* *out = {"items":[{"id","name","roles","created_at","created_by"}]} (no secrets). */
enum mg_code store_token_list(struct store *st, json_t **out, struct mg_error *err);

/* Revoke: the token stops authenticating at once. */
enum mg_code store_token_delete(struct store *st, const char *actor, const char *id,
                                struct mg_error *err);

/* Look a secret up (by its SHA-256, compared in constant time).
 * MG_EUNAUTH if unknown or revoked; a database failure is its own code
 * (MG_EDB, MG_EUNAVAIL), never MG_EUNAUTH. */
enum mg_code store_token_authenticate(struct store *st, const char *secret, size_t n,
                                      struct store_principal *out);

/* Record the person (an IdP's issuer and subject) a token was created by, so separation
 * of duties follows the person through it. */
enum mg_code store_token_set_person(struct store *st, const char *id, const char *issuer,
                                    const char *subject, struct mg_error *err);

/* ---- identity: IdP groups (API.md "Identity") ------------------------------ */

#define STORE_GROUP_NAME_MAX 128

/* Map an IdP group to roles (bit mask), teams and aliases (JSON arrays, BORROWED, NULL for
 * none; teams must exist: MG_EINVAL naming "teams"). Replaces an existing mapping; audited.
 * *out: {"group","roles","teams","aliases","updated_at","updated_by"} (NEW). */
enum mg_code store_identity_group_put(struct store *st, const char *actor, const char *group,
                                      unsigned roles, const json_t *teams, const json_t *aliases,
                                      json_t **out, struct mg_error *err);

/* {"items":[…as above…]} (NEW), by group name. */
enum mg_code store_identity_group_list(struct store *st, json_t **out, struct mg_error *err);

/* Remove a mapping (MG_ENOTFOUND when there is none); audited. */
enum mg_code store_identity_group_delete(struct store *st, const char *actor, const char *group,
                                         struct mg_error *err);

/* An SSO user's roles, teams and aliases: the union of the mappings of their groups
 * (ngroups names). *mapped counts the groups that have one. A database failure is its own
 * code, never MG_EUNAUTH. */
enum mg_code store_identity_resolve(struct store *st, const char *const *groups, size_t ngroups,
                                    struct store_principal *who, size_t *mapped,
                                    struct mg_error *err);

/* ---- trusted publishing (API.md "Trusted publishing") ------------------------------ */

/* Create or replace a trusted publisher: config is the validated PUT body (BORROWED; its
 * "issuer" is indexed). Audited. *out: config plus "name","created_at","created_by" (NEW). */
enum mg_code store_trusted_publisher_put(struct store *st, const char *actor, const char *name,
                                         const json_t *config, json_t **out, struct mg_error *err);

/* One (MG_ENOTFOUND when none) as above (NEW). */
enum mg_code store_trusted_publisher_get(struct store *st, const char *name, json_t **out,
                                         struct mg_error *err);

/* {"items":[…]} by name (NEW); issuer NULL lists all, else only that issuer's. */
enum mg_code store_trusted_publisher_list(struct store *st, const char *issuer, json_t **out,
                                          struct mg_error *err);

/* Remove one (MG_ENOTFOUND when none); audited. Tokens it issued keep working until they
 * expire. */
enum mg_code store_trusted_publisher_delete(struct store *st, const char *actor, const char *name,
                                            struct mg_error *err);

/* What an accepted token exchange issues. */
struct store_exchange {
    const char *issuer, *jti; /* the CI token's; (issuer, jti) is accepted once */
    int64_t jti_expires_ms;   /* keep the jti until then (the CI token's exp plus leeway) */
    const char *publisher;    /* the trusted publisher's name */
    unsigned roles;
    const json_t *teams, *aliases, *models; /* arrays (BORROWED) or NULL */
    int64_t ttl_ms;
    const char *subject;          /* the CI token's sub (the person for separation of duties) */
    const json_t *publisher_json; /* what versions the token creates record (BORROWED) */
};

/* In one transaction: record the jti (MG_ECONFLICT, field "jti", when it was seen before,
 * on any replica), purge expired ones, and create the short-lived token; audited as
 * token.exchange. *secret_out: the token (NUL-terminated). */
enum mg_code store_token_exchange(struct store *st, const struct store_exchange *x,
                                  char secret_out[STORE_TOKEN_SECRET_LEN + 1],
                                  struct mg_error *err);

/* ---- single sign-on (API.md "Identity") ---------------------------------------------- */

/* Remember a sign-in in progress: state (hashed), nonce and PKCE code verifier. */
enum mg_code store_sso_begin(struct store *st, const char *state, const char *nonce,
                             const char *verifier, struct mg_error *err);

/* Take (and delete: single use) the sign-in of state if it began at most max_age_ms ago.
 * *nonce and *verifier are new strings. MG_EUNAUTH when unknown, used or too old. */
enum mg_code store_sso_take(struct store *st, const char *state, int64_t max_age_ms, char **nonce,
                            char **verifier, struct mg_error *err);

/* A token standing for an SSO user's session: who's name, roles, teams, aliases and person,
 * expiring after ttl_ms. *secret_out: its secret (to open a UI session with). */
enum mg_code store_token_for_person(struct store *st, const struct store_principal *who,
                                    int64_t ttl_ms, char secret_out[STORE_TOKEN_SECRET_LEN + 1],
                                    struct mg_error *err);

/* The publisher object stored with token id (NEW), or *out NULL when it has none. */
enum mg_code store_token_publisher(struct store *st, const char *id, json_t **out,
                                   struct mg_error *err);

/* ---- signed releases (API.md "Signed releases") -------------------------------------- */

/* The Sigstore bundle signing an alias generation (*bundle malloc'd JSON text), MG_ENOTFOUND
 * when there is none (no such alias or generation, or one from before signing began). */
enum mg_code store_alias_attestation(struct store *st, const char *model, const char *alias,
                                     int64_t generation, char **bundle, struct mg_error *err);

/* The signed generations routing a version: [{"alias","generation","bundle_digest",
 * "bundle_size"}] (NEW), by alias and generation. */
enum mg_code store_version_attestations(struct store *st, const char *model, int64_t version,
                                        json_t **out, struct mg_error *err);

/* Keep an attestation's OCI referrer manifest under its digest (kept once: the same digest
 * is the same bytes). */
enum mg_code store_oci_attestation_put(struct store *st, const char *model, const char *digest,
                                       const char *manifest, struct mg_error *err);

/* ---- UI sessions -------------------------------------------------------- */

#define STORE_SESSION_ID_LEN 43 /* base64url of 32 random bytes */
#define STORE_CSRF_LEN 43

/* Open a session for the token `secret` (which must authenticate). Writes the
 * cookie value and CSRF token (NUL-terminated) and the principal. */
enum mg_code store_session_open(struct store *st, const char *secret, size_t n,
                                char id_out[STORE_SESSION_ID_LEN + 1],
                                char csrf_out[STORE_CSRF_LEN + 1], struct store_principal *who,
                                struct mg_error *err);

/* Resolve a cookie value: MG_EUNAUTH when unknown, idle longer than idle_ms,
 * older than max_ms, or its token was revoked; a database failure is its own
 * code. Refreshes last use. */
enum mg_code store_session_check(struct store *st, const char *id, size_t n, int64_t idle_ms,
                                 int64_t max_ms, struct store_principal *who,
                                 char csrf_out[STORE_CSRF_LEN + 1]);

/* End a session (sign out). */
enum mg_code store_session_close(struct store *st, const char *id, size_t n, struct mg_error *err);

/* ---- blobs ------------------------------------------------------------ */

struct store_blob_upload;

/* Start a streamed upload into the blob backend (a temp file, a multipart upload, an
 * upload session); a remote upload is recorded in flight (blob_uploads) first.
 * MG_EUNAVAIL when the backend cannot be reached. */
enum mg_code store_blob_upload_begin(struct store *st, uint64_t max_bytes,
                                     struct store_blob_upload **out, struct mg_error *err);

/* The same, for bytes declared to hash to expected ("sha256:<hex>"): a backend may
 * write them straight under that name (still only visible after commit checked
 * them), and a blob stored already is only hashed, not stored again. */
enum mg_code store_blob_upload_begin_digest(struct store *st, uint64_t max_bytes,
                                            const char *expected, struct store_blob_upload **out,
                                            struct mg_error *err);

/* Append bytes (hashed as they are written). MG_ETOOBIG past max_bytes,
 * MG_ENOSPC when the disk is full. */
enum mg_code store_blob_upload_write(struct store_blob_upload *up, const void *p, size_t n,
                                     struct mg_error *err);

/*
 * Finish: fsync, check `expected` ("sha256:<hex>" or NULL; mismatch →
 * MG_EDIGEST and nothing kept), inspect archives, rename into place, fsync
 * the directory, then commit the row. *created is false when the blob was
 * already stored. *blob = {"digest","size","media_type","files","formats"}. A malformed
 * weight header (artifact/introspect.h) is MG_EINVAL naming the member and the offset.
 * Always consumes *up (sets it to NULL).
 */
enum mg_code store_blob_upload_commit(struct store_blob_upload **up, const char *actor,
                                      const char *expected, json_t **blob, bool *created,
                                      struct mg_error *err);

/* Drop an unfinished upload and what the backend holds of it (a remote leftover the
 * backend would not remove stays named by its blob_uploads row). Sets *up to NULL. */
void store_blob_upload_abort(struct store_blob_upload **up);

/* {"digest","size","media_type","files","created_at","created_by"}; MG_ENOTFOUND. */
enum mg_code store_blob_get(struct store *st, const char *digest, json_t **out,
                            struct mg_error *err);

/*
 * What the upload read from the blob's weight headers (artifact/introspect.h): *out NEW
 * introspection object, or NULL when it held no known format (or was uploaded before
 * introspection existed). MG_EINVAL (field "artifact") when the blob does not exist.
 */
enum mg_code store_blob_introspection(struct store *st, const char *digest, json_t **out,
                                      struct mg_error *err);

/*
 * The safety scan of a blob (artifact/scan.h), taken at upload: *out NEW report object, or
 * NULL when the blob was stored before the scanner existed. MG_EINVAL (field "artifact")
 * when the blob does not exist.
 */
enum mg_code store_blob_scan(struct store *st, const char *digest, json_t **out,
                             struct mg_error *err);

/*
 * Scan a stored blob again (after an allowlist change): its bytes are copied to a local
 * file (checked against the digest) and scanned; the blob's report and the copies of every
 * version citing it are replaced, and the rescan is audited ("blob.rescan"). *out NEW
 * report. MG_ENOTFOUND when the blob does not exist.
 */
enum mg_code store_blob_rescan(struct store *st, const char *actor, const char *digest,
                               json_t **out, struct mg_error *err);

/*
 * The background rescan after an upgrade (server/lifecycle.c): live blobs stored before the
 * scanner existed have no report, which no policy takes for clean.
 * store_scan_unscanned_count: how many there are (/metrics). store_scan_unscanned: up to
 * `limit` of their digests greater than `after` ("" from the start), in digest order (*out
 * NEW array of strings). store_blob_scan_backfill: what store_blob_rescan does for one of
 * them, as leader-only work: the report is recorded (audited "blob.rescan" by `actor`, and
 * copied into the versions citing it) only while this replica still leads at leader_epoch
 * (> 0; else MG_EUNAVAIL and nothing changes, as for store_job_claim) and only if the blob
 * still has none; *out NEW report when recorded, NULL when not (a rescan by hand was first,
 * or the blob went). Errors: as store_blob_rescan.
 */
enum mg_code store_scan_unscanned_count(struct store *st, int64_t *n, struct mg_error *err);
enum mg_code store_scan_unscanned(struct store *st, const char *after, int64_t limit, json_t **out,
                                  struct mg_error *err);
enum mg_code store_blob_scan_backfill(struct store *st, int64_t leader_epoch, const char *actor,
                                      const char *digest, json_t **out, struct mg_error *err);

/*
 * The scan report as an OCI referrer (API.md "Artifact safety scan"): remember a document
 * (kind "manifest": the referrer manifest; "report": the report blob) of version `version`
 * under its digest (idempotent); find one by digest among the model's live versions
 * (*body malloc'd; MG_ENOTFOUND when none).
 */
enum mg_code store_oci_scan_put(struct store *st, const char *model, int64_t version,
                                const char *digest, const char *kind, const char *body,
                                struct mg_error *err);
enum mg_code store_oci_scan_find(struct store *st, const char *model, const char *digest,
                                 const char *kind, char **body, struct mg_error *err);

/* Findings the scans of this process produced, per rule (art_scan_rules' order). */
void store_scan_totals(struct store *st, uint64_t out[ART_SCAN_NRULES]);

/* file: backend only: open a stored blob's file; the caller closes *fd. MG_EINVAL
 * for a remote backend (use store_blob_read_open). */
enum mg_code store_blob_open(struct store *st, const char *digest, int *fd, uint64_t *size,
                             struct mg_error *err);

/*
 * Reading blobs whatever the backend: bytes [off, off+len) of a stored blob (the
 * caller knows its size from store_blob_get). The reader is store/blob.h's:
 *   blob_reader_take_fd(r, &offset)  a descriptor to sendfile from (file:), else -1;
 *   blob_reader_read(r, buf, n, &got, &would_block, wake, arg, err)  streamed bytes
 *     (got 0 at the end); with wake given it never waits: would_block says no byte
 *     is ready and wake(arg) is called once, from another thread, when one is;
 *   blob_reader_close(&r).
 */
struct blob_reader;
enum mg_code store_blob_read_open(struct store *st, const char *digest, uint64_t off, uint64_t len,
                                  struct blob_reader **out, struct mg_error *err);
int blob_reader_take_fd(struct blob_reader *r, uint64_t *offset);
enum mg_code blob_reader_read(struct blob_reader *r, void *buf, size_t n, size_t *got,
                              bool *would_block, void (*wake)(void *arg), void *arg,
                              struct mg_error *err);
void blob_reader_close(struct blob_reader **r);

/* A URL that serves the blob to anyone for ttl_s seconds (s3 presigned GET);
 * MG_EINVAL for backends without one. *url malloc'd. */
enum mg_code store_blob_presign(struct store *st, const char *digest, unsigned ttl_s, char **url,
                                struct mg_error *err);

/* Copy a stored blob of `size` bytes into fd, checking its digest (MG_EIO when the
 * backend's bytes no longer match). */
enum mg_code store_blob_copy_to_fd(struct store *st, const char *digest, uint64_t size, int fd,
                                   struct mg_error *err);

/*
 * Lay a blob out in dest (an existing empty directory): an archive is
 * extracted safely (store_archive_extract), any other blob is copied to
 * dest/<single_name>. Checks the file's bytes against the digest as it goes
 * (MG_EIO on a mismatch: the blob file was altered on disk).
 */
enum mg_code store_blob_materialize(struct store *st, const char *digest, const char *dest,
                                    const char *single_name, struct mg_error *err);

/* Tokens of these teams uploaded digest (API.md "Tenancy"): possession, recorded once per
 * team. No teams (a global token): nothing to record. */
enum mg_code store_blob_claim(struct store *st, const char *digest, const char *const *teams,
                              size_t nteams, struct mg_error *err);

/*
 * Storage quotas per team (API.md "Quotas and cost"). store_quota_set: bytes (NULL: remove
 * the quota) for an existing team (MG_ENOTFOUND otherwise), audited as team.quota;
 * store_quota_get: *out NEW {"team","storage_bytes"|null,"used_bytes"}. Use counts the
 * unique bytes the team keeps: uploaded by its tokens or cited by its models' live
 * versions, until garbage collection reclaims them, plus uploads in flight.
 */
enum mg_code store_quota_set(struct store *st, const char *actor, const char *team,
                             const int64_t *bytes, json_t **out, struct mg_error *err);
enum mg_code store_quota_get(struct store *st, const char *team, json_t **out,
                             struct mg_error *err);

/*
 * What each team (by_model false) or model keeps and spends (API.md "Quotas and cost"):
 * *out NEW {"by","items":[…]}; a team item {"team","storage_bytes" (its use, as above),
 * "quota_bytes"|null,"versions" (not deleted, of the models it owns),"smoke_seconds",
 * "smoke_gpu_seconds"}; a model item {"model","owners","storage_bytes" (unique bytes its
 * live versions cite),"versions","smoke_seconds","smoke_gpu_seconds"}. Every team or model.
 */
enum mg_code store_usage(struct store *st, bool by_model, json_t **out, struct mg_error *err);

/* Teams an upload counts for (the uploading token's; none: a global token), copied; call
 * before store_blob_upload_commit, which then refuses bytes that would take one of them past
 * its quota (MG_EQUOTA) before putting them under their digest, and records the teams as
 * the bytes' holders (store_blob_claim) in the transaction that commits the row. */
void store_blob_upload_teams(struct store_blob_upload *up, const char *const *teams, size_t nteams);

/* Who holds the live blob digest: *out NEW {"uploaders":[team],"citers":[[owner]] (the
 * owners of each model with a version, not deleted, citing it), "released":bool (no live
 * version cites it any more since one was deleted, and it was not uploaded again)}.
 * MG_ENOTFOUND when no live blob has that digest. */
enum mg_code store_blob_holders(struct store *st, const char *digest, json_t **out,
                                struct mg_error *err);

/* ---- models ----------------------------------------------------------- */

struct store_page {
    unsigned limit;         /* 1..1000 */
    const char *page_token; /* from a previous next_page_token, or NULL */
};

/* req: {"name","description"?,"tags"?,"readme"?,"metric_directions"?} already validated
 * for types and name. MG_ECONFLICT if it exists. *out = Model (with "readme"). */
enum mg_code store_model_create(struct store *st, const char *actor, const json_t *req,
                                json_t **out, struct mg_error *err);

enum mg_code store_model_get(struct store *st, const char *name, json_t **out,
                             struct mg_error *err);

/* q: substring of the name, or NULL. *out = {"items":[Model],"next_page_token"}; list
 * items leave out "readme". */
enum mg_code store_model_list(struct store *st, const char *q, const struct store_page *page,
                              json_t **out, struct mg_error *err);

/* patch: {"description"?,"tags"?,"readme"?,"metric_directions"?} validated; each given
 * member replaces the stored one. */
enum mg_code store_model_patch(struct store *st, const char *actor, const char *name,
                               const json_t *patch, json_t **out, struct mg_error *err);

/* ---- versions --------------------------------------------------------- */

/* req: a validated VersionCreate. The artifact blob must exist (MG_EINVAL,
 * field "artifact"). req may also carry "introspection" (what the server read from the
 * blob) and "io_schema" (validated), which are kept as given. *out = Version. */
enum mg_code store_version_create(struct store *st, const char *actor, const char *model,
                                  const json_t *req, json_t **out, struct mg_error *err);

enum mg_code store_version_get(struct store *st, const char *model, int64_t version, json_t **out,
                               struct mg_error *err);

/* What a deployer needs of a version, without its lineage, metrics or
 * params: {"artifact": digest, "image": image or null}. MG_ENOTFOUND when
 * the model or version does not exist. */
enum mg_code store_version_brief(struct store *st, const char *model, int64_t version, json_t **out,
                                 struct mg_error *err);

/* How many ?tag= and how many ?metric= filters one listing takes. */
#define STORE_VERSION_FILTERS_MAX 4

/* Every filter given must hold (AND); unused slots have key / name NULL. */
struct store_version_filter {
    struct {
        const char *key; /* ?tag=k:v */
        const char *value;
    } tags[STORE_VERSION_FILTERS_MAX];
    const char *dataset; /* ?dataset=<digest>, direct use */
    struct {
        const char *name; /* ?metric=name<op>value */
        const char *op;   /* ">=", ">", "<=", "<", "=" */
        double value;
    } metrics[STORE_VERSION_FILTERS_MAX];
    const char *status; /* ?status=: "ready", "archived", "deleted", or NULL for all */
};

/* Newest first. *out = {"items":[Version],"next_page_token"}. */
enum mg_code store_version_list(struct store *st, const char *model,
                                const struct store_version_filter *f, const struct store_page *page,
                                json_t **out, struct mg_error *err);

/* patch: {"description"?,"tags"?} validated. */
enum mg_code store_version_patch(struct store *st, const char *actor, const char *model,
                                 int64_t version, const json_t *patch, json_t **out,
                                 struct mg_error *err);

/* metrics: {name: finite number}. Names already present with the same value are
 * accepted unchanged; a different value → MG_ECONFLICT, nothing written. */
enum mg_code store_version_add_metrics(struct store *st, const char *actor, const char *model,
                                       int64_t version, const json_t *metrics, json_t **out,
                                       struct mg_error *err);

/* *out = {"items":[{"path","size","digest"}]} of the version's artifact. */
enum mg_code store_version_files(struct store *st, const char *model, int64_t version, json_t **out,
                                 struct mg_error *err);

/* The version's model-signing bundle, exactly as stored (malloc'd text). */
enum mg_code store_version_signature(struct store *st, const char *model, int64_t version,
                                     char **bundle, size_t *len, struct mg_error *err);

/* ---- versions as OCI artifacts (API.md "OCI distribution (read-only)") --- */

/*
 * The OCI documents kept for a version (computed once by the server with
 * artifact/modelpack.h, then served byte-identical for ever):
 * {"version","digest","manifest","config_digest","config","referrer_digest","referrer",
 *  "bundle_digest"}, the documents as JSON strings of their exact bytes, the referrer
 * members null when the version is unsigned. MG_OK with *out NULL when none is kept yet;
 * MG_ENOTFOUND when the model or version does not exist.
 */
enum mg_code store_oci_get(struct store *st, const char *model, int64_t version, json_t **out,
                           struct mg_error *err);

/*
 * Keep docs (that shape; "version" ignored; BORROWED) as the version's documents unless some
 * are kept already (another request or replica was first). Either way *out (NEW) is what is
 * kept now, which every later read returns. Derived data, readable by whoever reads the
 * version: not audited, and no model epoch moves.
 */
enum mg_code store_oci_put(struct store *st, const char *model, int64_t version, const json_t *docs,
                           json_t **out, struct mg_error *err);

/*
 * What `digest` names among model's versions, the first of (each NEW, with "kind"):
 *   "manifest" | "referrer" | "config" | "bundle": a version's kept documents (the
 *        store_oci_get shape) hold it;
 *   "artifact": {"version","size","media_type"}, a version's whole artifact;
 *   "file": {"version","artifact","path","size"}, a regular file of a version's archive.
 * MG_ENOTFOUND with field "model" when the model does not exist, without a field when
 * nothing of the model has the digest; MG_EINVAL for a malformed digest.
 */
enum mg_code store_oci_find(struct store *st, const char *model, const char *digest, json_t **out,
                            struct mg_error *err);

/* ---- datasets --------------------------------------------------------- */

/* req validated: {"digest","name","uri"?,"parents"?,"description"?}. Parents
 * must be registered. *created false when an identical record existed;
 * MG_ECONFLICT when it differs. */
enum mg_code store_dataset_create(struct store *st, const char *actor, const json_t *owners,
                                  const json_t *req, json_t **out, bool *created,
                                  struct mg_error *err);

/*
 * Dataset records belong to teams (API.md "Tenancy"). owners, on create: the owners the
 * record is registered for, one record each (the token's teams, or [""] for a global
 * token); its parents must be records the owner sees (its own or global ones; a global
 * registration may name any). owners, on reads: the owners whose records the reader sees
 * (its teams and ""), or NULL for every record; a team's own record is shown before a
 * global one.
 */
enum mg_code store_dataset_get(struct store *st, const json_t *owners, const char *digest,
                               json_t **out, struct mg_error *err);

/* Versions that used the dataset directly or through any descendant (following the
 * derivations of records the reader sees):
 * {"items":[{"model","version","role","via":[digest…],"_owners":[team]}]}; `via` is the
 * path of descendant digests from `digest` (exclusive) to the one the version used;
 * _owners are its model's (for the caller to filter by, then drop). */
enum mg_code store_dataset_versions(struct store *st, const json_t *owners, const char *digest,
                                    json_t **out, struct mg_error *err);

/* Mark a dataset withdrawn (API.md "Lifecycle"): every version trained on it, directly or
 * through derived data, then shows it in "withdrawn_datasets". Audited with the versions it
 * marks. A dataset withdrawn before keeps its first withdrawal (*changed false).
 * MG_ENOTFOUND for an unregistered digest. *out: the Dataset (NEW). */
enum mg_code store_dataset_withdraw(struct store *st, const char *actor, const char *digest,
                                    const char *reason, json_t **out, bool *changed,
                                    struct mg_error *err);

/* ---- lifecycle: archive, delete, retention, usage ------------------------ */

/*
 * What lifecycle decisions about a model need, read in one snapshot (*out NEW):
 * {"versions":[{"version","status","created_at"}] (newest first),
 *  "promotions":[{"id","alias","version"}] (active ones),
 *  "aliases":[{"alias", …store_alias_facts…}] (every alias, deleted ones too)}.
 */
enum mg_code store_lifecycle_facts(struct store *st, const char *model, json_t **out,
                                   struct mg_error *err);

/* A status change of one or more versions, decided on store_lifecycle_facts. */
struct store_status_change {
    const char *model;
    const int64_t *versions;
    size_t n;
    const char *status;         /* "archived", "ready" (unarchive) or "deleted" */
    const char *reason;         /* the deletion reason, or NULL */
    const json_t *generations;  /* {alias: generation} of every alias the decision saw */
    const char *action;         /* the audit action: version.archive, retention.run, … */
    const json_t *audit_detail; /* more audit detail (BORROWED) or NULL */
};

/*
 * Commit a status change in one transaction with its audit entry: one entry
 * naming the version when n == 1 and audit_detail is NULL, else one for the
 * model listing every version. MG_ESTALE (nothing changed) when an alias of
 * the model moved past the generation the decision saw, a promotion of one of
 * the versions began, or a version's status is not what the change expects
 * (archive: ready; unarchive: archived; delete: not deleted).
 */
enum mg_code store_version_set_status(struct store *st, const char *actor,
                                      const struct store_status_change *ch, struct mg_error *err);

/* {"<n>": "archived"|"deleted"} of the model's versions that are not ready (*out NEW). */
enum mg_code store_versions_unavailable(struct store *st, const char *model, json_t **out,
                                        struct mg_error *err);

/* A model's retention rule (validated by gates/lifecycle.c), audited. */
enum mg_code store_retention_put(struct store *st, const char *actor, const char *model,
                                 const json_t *rule, struct mg_error *err);

/* The rule, or json null when the model has none (*out NEW). MG_ENOTFOUND: no model. */
enum mg_code store_retention_get(struct store *st, const char *model, json_t **out,
                                 struct mg_error *err);

/* Claim the models whose rule last ran at least interval_ms before now_ms (at most 100):
 * their last run becomes now_ms, so each is run once per interval whichever replica asks.
 * *models: JSON array of model names (NEW). leader_epoch > 0: claimed only while this
 * replica still holds the leader lease at that epoch, else MG_EUNAVAIL (store_release_commit). */
enum mg_code store_retention_claim(struct store *st, int64_t leader_epoch, int64_t now_ms,
                                   int64_t interval_ms, json_t **models, struct mg_error *err);

/* {"versions":{"ready","archived","deleted"},"bytes","bytes_unique"} (NEW): bytes of the
 * stored blobs the model's versions (not deleted) reference; unique: those no other
 * model's versions reference. */
enum mg_code store_model_usage(struct store *st, const char *model, json_t **out,
                               struct mg_error *err);

/* Bytes the deletion of these versions would free: the live blobs they reference that no
 * other version (not deleted) and no dataset holds. */
enum mg_code store_bytes_reclaimable(struct store *st, const char *model, const int64_t *versions,
                                     size_t n, int64_t *bytes, struct mg_error *err);

/* Claim a cluster-wide periodic job: *claimed when it last ran at least interval_ms before
 * now_ms (its last run becomes now_ms), so it runs once per interval on one replica.
 * leader_epoch: as for store_retention_claim. */
enum mg_code store_job_claim(struct store *st, const char *job, int64_t leader_epoch,
                             int64_t now_ms, int64_t interval_ms, bool *claimed,
                             struct mg_error *err);

struct store_gc_report {
    int64_t blobs;     /* blobs whose bytes were removed (dry run: would be) */
    int64_t bytes;     /* their bytes */
    int64_t failed;    /* blobs the backend would not remove now (left for the next run) */
    int64_t leftovers; /* leftovers of dead uploads removed (temp files, multipart uploads,
                        * temp objects, upload sessions) */
    /* Called (when set) once a batch is marked 'deleting' and before its bytes go: the
     * crash tests die there. */
    void (*after_mark)(void *arg);
    void *arg;
};

/*
 * Garbage-collect blobs that no version (not deleted), no dataset (not withdrawn) and no
 * upload in flight references, and that nobody has uploaded for grace_ms; then the leftovers
 * of uploads that died (older than grace_ms, of no live replica). A dry run only counts
 * blobs. rep's hook is read; its figures are written. A run that removes anything is audited
 * ("blob.gc") with the digests it removed. Safe against concurrent uploads of the same bytes and
 * against a kill at any point (the next run finishes what a dead one began).
 */
enum mg_code store_gc(struct store *st, const char *actor, int64_t grace_ms, bool dry_run,
                      struct store_gc_report *rep, struct mg_error *err);

/* Bytes and count of every stored blob (for /metrics). */
enum mg_code store_storage_bytes(struct store *st, int64_t *bytes, int64_t *blobs,
                                 struct mg_error *err);

/* ---- aliases, policies, promotions ------------------------------------ */

/* Alias (API.md shape): {"model","alias","generation","routes":[{"version","weight",
 * "artifact","image"}],"match":[{"header","value","version","artifact","image"}],
 * "shadow":{"version","percent","artifact","image"}|null,"protected","promotion",
 * "last_known_good"?,"updated_at","deliveries"}. last_known_good is left for the caller
 * (a decision, gates/).
 * MG_ENOTFOUND when the alias does not exist or was deleted. */
enum mg_code store_alias_get(struct store *st, const char *model, const char *alias, json_t **out,
                             struct mg_error *err);

/* {"items":[Alias]} of a model's live aliases. */
enum mg_code store_alias_list(struct store *st, const char *model, json_t **out,
                              struct mg_error *err);

/* {"items":[{"generation","routes","match","shadow","at","by","reason","promotion","kind"}],
 *  "next_page_token"}, newest first. */
enum mg_code store_alias_history(struct store *st, const char *model, const char *alias,
                                 const struct store_page *page, json_t **out, struct mg_error *err);

/*
 * What decisions about an alias need, read in one snapshot:
 * {"exists","deleted","generation","routes","match","shadow","protected","promotion",
 *  "history":[{"generation","kind","routes","match","shadow","at"}] (newest first, complete),
 *  "bad":[{"version","generation"}]}. The model must exist (MG_ENOTFOUND); a missing alias
 * gives exists:false, generation 0.
 */
enum mg_code store_alias_facts(struct store *st, const char *model, const char *alias, json_t **out,
                               struct mg_error *err);

/*
 * store_alias_facts, and in the same read transaction (one snapshot, one BEGIN) the
 * store_version_brief of the version pick(facts, arg) names. The facts are what an LKG
 * choice reads: exists, deleted, generation, history, bad, unavailable; the alias's own
 * routes and match are [], shadow and promotion null, protected false (not read; use
 * store_alias_facts to decide a change). *facts NEW on MG_OK; *version
 * is pick's answer, and *brief (NEW) is loaded only when that is not 0. A missing version
 * is MG_ENOTFOUND, as from store_version_brief. pick must not keep facts.
 */
enum mg_code store_alias_facts_pick(struct store *st, const char *model, const char *alias,
                                    int64_t (*pick)(const json_t *facts, void *arg), void *arg,
                                    json_t **facts, int64_t *version, json_t **brief,
                                    struct mg_error *err);

/* One change to an alias, decided by the caller on the state it read. */
struct store_alias_change {
    const char *model;
    const char *alias;
    int64_t expected_generation; /* the generation the decision was made on */
    const json_t *routes;        /* [{"version","weight"}], [] when deleting */
    const json_t *match;         /* [{"header","value","version"}] validated, or NULL: none */
    const json_t *shadow;        /* {"version","percent"} validated, or NULL/null: none */
    const char *kind;            /* set, step, promoted, rollback, abort, delete */
    const char *reason;          /* may be NULL */
    const char *promotion;       /* promotion id, or NULL */
    int64_t mark_bad;            /* version to mark bad for the alias, 0 for none */
    bool require_unprotected;    /* MG_EPROTECTED when a policy protects the alias */
    /* Gateway object names this change uses: [{"gateway","name","scope":"alias"|"model"}]
     * (NULL: none). Each is claimed for (model, alias) — or for the model alone with scope
     * "model" — in the same transaction; one another alias already holds → MG_ECONFLICT
     * naming it, and nothing changes. */
    const json_t *names;
    /* A release event behind the change ("analysis.failed", ...) that gateways are told
     * about (the outbox payload's "event"), or NULL. */
    const char *event_type, *event_detail;
};

/* One change to a promotion, decided on the revision it read. */
struct store_promotion_change {
    const char *id;
    int64_t expected_rev;
    const char *state;
    const char *phase; /* rollout phase: shadow, internal, steps; NULL before the rollout */
    int step_index;
    int weight;
    int64_t next_step_at;                  /* ms since epoch, 0 for none */
    const json_t *gates;                   /* new gate list, or NULL to keep */
    const char *event_type, *event_detail; /* appended when event_type != NULL */
    const char *approval_by, *approval_decision, *approval_comment; /* when approval_by */
    const char *approval_teams; /* the decider's teams, JSON array text, or NULL for none */
    const char *approval_issuer, *approval_subject; /* the decider as a person, or ""/NULL */
    /* > 0: leader-only work (the rollout clock), decided under this leader epoch
     * (store_leader_epoch): with PostgreSQL it commits only while this replica still holds
     * the leader lease at that epoch, else MG_EUNAVAIL and nothing changes. */
    int64_t leader_epoch;
};

/*
 * Commit an alias change and/or a promotion change in one transaction, with
 * the alias history, an outbox row per gateway that hears the alias, and the
 * audit entry. MG_ESTALE when expected_generation or expected_rev no
 * longer hold (someone else changed it: read again and decide again);
 * MG_ECONFLICT when the approver already decided. *alias_out (may be NULL) receives the
 * alias after the change.
 */
enum mg_code store_release_commit(struct store *st, const char *actor,
                                  const struct store_alias_change *a,
                                  const struct store_promotion_change *p, json_t **alias_out,
                                  struct mg_error *err);

/* Policies: the canonical policy JSON (validated by gates/). */
enum mg_code store_policy_put(struct store *st, const char *actor, const char *model,
                              const char *alias, const json_t *policy, json_t **out,
                              struct mg_error *err);
enum mg_code store_policy_get(struct store *st, const char *model, const char *alias, json_t **out,
                              struct mg_error *err);
enum mg_code store_policy_delete(struct store *st, const char *actor, const char *model,
                                 const char *alias, struct mg_error *err);

/*
 * Create a promotion. rec: {"id","model","alias","version","baseline_version",
 * "state","reason","policy","gates","step_index","weight","next_step_at_ms"}.
 * The first event is recorded; `a` (may be NULL) is applied in the same
 * transaction (the first rollout step when no gate waits). MG_EINPROGRESS
 * when the alias already has an active promotion.
 */
/* rec may carry "_smoke_gpu" (required|preferred|none): the candidate's smoke test is then
 * queued in the same transaction, and "_creator_issuer"/"_creator_subject": the creator as a
 * person, read back as "_creator":{"issuer","subject"}. */
enum mg_code store_promotion_create(struct store *st, const char *actor, const json_t *rec,
                                    const char *event_type, const char *event_detail,
                                    const struct store_alias_change *a, json_t **out,
                                    struct mg_error *err);

/* Promotion (API.md shape) plus "_rev" and "_next_step_at_ms" for callers
 * that change it (strip them before replying). */
enum mg_code store_promotion_get(struct store *st, const char *id, json_t **out,
                                 struct mg_error *err);

/* Newest first; filters may be NULL. */
enum mg_code store_promotion_list(struct store *st, const char *state, const char *model,
                                  const char *alias, const struct store_page *page, json_t **out,
                                  struct mg_error *err);

/* Ids of promotions that need the clock: rolling out with a step due at or
 * before now_ms, and all evaluating ones (they wait on the runner).
 * {"due":[id…],"evaluating":[id…],"next_at_ms":earliest future step or 0}. */
enum mg_code store_promotion_pending(struct store *st, int64_t now_ms, json_t **out,
                                     struct mg_error *err);

/* ---- live canary analysis ---------------------------------------------- */

#define STORE_INTERVALS_KEPT 500 /* per promotion, the newest */

/* One analysis interval of a promotion (strings BORROWED). */
struct store_interval {
    const char *promotion;
    int64_t at_ms;         /* the instant both versions were measured at */
    int64_t not_before_ms; /* record it only if none of the promotion is newer than this
                            * (another replica measured the same interval) */
    const char *phase;     /* shadow, internal, steps */
    int step_index;
    int weight;
    const char *verdict;   /* passed, failed, inconclusive */
    const json_t *metrics; /* [{"name","candidate","baseline","verdict","detail"}] */
    int64_t leader_epoch;  /* > 0: recorded only while this replica leads at this epoch
                            * (store_promotion_change.leader_epoch), else MG_EUNAVAIL */
};

/* Append an interval and drop those past the newest STORE_INTERVALS_KEPT. *recorded false
 * (MG_OK) when a newer one was there already. */
enum mg_code store_interval_record(struct store *st, const struct store_interval *in,
                                   bool *recorded, struct mg_error *err);

/* The newest `limit` intervals of a promotion, newest first (*out NEW):
 * [{"seq","at","_at_ms","phase","step_index","weight","verdict","metrics"}]; "at" is when
 * it was recorded (this host's clock, like events), _at_ms the instant measured. */
enum mg_code store_intervals_list(struct store *st, const char *promotion, size_t limit,
                                  json_t **out, struct mg_error *err);

/* Which of these dataset digests are registered for model (a global record, or one its
 * owners registered): *unregistered gets the count of those that are not and *first the
 * first of them (NEW json string or NULL). */
enum mg_code store_datasets_unregistered(struct store *st, const char *model, const json_t *digests,
                                         size_t *unregistered, json_t **first,
                                         struct mg_error *err);

/* ---- gateways and the outbox ------------------------------------------ */

/*
 * Create or replace a gateway. config is the kind's settings without the
 * secret (validated by the caller); models/aliases are JSON arrays or NULL
 * (all). Clears a disabled gateway's reason. The gateway is given the
 * current state of every live alias it hears, in the same transaction.
 * *out is the Gateway; *created tells 201 from 200. The built-in "runner"
 * cannot be replaced (MG_ECONFLICT).
 */
enum mg_code store_gateway_put(struct store *st, const char *actor, const char *name,
                               const char *kind, const json_t *config, const char *secret,
                               const json_t *models, const json_t *aliases, json_t **out,
                               bool *created, struct mg_error *err);

/* Gateway: {"name","kind","config","models","aliases","disabled","disabled_reason",
 * "created_at","updated_at","deliveries":[{"model","alias","generation","state",
 * "attempts","last_error","next_attempt_at","acked_at"}]} — never the secret. */
enum mg_code store_gateway_get(struct store *st, const char *name, json_t **out,
                               struct mg_error *err);
enum mg_code store_gateway_list(struct store *st, json_t **out, struct mg_error *err);

/* Every gateway's {"name","kind","config","models","aliases","disabled"} (no deliveries, no
 * secret): what deciding which gateways hear an alias needs. *out NEW array. */
enum mg_code store_gateway_configs(struct store *st, json_t **out, struct mg_error *err);
enum mg_code store_gateway_delete(struct store *st, const char *actor, const char *name,
                                  struct mg_error *err);

/* Stop delivering to a gateway (e.g. a webhook answered 410), with a reason. */
enum mg_code store_gateway_disable(struct store *st, const char *name, const char *reason,
                                   struct mg_error *err);

/* One outbox row claimed by a worker. */
struct store_delivery {
    char gateway[64];
    char kind[16];
    json_t *config; /* NEW reference */
    char *secret;   /* malloc'd, or NULL */
    char model[64];
    char alias[33];
    int64_t generation;
    json_t *payload; /* {"routes":[…],"match":[…],"shadow":{…}|null,"promotion"} NEW */
    int attempts;    /* before this one */
    int64_t written_ms;
    char lease_token[17]; /* the claim's own: its outcome counts only while it holds */
    bool touched;         /* the delivery sent something to the gateway (store_outbox_done) */
    int64_t leader_epoch; /* > 0: a host-less gateway's row, the leader's to reconcile under
                           * this epoch (store_outbox_in_sync, store_outbox_drift) */
};

void store_delivery_release(struct store_delivery *d);

/*
 * Claim the oldest due row (not in sync, next attempt due, gateway enabled, and
 * either unleased, its lease expired, or its holder a replica not seen for
 * STORE_REPLICA_DEAD_MS) for lease_ms, as this replica with a fresh token.
 * now_ms is store_clock_ms(). *found false when none is due. On failure only
 * out->lease_token is set: the token of the lease that may have committed
 * unseen, for store_outbox_release.
 */
enum mg_code store_outbox_claim(struct store *st, int64_t now_ms, int64_t lease_ms,
                                struct store_delivery *out, bool *found, struct mg_error *err);

/*
 * Record a delivery's outcome and release the lease, if the claim's lease still
 * holds (d->lease_token): a claim that lost its lease (it expired and another
 * replica took the row) changes nothing. If a newer generation was written
 * meanwhile the row stays pending for it (superseded). ok → in_sync; otherwise
 * failing with error and the next attempt time (store_clock_ms()). When the claim no
 * longer holds and d->touched (it sent something, which may have reached the gateway
 * after a newer generation), a newer generation of the row is made pending again and
 * its lease, whoever holds it, is revoked: it goes out once more, after this write.
 */
enum mg_code store_outbox_done(struct store *st, const struct store_delivery *d, bool ok,
                               const char *error, int64_t next_attempt_ms, struct mg_error *err);

/*
 * The fence of a delivery, checked before each thing it sends to a gateway: *held is true
 * while d's claim still holds the row (its token, its generation, the lease not expired)
 * and, with PostgreSQL, this replica is still alive in the others' eyes (a heartbeat within
 * STORE_REPLICA_DEAD_MS; after that they may take its leases). A claim that no longer holds
 * sends nothing more and records nothing (store_outbox_release).
 */
enum mg_code store_outbox_fence(struct store *st, const struct store_delivery *d, bool *held,
                                struct mg_error *err);

/* A delivery whose fence failed: records nothing; releases d's lease if it still holds
 * it and, when d->touched, makes a newer generation pending again (as store_outbox_done
 * does for a claim that lost its lease). */
enum mg_code store_outbox_abort(struct store *st, const struct store_delivery *d,
                                struct mg_error *err);

/* The most in-sync rows one reconciler pass checks. */
#define STORE_RECONCILE_MAX 10000

/*
 * The in-sync rows this replica's reconciler checks against their gateways' live state:
 * those of enabled gateways whose "host" is this replica's, and, when leader_epoch > 0 (the
 * leader's pass, store_leader_epoch), those of gateways without a host, which carry that
 * epoch in their leader_epoch (up to STORE_RECONCILE_MAX). *out NEW: n deliveries without
 * secret or lease; store_delivery_release each, then free(*out).
 */
enum mg_code store_outbox_in_sync(struct store *st, int64_t leader_epoch,
                                  struct store_delivery **out, size_t *n, struct mg_error *err);

/*
 * The gateway was found off d's generation (found: what differs, for last_error and the
 * audit): when the row is still in sync at that generation, it becomes pending again (the
 * workers deliver it once more) with last_error "drift: ...", and a gateway.drift audit
 * entry is written, in one transaction; *marked then. Nothing when the row moved on.
 * d->leader_epoch > 0 (a host-less gateway's row): with PostgreSQL only while this replica
 * still holds the leader lease at that epoch, else MG_EUNAVAIL and nothing changes.
 */
enum mg_code store_outbox_drift(struct store *st, const struct store_delivery *d, const char *found,
                                bool *marked, struct mg_error *err);

/* Release the lease with this token (a claim or outcome whose commit this replica
 * could not confirm). Nothing when no row holds it. */
enum mg_code store_outbox_release(struct store *st, const char *token, struct mg_error *err);

/* Void the leases of replicas not seen for STORE_REPLICA_DEAD_MS (with SQLite:
 * every earlier run of this server, which owned the database alone): their rows
 * are due again at once. A live replica's lease is never voided. leader_epoch > 0: the
 * leader's periodic sweep, which with PostgreSQL changes nothing and answers MG_EUNAVAIL
 * unless this replica still holds the lease at that epoch (store_leader_epoch); 0: at start. */
enum mg_code store_outbox_recover(struct store *st, int64_t leader_epoch, struct mg_error *err);

/* Earliest time a row becomes due (ms), or 0 when nothing waits. */
enum mg_code store_outbox_next_due(struct store *st, int64_t *next_ms, struct mg_error *err);

/* Has every gateway of (model, alias) acknowledged generation >= gen? */
enum mg_code store_outbox_synced(struct store *st, const char *model, const char *alias,
                                 int64_t gen, bool *synced, struct mg_error *err);

/* ---- smoke tests --------------------------------------------------------- */

/*
 * Queue a smoke test of a version unless one is already queued or running
 * (then *out is that one and *created false). trigger: route, promotion,
 * periodic, manual; gpu_mode: required, preferred, none. *out = SmokeTest.
 * leader_epoch > 0: leader-only work (the periodic re-tests), queued only while this
 * replica still holds the leader lease at that epoch, else MG_EUNAVAIL and nothing is
 * queued (store_retention_claim); 0: anyone's.
 */
enum mg_code store_smoke_enqueue(struct store *st, int64_t leader_epoch, const char *model,
                                 int64_t version, const char *trigger, const char *gpu_mode,
                                 json_t **out, bool *created, struct mg_error *err);

/* Take the oldest queued test (it becomes running). *job = {"id","model","version",
 * "profile","gpu_mode","artifact":{"digest","media_type","files"},"smoke","resources",
 * "claim"}: "claim" is this claim's own token (pass it back in the result). */
enum mg_code store_smoke_claim(struct store *st, json_t **job, bool *found, struct mg_error *err);

/* Record the outcome: result = {"state","gpu","exit_code","latency_ms","checks","log_tail",
 * "reason","duration_ms","peak_gpu_memory_mib","claim"} (missing members stay NULL).
 * With "claim" (the job's), the result counts only while that claim still runs the test;
 * without, while this replica owns it or nobody does. MG_ENOTFOUND otherwise (the test
 * is unknown, or this claim lapsed: it was taken for dead and queued again, perhaps
 * already run elsewhere): the result is then dropped. */
enum mg_code store_smoke_finish(struct store *st, const char *id, const json_t *result,
                                struct mg_error *err);

/* {"items":[SmokeTest]} of a version, newest first (at most 100). */
enum mg_code store_smoke_list(struct store *st, const char *model, int64_t version, json_t **out,
                              struct mg_error *err);

/* The newest test of a version not finished before since_ms (queued, running,
 * or finished since); MG_ENOTFOUND if none. */
enum mg_code store_smoke_latest(struct store *st, const char *model, int64_t version,
                                int64_t since_ms, json_t **out, struct mg_error *err);

/* The newest passed smoke test of (model, version), whenever it ran: *out NEW SmokeTest
 * (with throughput_rps and cost_per_1k_requests, null when not measured); MG_ENOTFOUND when
 * none passed. */
enum mg_code store_smoke_latest_passed(struct store *st, const char *model, int64_t version,
                                       json_t **out, struct mg_error *err);

enum mg_code store_smoke_counts(struct store *st, int64_t *queued, int64_t *running,
                                struct mg_error *err);

/* Tests left running by replicas not seen for STORE_REPLICA_DEAD_MS (with
 * SQLite: by an earlier run of this server) go back to the queue. Run at start
 * and, by the leader, periodically. A live replica's test is left alone. leader_epoch: as
 * for store_outbox_recover. */
enum mg_code store_smoke_recover(struct store *st, int64_t leader_epoch, struct mg_error *err);

/*
 * Routed versions (API.md "Routing strategies"): a version is routed by an alias when the
 * alias's current generation gives it a weight above 0, names it in a match rule, or makes
 * it the shadow. This is the one notion of "routed" the runner tests by and the lifecycle
 * guards refuse by (a routed version is neither archived nor deleted).
 */

/* Does a generation (routes [{version, weight}], match [{…, version}] or NULL, shadow
 * {version, …} or null/NULL) route `version`? Pure; thread-safe. */
bool store_generation_routes(const json_t *routes, const json_t *match, const json_t *shadow,
                             int64_t version);

/* The distinct versions a generation routes, weighted routes first, then match rules, then
 * the shadow: a NEW array of integers (NULL when out of memory). Pure; thread-safe. */
json_t *store_generation_versions(const json_t *routes, const json_t *match, const json_t *shadow);

/* The live aliases of `model` that route `version`: *aliases NEW array of names (empty when
 * none). MG_ENOTFOUND when the model does not exist. */
enum mg_code store_version_routed(struct store *st, const char *model, int64_t version,
                                  json_t **aliases, struct mg_error *err);

/* [{"model","alias","match","shadow"}] of every live alias with match rules or a shadow
 * (what a new gateway must be able to apply). */
enum mg_code store_alias_strategies(struct store *st, json_t **out, struct mg_error *err);

/* [{"model","version"}] of every version some live alias routes, sorted, each once. */
enum mg_code store_routed_versions(struct store *st, json_t **out, struct mg_error *err);

/* Operational figures for /metrics: {"promotions":{state:n},"deliveries":[{"gateway",
 * "state","count"}],"delivery_lag_seconds":{gateway:s},"smoke_tests":{state:n},
 * "wal_bytes":n,"db_bytes":n}. */
enum mg_code store_stats(struct store *st, json_t **out, struct mg_error *err);

/* Archive expansion totals since the store was opened (uploads and
 * extractions through this store). Thread-safe. */
void store_archive_totals(struct store *st, struct store_archive_counters *out);

/* Bytes a blob takes once materialised: the sum of its archive's file sizes
 * (sparse holes included), or its own size for a single file. MG_ENOTFOUND
 * for an unknown digest. */
enum mg_code store_blob_expanded_size(struct store *st, const char *digest, uint64_t *out,
                                      struct mg_error *err);

/* ---- backup and restore ------------------------------------------------ */

/* Where a backup reads blobs from, or a restore writes them to: the --blobs URL
 * (NULL: file:<data_dir>/blobs) and its credentials file (may be NULL). */
struct store_blobs_location {
    const char *url;
    const char *credentials;
};

/* Write a tar of data_dir to out_path: a consistent database snapshot
 * (SQLite online backup, safe while the server runs), every blob the snapshot
 * records (read through the blob backend, whichever it is), and the signing
 * keys. *summary = {"file","blobs","keys"}. blobs may be NULL (file: in data_dir). */
enum mg_code store_backup(const char *data_dir, const struct store_blobs_location *blobs,
                          const char *out_path, json_t **summary, struct mg_error *err);

/* Restore a backup into data_dir (new or empty), writing its blobs through the
 * given backend (NULL: file:<data_dir>/blobs), then check every blob against its
 * digest and the audit chain. *summary = {"data_dir","blobs","audit"}. */
enum mg_code store_restore(const char *archive_path, const char *data_dir,
                           const struct store_blobs_location *blobs,
                           const struct sign_keyring *keys, json_t **summary, struct mg_error *err);

/* ---- audit ------------------------------------------------------------ */

/* {"items":[{"seq","at","actor","action","target","detail","prev_hash","hash"}],
 *  "next_page_token"}; entries with seq > after, oldest first. */
enum mg_code store_audit_list(struct store *st, int64_t after, unsigned limit, json_t **out,
                              struct mg_error *err);

/* The same newest first: entries with after < seq < before (before 0: up to the newest);
 * next_page_token is the next page's before. */
enum mg_code store_audit_list_desc(struct store *st, int64_t after, int64_t before, unsigned limit,
                                   json_t **out, struct mg_error *err);

/* Recompute the chain: {"ok","entries","head","first_bad_seq"?}. */
enum mg_code store_audit_verify(struct store *st, json_t **out, struct mg_error *err);

#endif
