/*
 * attest_common.c - fetch, verify (openssl, sigstore-js) and chain release attestations;
 * see attest_common.h.
 */
#include "attest_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <openssl/evp.h>

#include "sys.h"

/* Standard base64 (the DSSE payload and signature) into a malloc'd buffer. */
unsigned char *it_b64_decode(const char *in, size_t *len)
{
    size_t n = strlen(in);
    unsigned char *out = malloc(n / 4 * 3 + 4);
    int k;

    if (out == NULL)
        fail_msg("out of memory");
    k = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
    if (k < 0)
        fail_msg("not base64: %.80s", in);
    while (n > 0 && in[n - 1] == '=') { /* EVP_DecodeBlock counts the padding */
        k--;
        n--;
    }
    out[k] = '\0';
    *len = (size_t)k;
    return out;
}

void it_attest_get(struct mg_server *s, const char *token, const char *model, const char *alias,
                   json_int_t gen, struct it_attest *a)
{
    char path[256];
    struct it_resp *r;
    json_t *bundle, *env;
    const char *hint, *pt;

    memset(a, 0, sizeof(*a));
    a->generation = gen;
    r = it_get(s,
               it_fmt(path, sizeof(path),
                      "/api/v1/models/%s/aliases/%s/history/%" JSON_INTEGER_FORMAT "/attestation",
                      model, alias, gen),
               token);
    it_expect_status(s, r, 200);
    if ((a->bundle = malloc(r->len + 1)) == NULL)
        fail_msg("out of memory");
    memcpy(a->bundle, r->body, r->len + 1);
    a->bundle_len = r->len;
    it_resp_free(s, &r);
    if ((bundle = json_loadb(a->bundle, a->bundle_len, 0, NULL)) == NULL)
        fail_msg("%s: not JSON: %.200s", path, a->bundle);
    env = json_object_get(bundle, "dsseEnvelope");
    if (!json_is_string(json_object_get(env, "payload")))
        fail_msg("%s: no dsseEnvelope.payload: %.200s", path, a->bundle);
    a->statement = (char *)it_b64_decode(json_string_value(json_object_get(env, "payload")),
                                         &a->statement_len);
    hint = json_string_value(json_object_get(
        json_object_get(json_object_get(bundle, "verificationMaterial"), "publicKey"), "hint"));
    if (hint == NULL || strlen(hint) != 64)
        fail_msg("%s: no key hint in the bundle: %.200s", path, a->bundle);
    memcpy(a->hint, hint, 65);
    json_decref(bundle);
    it_digest(a->statement, a->statement_len, a->digest);
    if ((a->stmt = json_loadb(a->statement, a->statement_len, 0, NULL)) == NULL)
        fail_msg("%s: the statement is not JSON: %.200s", path, a->statement);
    pt = json_string_value(json_object_get(a->stmt, "predicateType"));
    if (pt == NULL || strcmp(pt, "https://modelgate.dev/release/v1") != 0 ||
        json_integer_value(json_object_get(json_object_get(a->stmt, "predicate"), "generation")) !=
            gen)
        fail_msg("%s: not the release statement of generation %" JSON_INTEGER_FORMAT ": %.300s",
                 path, gen, a->statement);
}

void it_attest_release(struct it_attest *a)
{
    free(a->bundle);
    free(a->statement);
    json_decref(a->stmt);
    memset(a, 0, sizeof(*a));
}

static const char *verify_script(char out[IT_PATH_MAX])
{
    const char *src = getenv("MG_SOURCE_DIR");

    if (src == NULL)
        fail_msg("MG_SOURCE_DIR is not set (ctest sets it)");
    return it_fmt(out, IT_PATH_MAX, "%s/tests/identity/verify_bundle.mjs", src);
}

void it_attest_need_tools(void)
{
    char script[IT_PATH_MAX], mods[IT_PATH_MAX];
    int st;

    verify_script(script);
    it_fmt(mods, sizeof(mods), "%s/tests/identity/node_modules/@sigstore/verify",
           getenv("MG_SOURCE_DIR"));
    st = system("node --version >/dev/null 2>&1 && openssl version >/dev/null 2>&1");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !it_exists(mods))
        it_skip("node, openssl or tests/identity/node_modules (scripts/install-deps.sh) missing: "
                "sigstore-js cannot verify the attestations");
}

/* The PEM of the key s publishes under hint into file pub. */
static void published_key(struct mg_server *s, const char *hint, const char *pub)
{
    struct it_resp *r = it_get(s, "/api/v1/signing-keys", NULL);
    json_t *k;
    size_t i;

    it_expect_status(s, r, 200);
    json_array_foreach(json_object_get(r->json, "items"), i, k)
    {
        const char *h = json_string_value(json_object_get(k, "hint"));

        if (h != NULL && strcmp(h, hint) == 0) {
            it_write_file(pub, json_string_value(json_object_get(k, "public_key_pem")));
            it_resp_free(s, &r);
            return;
        }
    }
    fail_msg("GET /api/v1/signing-keys on %s does not publish the key with hint %s: %s",
             s->base_url, hint, r->body);
}

