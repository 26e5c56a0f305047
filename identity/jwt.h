/*
 * jwt.h - verifying JSON Web Tokens an OpenID provider or a CI system issued, against the
 * provider's published keys (a JWKS), with a maintained JOSE library (cjose) doing the
 * signature work. Nothing here fetches: identity/oidc.h fetches and caches.
 *
 * What is accepted (docs/contract.md "Identity"):
 * - compact JWS only, at most ID_JWT_MAX bytes;
 * - "alg" RS256, PS256 or ES256 (cjose 0.6 has no EdDSA); "none", every HMAC algorithm and
 *   anything else are refused before a key is looked at, and the key must be of the
 *   algorithm's type (an RSA key never verifies an HMAC, whatever the header says);
 * - the key is chosen by the header's "kid" from the JWKS only (never from "jku", "jwk" or
 *   "x5u"); a header with "crit" is refused (no extension is understood);
 * - "iss" equal to the expected issuer, "aud" (a string or an array) holding the expected
 *   audience, "exp" required and "nbf" optional, both with the given leeway, "sub" required.
 *
 * A refusal returns MG_EUNAUTH with err->field naming the check that failed ("token", "alg",
 * "kid", "signature", "exp", "nbf", "aud", "iss", "sub", "crit") and a message that never
 * quotes the token or any part of it.
 *
 * Thread safety: a struct id_jwks is immutable once parsed and may be read by several
 * threads at once; the functions keep no global state.
 */
#ifndef ID_JWT_H
#define ID_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/mg.h"

#define ID_JWT_MAX (16 * 1024)   /* a token longer than this is refused unread */
#define ID_JWKS_MAX (256 * 1024) /* a JWKS document longer than this is refused */
#define ID_JWKS_MAX_KEYS 64      /* keys kept from one JWKS */
#define ID_RSA_MIN_BITS 2048

/* A provider's signing keys (opaque). */
struct id_jwks;

/*
 * Parse a JWKS document ({"keys":[…]}). Keys that cannot sign (use other than "sig"), of a
 * type this module does not verify with (only RSA and EC P-256), RSA keys under
 * ID_RSA_MIN_BITS, and keys beyond ID_JWKS_MAX_KEYS are skipped, not refused; a document
 * that is not JSON, has no "keys" array, or is longer than ID_JWKS_MAX is refused with
 * MG_EINVAL. On success *out is a new set (free with id_jwks_free), possibly empty.
 */
enum mg_code id_jwks_parse(const char *json, size_t len, struct id_jwks **out,
                           struct mg_error *err);

/* Free a set and set *keys to NULL. NULL is fine. */
void id_jwks_free(struct id_jwks **keys);

/* Number of keys kept. */
size_t id_jwks_count(const struct id_jwks *keys);

/* Whether the set holds a key with this kid. */
bool id_jwks_has_kid(const struct id_jwks *keys, const char *kid);

/* What a token must say besides carrying a good signature. */
struct id_jwt_expect {
    const char *issuer;   /* exact "iss" */
    const char *audience; /* one of "aud"; NULL skips the check (callers never do) */
    int64_t now_s;        /* the verifier's clock, seconds since the epoch */
    int64_t leeway_s;     /* slack for exp and nbf (docs/contract.md: 60) */
};

/*
 * Read the protected header's "kid" without verifying anything (to decide whether a JWKS
 * refetch could help). On success *kid is a new string (free()) or NULL when the header has
 * none. MG_EUNAUTH with err->field "token" when the header cannot be read.
 */
enum mg_code id_jwt_peek_kid(const char *token, size_t len, char **kid, struct mg_error *err);

/*
 * Read the unverified "iss" claim, to pick which issuer's keys to verify with. Never trust
 * the result for anything else. *iss is a new string (free()).
 */
enum mg_code id_jwt_peek_issuer(const char *token, size_t len, char **iss, struct mg_error *err);

/*
 * Verify token (len bytes, not necessarily NUL-terminated) with keys and expect. On success
 * *claims is a new reference to the payload object. On refusal MG_EUNAUTH (see above),
 * *claims NULL; MG_ENOMEM when memory runs out.
 */
enum mg_code id_jwt_verify(const char *token, size_t len, const struct id_jwks *keys,
                           const struct id_jwt_expect *expect, json_t **claims,
                           struct mg_error *err);

#endif
