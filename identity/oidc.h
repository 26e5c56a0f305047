/*
 * oidc.h - one OpenID provider as a relying party sees it: its discovery document
 * (<issuer>/.well-known/openid-configuration), its JWKS kept in a cache, and token
 * verification against them (identity/jwt.h).
 *
 * The cache: the JWKS is fetched on first use and again after ID_JWKS_TTL_MS; a token whose
 * "kid" the cached set lacks triggers one refetch (the provider rotated its keys), at most
 * once per refetch interval (docs/contract.md: a minute), so a stream of tokens with made-up kids
 * cannot turn modelgated into a load generator against the provider. A refetch replaces the
 * whole set: a key the provider stopped publishing stops verifying at the next refetch.
 * When a fetch fails the previous set stays in use.
 *
 * URLs: the issuer, its jwks_uri and its endpoints must be https://, or http:// on a
 * loopback address (tests); the discovery document's "issuer" must equal the configured one.
 *
 * Thread safety: every function may be called from several threads on the same struct
 * id_oidc; fetches run without the lock held.
 */
#ifndef ID_OIDC_H
#define ID_OIDC_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "base/mg.h"
#include "base/util.h"

#define ID_LEEWAY_S 60
#define ID_REFETCH_INTERVAL_MS 60000
#define ID_JWKS_TTL_MS (3600 * 1000)
#define ID_DOC_MAX (256 * 1024) /* a discovery document or JWKS larger than this is refused */

/*
 * GET url into body (an initialised mg_buf whose cap the fetcher honours). MG_OK only for a
 * 200 answer; MG_EUNAVAIL (with a message naming the URL, never a token) otherwise.
 */
typedef enum mg_code (*id_fetch_fn)(void *ctx, const char *url, struct mg_buf *body,
                                    struct mg_error *err);

struct id_oidc_options {
    const char *issuer;          /* required */
    int64_t leeway_s;            /* 0: ID_LEEWAY_S */
    int64_t refetch_interval_ms; /* 0: ID_REFETCH_INTERVAL_MS */
    int64_t jwks_ttl_ms;         /* 0: ID_JWKS_TTL_MS */
    id_fetch_fn fetch;           /* NULL: id_fetch_curl */
    void *fetch_ctx;
};

struct id_oidc;

/* Whether url may be fetched: https://, or http:// to 127.0.0.0/8, [::1] or localhost. */
bool id_url_allowed(const char *url);

/* The default fetcher: libcurl, no redirects, no proxy, 5 s to connect, 10 s in all. */
enum mg_code id_fetch_curl(void *ctx, const char *url, struct mg_buf *body, struct mg_error *err);

/* A provider (nothing is fetched yet). MG_EINVAL when the issuer URL is not allowed. */
enum mg_code id_oidc_new(const struct id_oidc_options *opt, struct id_oidc **out,
                         struct mg_error *err);

/* Free and set *o to NULL. NULL is fine. */
void id_oidc_free(struct id_oidc **o);

/* The issuer URL as configured (borrowed, lives as long as o). */
const char *id_oidc_issuer(const struct id_oidc *o);

/*
 * Verify a token from this provider for audience at now_ms (ms since the epoch). On success
 * *claims is a new reference to the verified claims. MG_EUNAUTH for a refused token (see
 * jwt.h for err->field), MG_EUNAVAIL when the provider's keys could never be fetched.
 */
enum mg_code id_oidc_verify(struct id_oidc *o, const char *token, size_t len, const char *audience,
                            int64_t now_ms, json_t **claims, struct mg_error *err);

/*
 * The discovery document's endpoints (fetching it when it is not cached): *authorization
 * and *token are new strings (free()). MG_EUNAVAIL when discovery fails.
 */
enum mg_code id_oidc_endpoints(struct id_oidc *o, int64_t now_ms, char **authorization,
                               char **token, struct mg_error *err);

/* How many JWKS fetches were made (tests and /metrics). */
uint64_t id_oidc_jwks_fetches(struct id_oidc *o);

/* ---- several providers (trusted publishing: each CI system is an issuer) ------------------ */

#define ID_REGISTRY_MAX 32

/* Providers by issuer URL, made on first use and kept (opaque; thread-safe). */
struct id_registry;

/* An empty registry whose providers use fetch (NULL: libcurl). */
struct id_registry *id_registry_new(id_fetch_fn fetch, void *fetch_ctx);

/* Free every provider and set *reg to NULL. */
void id_registry_free(struct id_registry **reg);

/*
 * The provider for issuer (BORROWED, lives as long as reg), made when first asked for.
 * MG_EINVAL for an issuer URL that is not allowed, MG_ETOOBIG past ID_REGISTRY_MAX issuers.
 */
enum mg_code id_registry_get(struct id_registry *reg, const char *issuer, struct id_oidc **out,
                             struct mg_error *err);

/* ---- claim rules ------------------------------------------------------------------------ */

/*
 * Whether verified claims satisfy rules ({"claim":"value"}: the claim must be a string equal
 * to the value, or start with it when the value ends in '*'). On a mismatch *failed names the
 * first rule's claim that did not hold (BORROWED from rules). Pure.
 */
bool id_claims_match(const json_t *rules, const json_t *claims, const char **failed);

/*
 * POST an application/x-www-form-urlencoded body (the OAuth token endpoint) and read the
 * answer into body (an initialised mg_buf; its cap is honoured). *status: the HTTP status.
 * MG_EUNAVAIL when no answer came. Never logs the body.
 */
enum mg_code id_post_form(const char *url, const char *form, struct mg_buf *body, long *status,
                          struct mg_error *err);

#endif
