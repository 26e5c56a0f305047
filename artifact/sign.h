/*
 * sign.h - OpenSSF model-signing v1.0 bundles (Sigstore bundle v0.3 with a
 * DSSE envelope over an in-toto Statement v1), ECDSA P-256 / SHA-256.
 * The byte recipe is docs/design.md, section "Signing".
 *
 * This module depends only on OpenSSL, jansson and common/ so that the CLI
 * can verify offline with the same code. Keys live in <data-dir>/keys/
 * (directory 0700, files 0600): one "<keyid>.pem" (PKCS#8 private key) per
 * key ever made, and "active" naming the signing key's keyid.
 *
 * Thread safety: a loaded keyring is read-only and may be shared by threads.
 */
#ifndef STORE_SIGN_H
#define STORE_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "../base/mg.h"

struct sign_key {
    EVP_PKEY *pkey;     /* private (server) or public (verifier) */
    char keyid[65];     /* hex sha256 of the DER SubjectPublicKeyInfo */
    char *public_pem;   /* "-----BEGIN PUBLIC KEY-----\n...", exactly as published */
    char hint[65];      /* hex sha256 of public_pem's bytes (the bundle's hint) */
    int64_t created_ms; /* when the key was made (file mtime) */
    bool active;
};

struct sign_keyring {
    struct sign_key *keys; /* newest first */
    size_t n;
    struct sign_key *active;
};

/* The PEM (PKCS#8) text of k, a key of <data_dir>/keys/, as stored there; *pem is
 * malloc'd (the caller cleanses and frees it). */
enum mg_code sign_key_private_pem(const char *data_dir, const struct sign_key *k, char **pem,
                                  struct mg_error *err);

/*
 * Load every key in <data_dir>/keys/. With key_file, that PEM (PKCS#8) is
 * the active key instead of the one named by "active". When the directory
 * holds no key and no key_file is given, generate one (create == true).
 * Refuses (MG_EINVAL, message says what to fix) a key file readable by group
 * or others, a keys directory open to others, or a key that is not P-256.
 */
enum mg_code sign_keyring_load(const char *data_dir, const char *key_file, bool create,
                               struct sign_keyring **out, struct mg_error *err);

/* Generate a new key in <data_dir>/keys/ and make it active. */
enum mg_code sign_keyring_rotate(const char *data_dir, char keyid_out[65], struct mg_error *err);

void sign_keyring_free(struct sign_keyring **kr);

/* {"items":[{"keyid","hint","algorithm":"ecdsa-p256-sha256","public_key_pem","created_at",
 *   "active"}]}: "active" only on kr->active. NEW reference. */
json_t *sign_keyring_json(const struct sign_keyring *kr);

/* A key by its hint (hex sha256 of the public PEM), or NULL. */
const struct sign_key *sign_keyring_by_hint(const struct sign_keyring *kr, const char *hint);

/* One signed resource: a regular file's relative POSIX path (or "." for a
 * single-file artifact) and its raw SHA-256. */
struct sign_resource {
    const char *name;
    uint8_t digest[32];
};

/* ROOT = hex(sha256(digest_1 || … || digest_n)), resources in the given
 * (sign_path_cmp) order. */
void sign_root(const struct sign_resource *res, size_t n, char out[65]);

/*
 * The order model_signing lists files in (docs/design.md "Signing"): paths compared
 * component by component, so "sub/a.txt" and "sub/deep/b" come before
 * "sub-notes.txt" and "sub.cfg". Like strcmp: <0, 0, >0. Paths are relative,
 * normalised POSIX paths (no empty components). Thread-safe, pure.
 */
int sign_path_cmp(const char *a, const char *b);

/* PAE = "DSSEv1 28 application/vnd.in-toto+json <len> <body>". Returns a
 * malloc'd buffer (*pae_len set) or NULL. */
uint8_t *sign_pae(const char *body, size_t len, size_t *pae_len);

/*
 * Build and sign a bundle. subject is "<model>-v<n>"; res must be sorted by
 * sign_path_cmp without duplicates; meta is the "modelgate" predicate object (BORROWED). *bundle is
 * the malloc'd bundle JSON text (compact), *statement_len unused when NULL.
 */
enum mg_code sign_bundle_create(const struct sign_key *key, const char *subject,
                                const struct sign_resource *res, size_t n, const json_t *meta,
                                char **bundle, struct mg_error *err);

/*
 * Sign any in-toto statement (BORROWED; serialised compact, in its key order) into a Sigstore
 * bundle with a DSSE envelope, the same shape sign_bundle_create() makes. *bundle is the
 * malloc'd bundle JSON text; payload_sha256 (when not NULL) receives the hex SHA-256 of the
 * signed statement bytes (what a chain of attestations links by).
 */
enum mg_code sign_dsse_create(const struct sign_key *key, const json_t *statement, char **bundle,
                              char payload_sha256[65], struct mg_error *err);

/*
 * Verify a bundle against a public key and the actual resources (in any
 * order): the hint matches the key, the DSSE signature over the PAE verifies,
 * the statement's resources equal `actual` one for one (names and digests —
 * a changed, removed or added file fails), and the subject digest equals
 * the ROOT of the signed digests in the order the statement lists them (so
 * bundles signed before the path order changed, in plain byte order, still
 * verify). On success *statement (if not NULL) receives the parsed
 * statement (NEW reference). MG_EINVAL with the reason otherwise.
 */
enum mg_code sign_bundle_verify(const char *bundle, size_t len, const struct sign_key *pub,
                                const struct sign_resource *actual, size_t n, json_t **statement,
                                struct mg_error *err);

/* Load a public key from PEM text into a sign_key (keyid, hint filled). */
enum mg_code sign_key_from_public_pem(const char *pem, size_t len, struct sign_key *out,
                                      struct mg_error *err);

/* Free what a sign_key holds (not the struct itself). */
void sign_key_release(struct sign_key *k);

#endif
