/*
 * sign.c - OpenSSF model-signing v1.0 bundles (see sign.h); the keys are keys.c.
 *
 * Bundles follow the documented recipe byte for byte: the statement is built with jansson in
 * the documented key order (insertion order, never JSON_SORT_KEYS) and dumped compact; those
 * exact bytes are what is signed.
 */
#include "sign.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "../os/file.h"
#include "../base/text.h"
#include "../base/util.h"

#define SIGN_MEDIA_TYPE "application/vnd.dev.sigstore.bundle.v0.3+json"
#define SIGN_PAYLOAD_TYPE "application/vnd.in-toto+json"
#define SIGN_STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define SIGN_PREDICATE_TYPE "https://model_signing/signature/v1.0"
#define SIGN_ALGORITHM "ecdsa-p256-sha256"

#define SIGN_BUNDLE_MAX ((size_t)64 << 20) /* bigger is not a bundle we wrote */
#define SIGN_KEY_FILE_MAX ((size_t)64 << 10)
#define SIGN_ACTIVE_MAX 128
#define SIGN_MAX_KEYS 4096
#define SIGN_MAX_SIGNATURES 16

/* ---- bundles ---------------------------------------------------------- */

int sign_path_cmp(const char *a, const char *b)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;

    while (*x != '\0' && *x == *y) {
        x++;
        y++;
    }
    if (*x == *y)
        return 0;
    /* At the first difference: a path that ends sorts first (its components are a
     * prefix of the other's), then one whose component ends here ('/'), then bytes. */
    if (*x == '\0')
        return -1;
    if (*y == '\0')
        return 1;
    if (*x == '/')
        return -1;
    if (*y == '/')
        return 1;
    return *x < *y ? -1 : 1;
}

void sign_root(const struct sign_resource *res, size_t n, char out[65])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint8_t dg[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    size_t i;

    out[0] = '\0'; /* stays empty if OpenSSL fails; callers treat that as an error */
    if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        goto out;
    for (i = 0; i < n; i++) {
        if (EVP_DigestUpdate(md, res[i].digest, sizeof(res[i].digest)) != 1)
            goto out;
    }
    if (EVP_DigestFinal_ex(md, dg, &dlen) != 1 || dlen != 32)
        goto out;
    mg_hex_encode(dg, 32, out);
out:
    EVP_MD_CTX_free(md);
}

uint8_t *sign_pae(const char *body, size_t len, size_t *pae_len)
{
    char head[96];
    uint8_t *p;
    int h;

    if (body == NULL && len > 0)
        return NULL;
    h = snprintf(head, sizeof(head), "DSSEv1 28 %s %zu ", SIGN_PAYLOAD_TYPE, len);
    if (h < 0 || (size_t)h >= sizeof(head) || len > SIZE_MAX - (size_t)h - 1)
        return NULL;
    p = malloc((size_t)h + len + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, head, (size_t)h);
    if (len > 0)
        memcpy(p + h, body, len);
    p[(size_t)h + len] = '\0';
    *pae_len = (size_t)h + len;
    return p;
}

/* The statement's resources array into *out (NEW reference). */
static enum mg_code resources_json(const struct sign_resource *res, size_t n, json_t **out,
                                   struct mg_error *err)
{
    json_t *arr = json_array(), *name = NULL; /* NEW */
    char hex[65];
    enum mg_code rc = MG_OK;
    size_t i;

    *out = NULL;
    if (arr == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++) {
        if (res[i].name == NULL || res[i].name[0] == '\0') {
            rc = mg_fail(err, MG_EINVAL, NULL, "resource #%zu has no name", i);
            goto out;
        }
        if (i > 0 && sign_path_cmp(res[i - 1].name, res[i].name) >= 0) {
            rc = mg_fail(err, MG_EINVAL, NULL,
                         "resources must be in path order without duplicates ('%.200s' then "
                         "'%.200s')",
                         res[i - 1].name, res[i].name);
            goto out;
        }
        name = json_string(res[i].name); /* NULL for invalid UTF-8 */
        if (name == NULL) {
            rc = mg_fail(err, MG_EINVAL, NULL, "resource name '%.200s' is not valid UTF-8",
                         res[i].name);
            goto out;
        }
        mg_hex_encode(res[i].digest, sizeof(res[i].digest), hex);
        if (json_array_append_new(arr, json_pack("{s:O, s:s, s:s}", "name", name, "algorithm",
                                                 "sha256", "digest", hex)) != 0) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        json_decref(name);
        name = NULL;
    }
    *out = arr;
    arr = NULL;
out:
    json_decref(name);
    json_decref(arr);
    return rc;
}