/* Does a's signature verify over statement (its own, or a changed one) with openssl against
 * the PEM public key in file pub? */
static bool openssl_verifies(const struct it_attest *a, const char *statement, size_t statement_len,
                             const char *pub, const char *scratch)
{
    char pae[IT_PATH_MAX], sig_path[IT_PATH_MAX], cmd[IT_PATH_MAX * 4], head[96];
    json_t *bundle = json_loadb(a->bundle, a->bundle_len, 0, NULL);
    json_t *sigs = json_object_get(json_object_get(bundle, "dsseEnvelope"), "signatures");
    const char *sig64 = json_string_value(json_object_get(json_array_get(sigs, 0), "sig"));
    unsigned char *sig;
    size_t sig_len;
    FILE *f;
    int st;

    if (sig64 == NULL)
        fail_msg("generation %" JSON_INTEGER_FORMAT "'s bundle has no signature: %.200s",
                 a->generation, a->bundle);
    sig = it_b64_decode(sig64, &sig_len);
    json_decref(bundle);
    it_fmt(pae, sizeof(pae), "%s/attest.pae", scratch);
    it_fmt(sig_path, sizeof(sig_path), "%s/attest.sig", scratch);
    if ((f = fopen(pae, "w")) == NULL)
        fail_msg("fopen %s: %s", pae, strerror(errno));
    fputs(it_fmt(head, sizeof(head), "DSSEv1 28 application/vnd.in-toto+json %zu ", statement_len),
          f);
    fwrite(statement, 1, statement_len, f);
    if (fclose(f) != 0)
        fail_msg("writing %s: %s", pae, strerror(errno));
    it_write_bytes(sig_path, sig, sig_len);
    free(sig);
    it_fmt(cmd, sizeof(cmd), "openssl dgst -sha256 -verify '%s' -signature '%s' '%s' >/dev/null",
           pub, sig_path, pae);
    st = system(cmd);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

void it_attest_verify(struct mg_server *s, const struct it_attest *a, const char *scratch)
{
    char pub[IT_PATH_MAX], bundle[IT_PATH_MAX], script[IT_PATH_MAX], cmd[IT_PATH_MAX * 4];
    char *changed;
    bool refused;
    int st;

    it_fmt(pub, sizeof(pub), "%s/attest-key.pem", scratch);
    it_fmt(bundle, sizeof(bundle), "%s/attest-bundle.json", scratch);
    published_key(s, a->hint, pub);
    if (!openssl_verifies(a, a->statement, a->statement_len, pub, scratch))
        fail_msg("generation %" JSON_INTEGER_FORMAT
                 "'s attestation does not verify with openssl against the key %s publishes",
                 a->generation, s->base_url);
    /* ... and the verification is not vacuous: one changed byte fails it. */
    if ((changed = malloc(a->statement_len + 1)) == NULL)
        fail_msg("out of memory");
    memcpy(changed, a->statement, a->statement_len + 1);
    changed[a->statement_len / 2] ^= 0x01;
    refused = !openssl_verifies(a, changed, a->statement_len, pub, scratch);
    free(changed);
    if (!refused)
        fail_msg("openssl verifies generation %" JSON_INTEGER_FORMAT
                 "'s attestation with a changed statement",
                 a->generation);
    it_write_bytes(bundle, a->bundle, a->bundle_len);
    it_fmt(cmd, sizeof(cmd), "node '%s' '%s' '%s' 2>&1 >/dev/null", verify_script(script), bundle,
           pub);
    st = system(cmd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("generation %" JSON_INTEGER_FORMAT
                 "'s attestation does not verify with sigstore-js against the key %s publishes",
                 a->generation, s->base_url);
}

void it_attest_expect_link(const struct it_attest *prev, const struct it_attest *a)
{
    json_t *p = json_object_get(json_object_get(a->stmt, "predicate"), "previous");
    const char *d = json_string_value(json_object_get(p, "digest"));

    if (a->generation != prev->generation + 1 ||
        json_integer_value(json_object_get(p, "generation")) != prev->generation || d == NULL ||
        strcmp(d, prev->digest) != 0)
        fail_msg("generation %" JSON_INTEGER_FORMAT
                 " does not link to generation %" JSON_INTEGER_FORMAT
                 " (statement digest %s): its statement is %.400s",
                 a->generation, prev->generation, prev->digest, a->statement);
}
