/*
 * attest_common.h - release attestations (docs/contract.md "Signed releases") as the tests
 * that move an installation or spread it over replicas check them: fetched as
 * served, verified offline with stock `openssl` and with sigstore-js
 * (tests/identity/verify_bundle.mjs, like tests/e2e/test_identity.sh), and their
 * chain followed from one generation to the next.
 *
 * Every function asserts (cmocka) and says what went wrong, like harness.h.
 * Main thread only.
 */
#ifndef MG_IT_ATTEST_COMMON_H
#define MG_IT_ATTEST_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

/* One generation's attestation, as a server served it. */
struct it_attest {
    json_int_t generation;
    char *bundle; /* the bytes served (malloc'd, NUL-terminated) */
    size_t bundle_len;
    char *statement; /* the signed in-toto statement's bytes (the DSSE payload; malloc'd) */
    size_t statement_len;
    json_t *stmt;                   /* the statement, parsed (owned) */
    char digest[IT_DIGEST_LEN + 1]; /* "sha256:" of the statement: what the next links to */
    char hint[65];                  /* the signing key's hint, from the bundle */
};

/* GET generation gen's attestation of model/alias from s with token (200 asserted) into a,
 * checking it is a release statement of that generation. Release with it_attest_release. */
void it_attest_get(struct mg_server *s, const char *token, const char *model, const char *alias,
                   json_int_t gen, struct it_attest *a);

void it_attest_release(struct it_attest *a);

/* Standard base64 (a DSSE payload or signature) into a malloc'd, NUL-terminated buffer of
 * *len bytes; fails the test on anything else. */
unsigned char *it_b64_decode(const char *in, size_t *len);

/* Is sigstore-js there (node and tests/identity/node_modules, scripts/install-deps.sh)?
 * When not, skips the calling test (it_skip: a failure under MG_REQUIRE_ALL=1). */
void it_attest_need_tools(void);

/* Verify a with `openssl dgst -verify` over its DSSE PAE and with sigstore-js, against the
 * public key that s publishes (GET /api/v1/signing-keys) under the bundle's hint, and check
 * that openssl refuses the statement with one byte changed; scratch is a directory for the
 * files handed to them. Fails the test naming the verifier that disagreed. */
void it_attest_verify(struct mg_server *s, const struct it_attest *a, const char *scratch);

/* a is the generation after prev and links to it: predicate.previous is
 * {"generation": prev's, "digest": prev's statement digest}. */
void it_attest_expect_link(const struct it_attest *prev, const struct it_attest *a);

#endif