enum mg_code sign_dsse_create(const struct sign_key *key, const json_t *statement, char **bundle,
                              char payload_sha256[65], struct mg_error *err)
{
    json_t *jb = NULL; /* NEW */
    char *body = NULL, *exact = NULL, *b64_body = NULL, *b64_sig = NULL;
    uint8_t *pae = NULL;
    unsigned char *sig = NULL;
    size_t body_len, pae_len = 0, sig_len = 0;
    EVP_MD_CTX *md = NULL;
    enum mg_code rc = MG_OK;

    if (bundle == NULL)
        return mg_fail(err, MG_EINVAL, NULL, "no place for the bundle");
    *bundle = NULL;
    if (key == NULL || key->pkey == NULL)
        return mg_fail(err, MG_EINVAL, NULL, "no signing key");
    /* Reals in their shortest exact text: a reader decoding the payload sees 0.942. */
    exact = json_dumps(statement, JSON_COMPACT | JSON_REAL_PRECISION(17));
    body = exact ? mg_json_short_reals(exact) : NULL;
    free(exact);
    if (body == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "cannot serialize the statement");
        goto out;
    }
    body_len = strlen(body);
    if (payload_sha256 != NULL)
        mg_sha256_hex(body, body_len, payload_sha256);
    if ((pae = sign_pae(body, body_len, &pae_len)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((md = EVP_MD_CTX_new()) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key->pkey) != 1 ||
        EVP_DigestSign(md, NULL, &sig_len, pae, pae_len) != 1) {
        rc = mg_fail(err, MG_EINVAL, NULL, "the key %s cannot sign (no private key?)", key->keyid);
        goto out;
    }
    if ((sig = OPENSSL_malloc(sig_len)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (EVP_DigestSign(md, sig, &sig_len, pae, pae_len) != 1) {
        rc = mg_fail(err, MG_EIO, NULL, "signing with key %s failed", key->keyid);
        goto out;
    }
    b64_body = mg_base64_encode((const uint8_t *)body, body_len);
    b64_sig = mg_base64_encode(sig, sig_len);
    if (b64_body == NULL || b64_sig == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    jb = json_pack("{s:s, s:{s:{s:s}, s:[]}, s:{s:s, s:s, s:[{s:s, s:s}]}}", "mediaType",
                   SIGN_MEDIA_TYPE, "verificationMaterial", "publicKey", "hint", key->hint,
                   "tlogEntries", "dsseEnvelope", "payload", b64_body, "payloadType",
                   SIGN_PAYLOAD_TYPE, "signatures", "sig", b64_sig, "keyid", "");
    if (jb == NULL || (*bundle = json_dumps(jb, JSON_COMPACT)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "cannot serialize the bundle");
        goto out;
    }
out:
    if (rc != MG_OK)
        ERR_clear_error();
    EVP_MD_CTX_free(md);
    OPENSSL_free(sig);
    free(pae);
    free(body);
    free(b64_body);
    free(b64_sig);
    json_decref(jb);
    return rc;
}

enum mg_code sign_bundle_create(const struct sign_key *key, const char *subject,
                                const struct sign_resource *res, size_t n, const json_t *meta,
                                char **bundle, struct mg_error *err)
{
    json_t *resources = NULL, *meta_copy = NULL, *statement = NULL; /* all NEW */
    char root[65];
    enum mg_code rc = MG_OK;

    if (bundle == NULL)
        return mg_fail(err, MG_EINVAL, NULL, "no place for the bundle");
    *bundle = NULL;
    if (key == NULL || key->pkey == NULL)
        return mg_fail(err, MG_EINVAL, NULL, "no signing key");
    if (subject == NULL || subject[0] == '\0' || (res == NULL && n > 0) || !json_is_object(meta))
        return mg_fail(err, MG_EINVAL, NULL,
                       "a bundle needs a subject, resources and a metadata object");
    if ((rc = resources_json(res, n, &resources, err)) != MG_OK)
        goto out;
    sign_root(res, n, root);
    meta_copy = json_deep_copy(meta);
    if (root[0] == '\0' || meta_copy == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* Key order is the byte recipe of docs/design.md "Signing"; "O" takes its own reference. */
    statement = json_pack("{s:s, s:[{s:s, s:{s:s}}], s:s, s:{s:{s:s, s:s, s:b}, s:O, s:O}}",
                          "_type", SIGN_STATEMENT_TYPE, "subject", "name", subject, "digest",
                          "sha256", root, "predicateType", SIGN_PREDICATE_TYPE, "predicate",
                          "serialization", "method", "files", "hash_type", "sha256",
                          "allow_symlinks", 0, "resources", resources, "modelgate", meta_copy);
    if (statement == NULL) {
        rc = mg_fail(err, MG_EINVAL, NULL, "cannot build the statement (subject not UTF-8?)");
        goto out;
    }
    rc = sign_dsse_create(key, statement, bundle, NULL, err);
out:
    json_decref(statement);
    json_decref(meta_copy);
    json_decref(resources);
    return rc;
}

/* A string member, or NULL. */
static const char *str_member(const json_t *obj, const char *key, size_t *len)
{
    json_t *v = json_object_get(obj, key); /* BORROWED */

    if (!json_is_string(v))
        return NULL;
    if (len != NULL)
        *len = json_string_length(v);
    return json_string_value(v);
}

/* For bsearch/qsort over pointers to resources: byte order of the names. */
static int res_ptr_cmp(const void *a, const void *b)
{
    return strcmp((*(const struct sign_resource *const *)a)->name,
                  (*(const struct sign_resource *const *)b)->name);
}

/*
 * The statement's resources equal `actual` one for one, in whatever order either lists
 * them: each signed name is looked up among the actual files. *signed_out receives the
 * signed digests in the statement's order (malloc'd, n entries, names borrowed from
 * `resources`), from which the caller computes the ROOT the signer computed.
 */
static enum mg_code compare_resources(const json_t *resources, const struct sign_resource *actual,
                                      size_t n, struct sign_resource **signed_out,
                                      struct mg_error *err)
{
    size_t m = json_array_size(resources), i, nlen = 0, dlen = 0;
    const struct sign_resource **index = NULL, *const * hit;
    struct sign_resource *signed_ = NULL, key = {0};
    const struct sign_resource *kp = &key;
    bool *seen = NULL;
    const char *name, *digest, *alg;
    enum mg_code rc = MG_OK;
    json_t *r;

    *signed_out = NULL;
    index = calloc(n ? n : 1, sizeof(*index));
    seen = calloc(n ? n : 1, sizeof(*seen));
    signed_ = calloc(m ? m : 1, sizeof(*signed_));
    if (index == NULL || seen == NULL || signed_ == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (i = 0; i < n; i++)
        index[i] = &actual[i];
    qsort(index, n, sizeof(*index), res_ptr_cmp);
    for (i = 0; i < m; i++) {
        r = json_array_get(resources, i); /* BORROWED */
        name = str_member(r, "name", &nlen);
        digest = str_member(r, "digest", &dlen);
        alg = str_member(r, "algorithm", NULL);
        if (name == NULL || digest == NULL || alg == NULL || strlen(name) != nlen) {
            rc = mg_fail(err, MG_EINVAL, NULL, "signed resource #%zu is malformed", i);
            goto out;
        }
        if (strcmp(alg, "sha256") != 0) {
            rc = mg_fail(err, MG_EINVAL, NULL,
                         "signed resource '%.200s' uses algorithm '%.32s'; expected sha256", name,
                         alg);
            goto out;
        }
        if (dlen != 64 || !mg_hex_decode(digest, 32, signed_[i].digest)) {
            rc = mg_fail(err, MG_EINVAL, NULL, "signed resource '%.200s' has a malformed digest",
                         name);
            goto out;
        }
        signed_[i].name = name;
        key.name = name;
        hit = n ? bsearch(&kp, index, n, sizeof(*index), res_ptr_cmp) : NULL;
        if (hit == NULL) {
            rc = mg_fail(err, MG_EINVAL, NULL, "signed file '%.200s' is missing from the artifact",
                         name);
            goto out;
        }
        if (seen[hit - index]) {
            rc = mg_fail(err, MG_EINVAL, NULL, "signed file '%.200s' is listed twice", name);
            goto out;
        }
        seen[hit - index] = true;
        if (memcmp(signed_[i].digest, (*hit)->digest, sizeof(signed_[i].digest)) != 0) {
            rc = mg_fail(err, MG_EINVAL, NULL,
                         "file '%.200s' does not match its signed sha256 digest", name);
            goto out;
        }
    }
    for (i = 0; i < n; i++) {
        if (!seen[i]) {
            rc = mg_fail(err, MG_EINVAL, NULL,
                         "file '%.200s' is not in the signed manifest (added after signing)",
                         index[i]->name);
            goto out;
        }
    }
    *signed_out = signed_;
    signed_ = NULL;
out:
    free(index);
    free(seen);
    free(signed_);
    return rc;
}

/* Check the statement (parsed from the verified payload) against actual. */
static enum mg_code check_statement(const json_t *st, const struct sign_resource *actual, size_t n,
                                    struct mg_error *err)
{
    const char *type = str_member(st, "_type", NULL);
    const char *ptype = str_member(st, "predicateType", NULL);
    json_t *subject = json_object_get(st, "subject");                        /* BORROWED */
    json_t *predicate = json_object_get(st, "predicate");                    /* BORROWED */
    json_t *resources = json_object_get(predicate, "resources");             /* BORROWED */
    json_t *sdigest = json_object_get(json_array_get(subject, 0), "digest"); /* BORROWED */
    const char *sroot = str_member(sdigest, "sha256", NULL);
    struct sign_resource *signed_ = NULL;
    char root[65];
    enum mg_code rc;

    if (type == NULL || strcmp(type, SIGN_STATEMENT_TYPE) != 0)
        return mg_fail(err, MG_EINVAL, NULL, "statement _type is not %s", SIGN_STATEMENT_TYPE);
    if (ptype == NULL || strcmp(ptype, SIGN_PREDICATE_TYPE) != 0)
        return mg_fail(err, MG_EINVAL, NULL, "statement predicateType is not %s",
                       SIGN_PREDICATE_TYPE);
    if (json_array_size(subject) != 1 || sroot == NULL)
        return mg_fail(err, MG_EINVAL, NULL,
                       "statement needs exactly one subject with a sha256 digest");
    if (!json_is_array(resources))
        return mg_fail(err, MG_EINVAL, NULL, "statement has no predicate.resources array");
    if ((rc = compare_resources(resources, actual, n, &signed_, err)) != MG_OK)
        return rc;
    /* The signer's ROOT: its digests in its order (equal to actual's, checked above). */
    sign_root(signed_, json_array_size(resources), root);
    free(signed_);
    if (root[0] == '\0')
        return mg_fail(err, MG_ENOMEM, NULL, "cannot compute the root digest");
    if (strcmp(root, sroot) != 0)
        return mg_fail(err, MG_EINVAL, NULL,
                       "subject digest %.64s does not match the files' root digest %s", sroot,
                       root);
    return MG_OK;
}

/* True when one of the envelope's signatures verifies over pae. */
static enum mg_code check_signatures(const json_t *sigs, const struct sign_key *pub,
                                     const uint8_t *pae, size_t pae_len, struct mg_error *err)
{
    EVP_MD_CTX *md = NULL;
    uint8_t *sig = NULL;
    size_t i, n = json_array_size(sigs), slen = 0, sig_len = 0;
    const char *s;
    enum mg_code rc = MG_OK;
    bool ok = false;

    if (n == 0 || n > SIGN_MAX_SIGNATURES) {
        rc = mg_fail(err, MG_EINVAL, NULL, "bundle has %zu signatures; expected 1 to %d", n,
                     SIGN_MAX_SIGNATURES);
        goto out;
    }
    if ((md = EVP_MD_CTX_new()) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (i = 0; i < n && !ok; i++) {
        s = str_member(json_array_get(sigs, i), "sig", &slen);
        if (s == NULL) {
            rc = mg_fail(err, MG_EINVAL, NULL, "dsseEnvelope.signatures[%zu].sig is missing", i);
            goto out;
        }
        free(sig);
        sig = mg_base64_decode(s, slen, &sig_len);
        if (sig == NULL) {
            rc = mg_fail(err, MG_EINVAL, NULL,
                         "dsseEnvelope.signatures[%zu].sig is not valid base64", i);
            goto out;
        }
        if (EVP_MD_CTX_reset(md) != 1 ||
            EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pub->pkey) != 1) {
            rc = mg_fail(err, MG_EIO, NULL, "cannot start ECDSA verification");
            goto out;
        }
        ok = EVP_DigestVerify(md, sig, sig_len, pae, pae_len) == 1;
    }
    if (!ok)
        rc = mg_fail(err, MG_EINVAL, NULL,
                     "the signature does not verify with key %s: the bundle was altered or "
                     "signed by another key",
                     pub->keyid);
out:
    ERR_clear_error(); /* a failed verification leaves DER/ECDSA errors queued */
    EVP_MD_CTX_free(md);
    free(sig);
    return rc;
}

enum mg_code sign_bundle_verify(const char *bundle, size_t len, const struct sign_key *pub,
                                const struct sign_resource *actual, size_t n, json_t **statement,
                                struct mg_error *err)
{
    json_t *jb = NULL, *st = NULL; /* NEW */
    json_t *env, *vm;              /* BORROWED */
    json_error_t jerr;
    const char *s, *hint;
    size_t slen = 0, body_len = 0, pae_len = 0;
    uint8_t *body = NULL, *pae = NULL;
    enum mg_code rc;

    if (statement != NULL)
        *statement = NULL;
    if (bundle == NULL || pub == NULL || pub->pkey == NULL || (actual == NULL && n > 0)) {
        rc = mg_fail(err, MG_EINVAL, NULL, "no bundle, key or resources to verify");
        goto out;
    }
    if (len > SIGN_BUNDLE_MAX) {
        rc = mg_fail(err, MG_EINVAL, NULL, "bundle is %zu bytes; the limit is %zu", len,
                     SIGN_BUNDLE_MAX);
        goto out;
    }
    jb = json_loadb(bundle, len, JSON_REJECT_DUPLICATES, &jerr);
    if (jb == NULL) {
        rc = mg_fail(err, MG_EINVAL, NULL, "bundle is not valid JSON: %s (line %d)", jerr.text,
                     jerr.line);
        goto out;
    }
    s = str_member(jb, "mediaType", NULL);
    if (s == NULL || strcmp(s, SIGN_MEDIA_TYPE) != 0) {
        rc = mg_fail(err, MG_EINVAL, NULL, "bundle mediaType is not %s", SIGN_MEDIA_TYPE);
        goto out;
    }
    vm = json_object_get(jb, "verificationMaterial");
    hint = str_member(json_object_get(vm, "publicKey"), "hint", &slen);
    if (hint == NULL) {
        rc = mg_fail(err, MG_EINVAL, NULL, "bundle has no verificationMaterial.publicKey.hint");
        goto out;
    }
    if (slen != 64 || !mg_ct_equal(hint, pub->hint, 64)) {
        rc = mg_fail(err, MG_EINVAL, NULL,
                     "bundle was signed by the key with hint %.64s, not by key %s (hint %s)", hint,
                     pub->keyid, pub->hint);
        goto out;
    }
    env = json_object_get(jb, "dsseEnvelope");
    s = str_member(env, "payloadType", NULL);
    if (s == NULL || strcmp(s, SIGN_PAYLOAD_TYPE) != 0) {
        rc = mg_fail(err, MG_EINVAL, NULL, "dsseEnvelope.payloadType is not %s", SIGN_PAYLOAD_TYPE);
        goto out;
    }
    s = str_member(env, "payload", &slen);
    if (s == NULL || (body = mg_base64_decode(s, slen, &body_len)) == NULL) {
        rc = mg_fail(err, MG_EINVAL, NULL, "dsseEnvelope.payload is missing or not base64");
        goto out;
    }
    if ((pae = sign_pae((const char *)body, body_len, &pae_len)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = check_signatures(json_object_get(env, "signatures"), pub, pae, pae_len, err)) !=
        MG_OK)
        goto out;
    st = json_loadb((const char *)body, body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(st)) {
        rc = mg_fail(err, MG_EINVAL, NULL, "signed statement is not a JSON object");
        goto out;
    }
    if ((rc = check_statement(st, actual, n, err)) != MG_OK)
        goto out;
    if (statement != NULL) {
        *statement = st;
        st = NULL;
    }
out:
    free(body);
    free(pae);
    json_decref(st);
    json_decref(jb);
    return rc;
}
