/*
 * store_access.h - who may do what: tokens and roles (struct store_principal), teams, IdP
 * groups, trusted publishing, single sign-on and UI sessions.
 *
 * Part of store.h, which includes it: include store.h. Its conventions (json_t ownership,
 * return values, out-parameters, thread safety) hold here.
 */
#ifndef STORE_ACCESS_H
#define STORE_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../model/roles.h"

struct store;

/* ---- tokens and roles ------------------------------------------------- */

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
    /* docs/contract.md "Teams": none means global / every alias */
    char teams[STORE_MAX_SCOPES][STORE_TEAM_NAME_MAX + 1];
    size_t nteams;
    char aliases[STORE_MAX_SCOPES][34]; /* alias names, or a prefix and '*' */
    size_t naliases;
    /* The person behind the credential (docs/contract.md "Identity"): an IdP's issuer and subject,
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

/* ---- identity: IdP groups (docs/contract.md "Identity") ------------------------------ */

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

/* ---- trusted publishing (docs/contract.md "Trusted publishing") ------------------------------ */

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

/* ---- single sign-on (docs/contract.md "Identity") ----------------------------------------------
 */

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

#endif
