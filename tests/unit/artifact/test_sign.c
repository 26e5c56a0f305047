/*
 * test_sign.c - artifact/sign.c: the docs/design.md "Signing" byte recipe, bundle
 * verification (and what must make it fail), the on-disk keyring, and a
 * cross-check with the stock openssl command line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "base/util.h"
#include "artifact/sign.h"

#define PAYLOAD_TYPE "application/vnd.in-toto+json"

#define assert_contains(hay, needle)                                                               \
    do {                                                                                           \
        if (strstr((hay), (needle)) == NULL)                                                       \
            fail_msg("\"%s\" does not contain \"%s\"", (hay), (needle));                           \
    } while (0)

struct fixture {
    char dir_a[64], dir_b[64];
    struct sign_keyring *a, *b;
    struct sign_resource res[3];
    json_t *meta;
    char *bundle; /* signed by a's active key over res and meta */
};

/* ---- helpers ---------------------------------------------------------- */

static void make_tmpdir(char out[64])
{
    snprintf(out, 64, "/tmp/mg-test-sign-XXXXXX");
    assert_non_null(mkdtemp(out));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_rf(const char *dir)
{
    chmod(dir, 0700);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *path, const void *data, size_t n, mode_t mode)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = calloc(1, 1 << 16);
    size_t n;

    assert_non_null(f);
    assert_non_null(buf);
    n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static mode_t file_mode(const char *path)
{
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

static int run_sh(const char *cmd)
{
    int r = system(cmd);

    if (r == -1 || !WIFEXITED(r))
        return -1;
    return WEXITSTATUS(r);
}

static void sha256_raw(const char *s, uint8_t out[32])
{
    SHA256((const unsigned char *)s, strlen(s), out);
}

/* ROOT computed here, independently of sign_root(). */
static void expected_root(const struct sign_resource *res, size_t n, char out[65])
{
    uint8_t *cat = malloc(n * 32 + 1), md[32];
    size_t i;

    assert_non_null(cat);
    for (i = 0; i < n; i++)
        memcpy(cat + 32 * i, res[i].digest, 32);
    SHA256(cat, n * 32, md);
    mg_hex_encode(md, 32, out);
    free(cat);
}

static uint8_t *b64dec(const char *s, size_t *n)
{
    uint8_t *p = mg_base64_decode(s, strlen(s), n);

    assert_non_null(p);
    return p;
}

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &e);

    if (j == NULL)
        fail_msg("not JSON: %s: %s", e.text, text);
    return j;
}

static char *dump(const json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);

    assert_non_null(s);
    return s;
}

/* The envelope's payload, decoded and NUL-terminated. */
static char *payload_of(const char *bundle)
{
    json_t *b = parse(bundle);
    size_t n;
    uint8_t *p = b64dec(
        json_string_value(json_object_get(json_object_get(b, "dsseEnvelope"), "payload")), &n);
    char *s = malloc(n + 1);

    assert_non_null(s);
    memcpy(s, p, n);
    s[n] = '\0';
    free(p);
    json_decref(b);
    return s;
}

/* The bundle with dsseEnvelope.<field> (or signatures[0].sig) replaced by
 * base64 of the given bytes. */
static char *with_envelope_b64(const char *bundle, const char *field, const void *data, size_t n)
{
    json_t *b = parse(bundle);
    json_t *env = json_object_get(b, "dsseEnvelope");
    char *b64 = mg_base64_encode(data, n), *out;

    assert_non_null(b64);
    if (strcmp(field, "sig") == 0)
        assert_int_equal(json_object_set_new(json_array_get(json_object_get(env, "signatures"), 0),
                                             "sig", json_string(b64)),
                         0);
    else
        assert_int_equal(json_object_set_new(env, field, json_string(b64)), 0);
    out = dump(b);
    free(b64);
    json_decref(b);
    return out;
}

/* A bundle over an arbitrary statement body, signed with k's private key:
 * lets a test reach the checks that come after the signature. */
static char *bundle_from_body(const struct sign_key *k, const char *body)
{
    size_t pae_len = 0, sig_len;
    uint8_t *pae = sign_pae(body, strlen(body), &pae_len);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char sig[256];
    char *b64_body, *b64_sig, *out;
    json_t *b;

    assert_non_null(pae);
    assert_non_null(md);
    sig_len = sizeof(sig);
    assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k->pkey), 1);
    assert_int_equal(EVP_DigestSign(md, sig, &sig_len, pae, pae_len), 1);
    b64_body = mg_base64_encode((const uint8_t *)body, strlen(body));
    b64_sig = mg_base64_encode(sig, sig_len);
    b = json_pack("{s:s, s:{s:{s:s}, s:[]}, s:{s:s, s:s, s:[{s:s, s:s}]}}", "mediaType",
                  "application/vnd.dev.sigstore.bundle.v0.3+json", "verificationMaterial",
                  "publicKey", "hint", k->hint, "tlogEntries", "dsseEnvelope", "payload", b64_body,
                  "payloadType", PAYLOAD_TYPE, "signatures", "sig", b64_sig, "keyid", "");
    assert_non_null(b);
    out = dump(b);
    json_decref(b);
    free(b64_body);
    free(b64_sig);
    free(pae);
    EVP_MD_CTX_free(md);
    return out;
}

static enum mg_code verify(const char *bundle, const struct sign_key *k,
                           const struct sign_resource *res, size_t n, struct mg_error *err)
{
    mg_error_clear(err);
    return sign_bundle_verify(bundle, strlen(bundle), k, res, n, NULL, err);
}

/* A PKCS#8 PEM of a fresh key of the given type/curve, written with mode. */
static void write_new_key(const char *path, const char *type, const char *curve, mode_t mode)
{
    EVP_PKEY *pk =
        curve ? EVP_PKEY_Q_keygen(NULL, NULL, type, curve) : EVP_PKEY_Q_keygen(NULL, NULL, type);
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long n;

    assert_non_null(pk);
    assert_non_null(bio);
    assert_int_equal(PEM_write_bio_PKCS8PrivateKey(bio, pk, NULL, NULL, 0, NULL, NULL), 1);
    n = BIO_get_mem_data(bio, &data);
    assert_true(n > 0);
    write_file(path, data, (size_t)n, mode);
    BIO_free(bio);
    EVP_PKEY_free(pk);
}

static void key_path(const char *dir, const char *keyid, char out[PATH_MAX])
{
    snprintf(out, PATH_MAX, "%s/keys/%s.pem", dir, keyid);
}

/* ---- fixture ---------------------------------------------------------- */

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct mg_error err = {0};

    assert_non_null(f);
    make_tmpdir(f->dir_a);
    make_tmpdir(f->dir_b);
    assert_int_equal(sign_keyring_load(f->dir_a, NULL, true, &f->a, &err), MG_OK);
    assert_int_equal(sign_keyring_load(f->dir_b, NULL, true, &f->b, &err), MG_OK);
    f->res[0].name = "config.json";
    sha256_raw("{\"layers\":50}", f->res[0].digest);
    f->res[1].name = "tokenizer.json";
    sha256_raw("{\"vocab\":[]}", f->res[1].digest);
    f->res[2].name = "weights/model.safetensors";
    sha256_raw("\x01\x02\x03 weights", f->res[2].digest);
    f->meta = json_pack("{s:s, s:i, s:s, s:n, s:[], s:{s:f}, s:s, s:s, s:s}", "model", "resnet",
                        "version", 3, "artifact", "sha256:abc", "image", "datasets", "metrics",
                        "accuracy", 0.5, "run_id", "run-7", "created_at",
                        "2026-11-21T10:00:00.000Z", "created_by", "alice");
    assert_non_null(f->meta);
    assert_int_equal(
        sign_bundle_create(f->a->active, "resnet-v3", f->res, 3, f->meta, &f->bundle, &err), MG_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    free(f->bundle);
    json_decref(f->meta);
    sign_keyring_free(&f->a);
    sign_keyring_free(&f->b);
    assert_null(f->a);
    rm_rf(f->dir_a);
    rm_rf(f->dir_b);
    free(f);
    return 0;
}

/* ---- PAE and ROOT ----------------------------------------------------- */

static void test_pae_known(void **state)
{
    static const char nul_body[] = "DSSEv1 28 application/vnd.in-toto+json 3 a\0b";
    char big[1000], *expect_big;
    uint8_t *p;
    size_t n = 0;

    (void)state;
    p = sign_pae("{}", 2, &n);
    assert_non_null(p);
    assert_int_equal(n, 43);
    assert_memory_equal(p, "DSSEv1 28 application/vnd.in-toto+json 2 {}", 43);
    free(p);

    p = sign_pae("", 0, &n);
    assert_non_null(p);
    assert_int_equal(n, 41);
    assert_memory_equal(p, "DSSEv1 28 application/vnd.in-toto+json 0 ", 41);
    free(p);

    /* the length is in bytes, and the body is copied as bytes */
    p = sign_pae("a\0b", 3, &n);
    assert_non_null(p);
    assert_int_equal(n, sizeof(nul_body) - 1);
    assert_memory_equal(p, nul_body, n);
    free(p);

    memset(big, 'x', sizeof(big));
    p = sign_pae(big, sizeof(big), &n);
    assert_non_null(p);
    expect_big = calloc(1, 1100);
    assert_non_null(expect_big);
    memcpy(expect_big, "DSSEv1 28 application/vnd.in-toto+json 1000 ", 44);
    memset(expect_big + 44, 'x', 1000);
    assert_int_equal(n, 1044);
    assert_memory_equal(p, expect_big, 1044);
    free(expect_big);
    free(p);
}

static void test_root_known(void **state)
{
    struct fixture *f = *state;
    struct sign_resource zero = {".", {0}};
    char got[65], want[65];

    /* literals: sha256 of 32 zero bytes, and of nothing */
    sign_root(&zero, 1, got);
    assert_string_equal(got, "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925");
    sign_root(NULL, 0, got);
    assert_string_equal(got, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

    sign_root(f->res, 3, got);
    expected_root(f->res, 3, want);
    assert_string_equal(got, want);

    /* the order matters */
    {
        struct sign_resource swapped[2] = {f->res[1], f->res[0]};
        char a[65];
        sign_root(f->res, 2, a);
        sign_root(swapped, 2, got);
        assert_string_not_equal(a, got);
    }
}

/* ---- bundle shape ----------------------------------------------------- */

static void test_bundle_shape(void **state)
{
    struct fixture *f = *state;
    json_t *b = parse(f->bundle), *env, *sigs, *st, *meta;
    char root[65], d[3][65], *body, *expect, *meta_text;
    const char *payload, *sig;
    uint8_t *der;
    size_t der_len, i;
    int n;

    /* every constant of docs/design.md step 6 */
    assert_string_equal(json_string_value(json_object_get(b, "mediaType")),
                        "application/vnd.dev.sigstore.bundle.v0.3+json");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(b, "verificationMaterial"), "publicKey"), "hint")),
        f->a->active->hint);
    assert_true(
        json_is_array(json_object_get(json_object_get(b, "verificationMaterial"), "tlogEntries")));
    assert_int_equal(
        json_array_size(json_object_get(json_object_get(b, "verificationMaterial"), "tlogEntries")),
        0);
    env = json_object_get(b, "dsseEnvelope");
    assert_string_equal(json_string_value(json_object_get(env, "payloadType")), PAYLOAD_TYPE);
    sigs = json_object_get(env, "signatures");
    assert_int_equal(json_array_size(sigs), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(sigs, 0), "keyid")), "");
    payload = json_string_value(json_object_get(env, "payload"));
    sig = json_string_value(json_object_get(json_array_get(sigs, 0), "sig"));
    assert_non_null(payload);
    assert_non_null(sig);
    assert_null(strchr(payload, '\n'));
    assert_null(strchr(sig, '\n'));
    der = b64dec(sig, &der_len);
    assert_true(der_len >= 8 && der_len <= 72);
    assert_int_equal(der[0], 0x30); /* DER SEQUENCE { r, s } */
    free(der);

    /* the whole bundle text: compact, keys in the documented order */
    n = asprintf(
        &expect,
        "{\"mediaType\":\"application/vnd.dev.sigstore.bundle.v0.3+json\","
        "\"verificationMaterial\":{\"publicKey\":{\"hint\":\"%s\"},\"tlogEntries\":[]},"
        "\"dsseEnvelope\":{\"payload\":\"%s\",\"payloadType\":"
        "\"application/vnd.in-toto+json\",\"signatures\":[{\"sig\":\"%s\",\"keyid\":\"\"}]}}",
        f->a->active->hint, payload, sig);
    assert_true(n > 0);
    assert_string_equal(f->bundle, expect);
    free(expect);

    /* the signed statement, byte for byte */
    expected_root(f->res, 3, root);
    for (i = 0; i < 3; i++)
        mg_hex_encode(f->res[i].digest, 32, d[i]);
    meta_text = dump(f->meta);
    assert_string_equal(meta_text,
                        "{\"model\":\"resnet\",\"version\":3,\"artifact\":\"sha256:abc\",\"image\":"
                        "null,\"datasets\":[],\"metrics\":{\"accuracy\":0.5},\"run_id\":\"run-7\","
                        "\"created_at\":\"2026-11-21T10:00:00.000Z\",\"created_by\":\"alice\"}");
    n = asprintf(&expect,
                 "{\"_type\":\"https://in-toto.io/Statement/v1\",\"subject\":[{\"name\":"
                 "\"resnet-v3\",\"digest\":{\"sha256\":\"%s\"}}],\"predicateType\":"
                 "\"https://model_signing/signature/v1.0\",\"predicate\":{\"serialization\":{"
                 "\"method\":\"files\",\"hash_type\":\"sha256\",\"allow_symlinks\":false},"
                 "\"resources\":[{\"name\":\"config.json\",\"algorithm\":\"sha256\",\"digest\":"
                 "\"%s\"},{\"name\":\"tokenizer.json\",\"algorithm\":\"sha256\",\"digest\":\"%s\"},"
                 "{\"name\":\"weights/model.safetensors\",\"algorithm\":\"sha256\",\"digest\":"
                 "\"%s\"}],\"modelgate\":%s}}",
                 root, d[0], d[1], d[2], meta_text);
    assert_true(n > 0);
    body = payload_of(f->bundle);
    assert_string_equal(body, expect);

    /* and as JSON: subject, resources, predicateType, meta */
    st = parse(body);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(st, "subject"), 0), "name")),
                        "resnet-v3");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_array_get(json_object_get(st, "subject"), 0), "digest"),
            "sha256")),
        root);
    assert_string_equal(json_string_value(json_object_get(st, "predicateType")),
                        "https://model_signing/signature/v1.0");
    assert_int_equal(
        json_array_size(json_object_get(json_object_get(st, "predicate"), "resources")), 3);
    meta = json_object_get(json_object_get(st, "predicate"), "modelgate");
    assert_true(json_equal(meta, f->meta));

    json_decref(st);
    free(body);
    free(expect);
    free(meta_text);
    json_decref(b);
}

static void test_bundle_create_rejects(void **state)
{
    struct fixture *f = *state;
    struct sign_resource unsorted[2] = {f->res[1], f->res[0]};
    struct sign_resource dup[2] = {f->res[0], f->res[0]};
    struct sign_resource bad_utf8 = {"\xff\xfe", {0}};
    struct mg_error err = {0};
    struct sign_key pub = {0};
    json_t *arr = json_array();
    char *bundle = NULL;

    assert_int_equal(sign_bundle_create(f->a->active, "m-v1", unsorted, 2, f->meta, &bundle, &err),
                     MG_EINVAL);
    assert_contains(err.message, "path order");
    assert_null(bundle);
    assert_int_equal(sign_bundle_create(f->a->active, "m-v1", dup, 2, f->meta, &bundle, &err),
                     MG_EINVAL);
    assert_null(bundle);
    assert_int_equal(sign_bundle_create(f->a->active, "m-v1", &bad_utf8, 1, f->meta, &bundle, &err),
                     MG_EINVAL);
    assert_contains(err.message, "UTF-8");
    assert_int_equal(sign_bundle_create(f->a->active, "m-v1", f->res, 3, arr, &bundle, &err),
                     MG_EINVAL);
    assert_null(bundle);

    /* a public key cannot sign */
    assert_int_equal(sign_key_from_public_pem(f->a->active->public_pem,
                                              strlen(f->a->active->public_pem), &pub, &err),
                     MG_OK);
    assert_int_not_equal(sign_bundle_create(&pub, "m-v1", f->res, 3, f->meta, &bundle, &err),
                         MG_OK);
    assert_null(bundle);
    sign_key_release(&pub);
    json_decref(arr);
}

/* ---- verification ----------------------------------------------------- */

static void test_verify_ok(void **state)
{
    struct fixture *f = *state;
    struct mg_error err = {0};
    json_t *st = NULL;
    char *bundle = NULL;
    struct sign_resource one = {".", {0}};

    assert_int_equal(
        sign_bundle_verify(f->bundle, strlen(f->bundle), f->a->active, f->res, 3, &st, &err),
        MG_OK);
    assert_non_null(st);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(st, "subject"), 0), "name")),
                        "resnet-v3");
    assert_true(
        json_equal(json_object_get(json_object_get(st, "predicate"), "modelgate"), f->meta));
    json_decref(st);

    /* without a statement out-parameter */
    assert_int_equal(verify(f->bundle, f->a->active, f->res, 3, &err), MG_OK);

    /* a single-file artifact, and an archive with no regular file */
    sha256_raw("single file", one.digest);
    assert_int_equal(sign_bundle_create(f->a->active, "m-v1", &one, 1, f->meta, &bundle, &err),
                     MG_OK);
    assert_int_equal(verify(bundle, f->a->active, &one, 1, &err), MG_OK);
    free(bundle);
    assert_int_equal(sign_bundle_create(f->a->active, "m-v2", NULL, 0, f->meta, &bundle, &err),
                     MG_OK);
    assert_int_equal(verify(bundle, f->a->active, NULL, 0, &err), MG_OK);
    assert_int_equal(verify(bundle, f->a->active, &one, 1, &err), MG_EINVAL);
    free(bundle);
}

static void test_verify_changed_artifact(void **state)
{
    struct fixture *f = *state;
    struct sign_resource actual[3];
    struct mg_error err = {0};
    json_t *st = (json_t *)1;

    memcpy(actual, f->res, sizeof(actual));
    actual[1].digest[17] ^= 0x01; /* one byte of tokenizer.json changed */
    assert_int_equal(
        sign_bundle_verify(f->bundle, strlen(f->bundle), f->a->active, actual, 3, &st, &err),
        MG_EINVAL);
    assert_null(st);
    assert_contains(err.message, "tokenizer.json");
    assert_contains(err.message, "does not match");
}

static void test_verify_changed_payload(void **state)
{
    struct fixture *f = *state;
    struct mg_error err = {0};
    char *body = payload_of(f->bundle), *p, *bad;
    char root[65];

    /* the subject name: nothing but the signature can catch this */
    p = strstr(body, "resnet-v3");
    assert_non_null(p);
    p[8] = '4';
    bad = with_envelope_b64(f->bundle, "payload", body, strlen(body));
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "signature does not verify");
    free(bad);
    p[8] = '3';

    /* one digest character of the manifest */
    expected_root(f->res, 3, root);
    p = strstr(body, root);
    assert_non_null(p);
    p[0] = p[0] == 'a' ? 'b' : 'a';
    bad = with_envelope_b64(f->bundle, "payload", body, strlen(body));
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "signature does not verify");
    free(bad);

    /* an unchanged re-encode still verifies (the test itself is sound) */
    p[0] = root[0];
    bad = with_envelope_b64(f->bundle, "payload", body, strlen(body));
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_OK);
    free(bad);
    free(body);
}

static void test_verify_other_key(void **state)
{
    struct fixture *f = *state;
    struct mg_error err = {0};
    char *by_b = NULL, *forged;
    json_t *b;

    assert_int_equal(sign_bundle_create(f->b->active, "resnet-v3", f->res, 3, f->meta, &by_b, &err),
                     MG_OK);
    assert_int_equal(verify(by_b, f->b->active, f->res, 3, &err), MG_OK);

    /* B's bundle against A's key: the hint tells */
    assert_int_equal(verify(by_b, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "hint");
    assert_contains(err.message, f->b->active->hint);

    /* with A's hint forged in, the signature check tells */
    b = parse(by_b);
    assert_int_equal(json_object_set_new(
                         json_object_get(json_object_get(b, "verificationMaterial"), "publicKey"),
                         "hint", json_string(f->a->active->hint)),
                     0);
    forged = dump(b);
    assert_int_equal(verify(forged, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "signature does not verify");
    free(forged);
    json_decref(b);
    free(by_b);
}

static void test_verify_truncated_signature(void **state)
{
    struct fixture *f = *state;
    struct mg_error err = {0};
    json_t *b = parse(f->bundle);
    const char *sig = json_string_value(json_object_get(
        json_array_get(json_object_get(json_object_get(b, "dsseEnvelope"), "signatures"), 0),
        "sig"));
    size_t n;
    uint8_t *der = b64dec(sig, &n);
    char *bad;

    bad = with_envelope_b64(f->bundle, "sig", der, n - 1);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "signature does not verify");
    free(bad);

    bad = with_envelope_b64(f->bundle, "sig", der, n / 2);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    free(bad);

    bad = with_envelope_b64(f->bundle, "sig", der, 0);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    free(bad);

    /* one flipped bit in r */
    der[6] ^= 0x01;
    bad = with_envelope_b64(f->bundle, "sig", der, n);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    free(bad);
    free(der);
    json_decref(b);
}

static void test_verify_removed_file(void **state)
{
    struct fixture *f = *state;
    struct mg_error err = {0};
    struct sign_resource actual[2] = {f->res[0], f->res[2]};

    assert_int_equal(verify(f->bundle, f->a->active, actual, 2, &err), MG_EINVAL);
    assert_contains(err.message, "'tokenizer.json'");
    assert_contains(err.message, "missing");

    /* the last one */
    assert_int_equal(verify(f->bundle, f->a->active, f->res, 2, &err), MG_EINVAL);
    assert_contains(err.message, "'weights/model.safetensors'");
    assert_contains(err.message, "missing");

    /* all */
    assert_int_equal(verify(f->bundle, f->a->active, NULL, 0, &err), MG_EINVAL);
    assert_contains(err.message, "'config.json'");
}

static void test_verify_added_file(void **state)
{
    struct fixture *f = *state;
    struct mg_error err = {0};
    struct sign_resource actual[4] = {f->res[0], {"extra.txt", {0}}, f->res[1], f->res[2]};
    struct sign_resource at_end[4] = {f->res[0], f->res[1], f->res[2], {"zz.bin", {0}}};

    assert_int_equal(verify(f->bundle, f->a->active, actual, 4, &err), MG_EINVAL);
    assert_contains(err.message, "'extra.txt'");
    assert_contains(err.message, "not in the signed manifest");

    assert_int_equal(verify(f->bundle, f->a->active, at_end, 4, &err), MG_EINVAL);
    assert_contains(err.message, "'zz.bin'");
    assert_contains(err.message, "not in the signed manifest");
}

/* Properly signed statements that are wrong inside. */
static void test_verify_statement_checks(void **state)
{
    struct fixture *f = *state;
    struct mg_error err = {0};
    char root[65], d[65], *body, *bundle;
    struct sign_resource one = {".", {0}};

    sha256_raw("x", one.digest);
    mg_hex_encode(one.digest, 32, d);
    expected_root(&one, 1, root);

    /* a subject digest that is not the files' ROOT */
    assert_true(asprintf(&body,
                         "{\"_type\":\"https://in-toto.io/Statement/v1\",\"subject\":[{\"name\":"
                         "\"m-v1\",\"digest\":{\"sha256\":\"%064d\"}}],\"predicateType\":"
                         "\"https://model_signing/signature/v1.0\",\"predicate\":{\"resources\":[{"
                         "\"name\":\".\",\"algorithm\":\"sha256\",\"digest\":\"%s\"}]}}",
                         0, d) > 0);
    bundle = bundle_from_body(f->a->active, body);
    assert_int_equal(verify(bundle, f->a->active, &one, 1, &err), MG_EINVAL);
    assert_contains(err.message, "root digest");
    free(bundle);
    free(body);

    /* the same with the right ROOT passes: the check above was the reason */
    assert_true(asprintf(&body,
                         "{\"_type\":\"https://in-toto.io/Statement/v1\",\"subject\":[{\"name\":"
                         "\"m-v1\",\"digest\":{\"sha256\":\"%s\"}}],\"predicateType\":"
                         "\"https://model_signing/signature/v1.0\",\"predicate\":{\"resources\":[{"
                         "\"name\":\".\",\"algorithm\":\"sha256\",\"digest\":\"%s\"}]}}",
                         root, d) > 0);
    bundle = bundle_from_body(f->a->active, body);
    assert_int_equal(verify(bundle, f->a->active, &one, 1, &err), MG_OK);
    free(bundle);
    free(body);

    /* another predicate type */
    assert_true(asprintf(&body,
                         "{\"_type\":\"https://in-toto.io/Statement/v1\",\"subject\":[{\"name\":"
                         "\"m-v1\",\"digest\":{\"sha256\":\"%s\"}}],\"predicateType\":"
                         "\"https://slsa.dev/provenance/v1\",\"predicate\":{\"resources\":[{"
                         "\"name\":\".\",\"algorithm\":\"sha256\",\"digest\":\"%s\"}]}}",
                         root, d) > 0);
    bundle = bundle_from_body(f->a->active, body);
    assert_int_equal(verify(bundle, f->a->active, &one, 1, &err), MG_EINVAL);
    assert_contains(err.message, "predicateType");
    free(bundle);
    free(body);

    /* a signed payload that is not JSON */
    bundle = bundle_from_body(f->a->active, "not json");
    assert_int_equal(verify(bundle, f->a->active, &one, 1, &err), MG_EINVAL);
    free(bundle);
}

static void test_verify_malformed(void **state)
{
    struct fixture *f = *state;
    struct mg_error err = {0};
    json_t *b;
    char *bad, *big;
    size_t big_len = ((size_t)64 << 20) + 1;

    assert_int_equal(verify("{", f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "not valid JSON");
    assert_int_equal(verify("[]", f->a->active, f->res, 3, &err), MG_EINVAL);

    b = parse(f->bundle);
    json_object_set_new(b, "mediaType", json_string("application/vnd.dev.sigstore.bundle+json"));
    bad = dump(b);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "mediaType");
    free(bad);
    json_decref(b);

    b = parse(f->bundle);
    json_object_set_new(json_object_get(b, "dsseEnvelope"), "payloadType",
                        json_string("application/json"));
    bad = dump(b);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "payloadType");
    free(bad);
    json_decref(b);

    b = parse(f->bundle);
    json_object_del(b, "verificationMaterial");
    bad = dump(b);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "hint");
    free(bad);
    json_decref(b);

    b = parse(f->bundle);
    json_object_set_new(json_object_get(b, "dsseEnvelope"), "signatures", json_array());
    bad = dump(b);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "signatures");
    free(bad);
    json_decref(b);

    b = parse(f->bundle);
    json_object_del(json_object_get(b, "dsseEnvelope"), "payload");
    bad = dump(b);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    assert_contains(err.message, "payload");
    free(bad);
    json_decref(b);

    b = parse(f->bundle);
    json_object_set_new(json_object_get(b, "dsseEnvelope"), "payload", json_string("!!!!"));
    bad = dump(b);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    free(bad);
    json_decref(b);

    /* duplicate keys: parsers must not disagree on which one counts */
    bad = malloc(strlen(f->bundle) + 64);
    assert_non_null(bad);
    sprintf(bad, "{\"mediaType\":\"x\",%s", f->bundle + 1);
    assert_int_equal(verify(bad, f->a->active, f->res, 3, &err), MG_EINVAL);
    free(bad);

    /* over 64 MiB is refused before parsing */
    big = malloc(big_len);
    assert_non_null(big);
    memset(big, ' ', big_len);
    memcpy(big, f->bundle, strlen(f->bundle));
    mg_error_clear(&err);
    assert_int_equal(sign_bundle_verify(big, big_len, f->a->active, f->res, 3, NULL, &err),
                     MG_EINVAL);
    assert_contains(err.message, "limit");
    free(big);
}

/* ---- public keys ------------------------------------------------------ */

static void test_key_from_public_pem(void **state)
{
    struct fixture *f = *state;
    const struct sign_key *a = f->a->active;
    struct mg_error err = {0};
    struct sign_key pub = {0};
    char *crlf, *q;
    const char *p;
    unsigned char *der = NULL;
    int der_len;
    char keyid[65], hint[65];

    /* keyid and hint computed here from their definitions */
    der_len = i2d_PUBKEY(a->pkey, &der);
    assert_true(der_len > 0);
    mg_sha256_hex(der, (size_t)der_len, keyid);
    OPENSSL_free(der);
    assert_string_equal(a->keyid, keyid);
    mg_sha256_hex(a->public_pem, strlen(a->public_pem), hint);
    assert_string_equal(a->hint, hint);
    assert_memory_equal(a->public_pem, "-----BEGIN PUBLIC KEY-----\n", 27);

    assert_int_equal(sign_key_from_public_pem(a->public_pem, strlen(a->public_pem), &pub, &err),
                     MG_OK);
    assert_string_equal(pub.keyid, a->keyid);
    assert_string_equal(pub.hint, a->hint);
    assert_string_equal(pub.public_pem, a->public_pem);
    assert_false(pub.active);
    assert_int_equal(verify(f->bundle, &pub, f->res, 3, &err), MG_OK);
    sign_key_release(&pub);
    assert_null(pub.pkey);

    /* CRLF line endings: same key, same hint */
    crlf = calloc(1, 2 * strlen(a->public_pem) + 1);
    assert_non_null(crlf);
    for (p = a->public_pem, q = crlf; *p; p++) {
        if (*p == '\n')
            *q++ = '\r';
        *q++ = *p;
    }
    assert_int_equal(sign_key_from_public_pem(crlf, strlen(crlf), &pub, &err), MG_OK);
    assert_string_equal(pub.hint, a->hint);
    sign_key_release(&pub);
    free(crlf);

    assert_int_equal(sign_key_from_public_pem("hello", 5, &pub, &err), MG_EINVAL);
    assert_null(pub.pkey);
    assert_null(pub.public_pem);
    assert_int_equal(sign_key_from_public_pem("", 0, &pub, &err), MG_EINVAL);
}

/* ---- keyring ---------------------------------------------------------- */

static void test_keyring_generate_reload(void **state)
{
    struct sign_keyring *kr = NULL, *kr2 = NULL;
    struct mg_error err = {0};
    char dir[64], path[PATH_MAX], keyid[65], *text;
    DIR *d;
    struct dirent *de;
    int entries = 0;

    (void)state;
    make_tmpdir(dir);

    /* nothing there and create == false */
    assert_int_equal(sign_keyring_load(dir, NULL, false, &kr, &err), MG_ENOTFOUND);
    assert_null(kr);

    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_OK);
    assert_int_equal(kr->n, 1);
    assert_ptr_equal(kr->active, &kr->keys[0]);
    assert_true(kr->active->active);
    assert_true(llabs(kr->active->created_ms - mg_now_ms()) < 60000);
    memcpy(keyid, kr->active->keyid, sizeof(keyid));

    snprintf(path, sizeof(path), "%s/keys", dir);
    assert_int_equal(file_mode(path), 0700);
    key_path(dir, keyid, path);
    assert_int_equal(file_mode(path), 0600);
    text = read_text(path);
    assert_memory_equal(text, "-----BEGIN PRIVATE KEY-----\n", 28); /* PKCS#8 */
    free(text);
    snprintf(path, sizeof(path), "%s/keys/active", dir);
    assert_int_equal(file_mode(path), 0600);
    text = read_text(path);
    assert_int_equal(strlen(text), 65);
    assert_memory_equal(text, keyid, 64);
    assert_int_equal(text[64], '\n');
    free(text);

    /* no temp files left behind */
    snprintf(path, sizeof(path), "%s/keys", dir);
    d = opendir(path);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
            entries++;
    }
    closedir(d);
    assert_int_equal(entries, 2);

    /* other names in keys/ are ignored, whatever their mode */
    snprintf(path, sizeof(path), "%s/keys/README.txt", dir);
    write_file(path, "notes\n", 6, 0644);
    snprintf(path, sizeof(path), "%s/keys/old.pem.bak", dir);
    write_file(path, "junk\n", 5, 0644);

    /* reload: the same key, and create == true does not make another */
    assert_int_equal(sign_keyring_load(dir, NULL, false, &kr2, &err), MG_OK);
    assert_int_equal(kr2->n, 1);
    assert_string_equal(kr2->active->keyid, keyid);
    assert_string_equal(kr2->active->hint, kr->active->hint);
    assert_string_equal(kr2->active->public_pem, kr->active->public_pem);
    sign_keyring_free(&kr2);
    assert_null(kr2);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr2, &err), MG_OK);
    assert_int_equal(kr2->n, 1);
    assert_string_equal(kr2->active->keyid, keyid);
    assert_ptr_equal(sign_keyring_by_hint(kr2, kr->active->hint), kr2->active);
    assert_null(sign_keyring_by_hint(kr2, "00"));

    sign_keyring_free(&kr2);
    sign_keyring_free(&kr);
    sign_keyring_free(&kr); /* NULL is fine */
    rm_rf(dir);
}

static void test_keyring_refuses_loose_modes(void **state)
{
    struct sign_keyring *kr = NULL;
    struct mg_error err = {0};
    char dir[64], path[PATH_MAX], keys[PATH_MAX], other[64], ext[PATH_MAX];

    (void)state;
    make_tmpdir(dir);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_OK);
    key_path(dir, kr->active->keyid, path);
    sign_keyring_free(&kr);

    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_EINVAL);
    assert_null(kr);
    assert_contains(err.message, "readable by group or others");
    assert_contains(err.message, "chmod 600");
    assert_contains(err.message, path);

    assert_int_equal(chmod(path, 0640), 0);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_EINVAL);
    assert_int_equal(chmod(path, 0600), 0);

    snprintf(keys, sizeof(keys), "%s/keys", dir);
    assert_int_equal(chmod(keys, 0755), 0);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_EINVAL);
    assert_contains(err.message, "chmod 700");
    assert_int_equal(chmod(keys, 0750), 0); /* the group may look; others may not */
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_OK);
    sign_keyring_free(&kr);
    assert_int_equal(chmod(keys, 0700), 0);

    /* an explicit key file gets the same check */
    make_tmpdir(other);
    snprintf(ext, sizeof(ext), "%s/signing.pem", other);
    write_new_key(ext, "EC", "P-256", 0644);
    assert_int_equal(sign_keyring_load(dir, ext, false, &kr, &err), MG_EINVAL);
    assert_contains(err.message, "chmod 600");
    assert_contains(err.message, ext);

    rm_rf(other);
    rm_rf(dir);
}

static void test_keyring_refuses_other_curves(void **state)
{
    struct sign_keyring *kr = NULL;
    struct mg_error err = {0};
    struct sign_key pub = {0};
    char dir[64], path[PATH_MAX], pem[4096];
    const char *text;
    EVP_PKEY *pk;
    BIO *bio;
    char *data;
    long n;

    (void)state;
    make_tmpdir(dir);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_OK);
    sign_keyring_free(&kr);

    snprintf(path, sizeof(path), "%s/keys/p384.pem", dir);
    write_new_key(path, "EC", "P-384", 0600);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_EINVAL);
    assert_null(kr);
    assert_contains(err.message, "secp384r1");
    assert_contains(err.message, path);
    /* ... and as the key file */
    assert_int_equal(sign_keyring_load(NULL, path, false, &kr, &err), MG_EINVAL);
    assert_contains(err.message, "secp384r1");
    assert_int_equal(unlink(path), 0);

    snprintf(path, sizeof(path), "%s/keys/ed.pem", dir);
    write_new_key(path, "ED25519", NULL, 0600);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_EINVAL);
    assert_contains(err.message, "ED25519");
    assert_int_equal(unlink(path), 0);

    snprintf(path, sizeof(path), "%s/keys/garbage.pem", dir);
    text = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
    write_file(path, text, strlen(text), 0600);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_EINVAL);
    assert_contains(err.message, "garbage.pem");
    assert_int_equal(unlink(path), 0);

    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_OK);
    sign_keyring_free(&kr);

    /* a P-384 public key is refused too */
    pk = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
    bio = BIO_new(BIO_s_mem());
    assert_non_null(pk);
    assert_non_null(bio);
    assert_int_equal(PEM_write_bio_PUBKEY(bio, pk), 1);
    n = BIO_get_mem_data(bio, &data);
    assert_true(n > 0 && (size_t)n < sizeof(pem));
    memcpy(pem, data, (size_t)n);
    assert_int_equal(sign_key_from_public_pem(pem, (size_t)n, &pub, &err), MG_EINVAL);
    assert_contains(err.message, "secp384r1");
    assert_null(pub.pkey);
    BIO_free(bio);
    EVP_PKEY_free(pk);
    rm_rf(dir);
}

static void test_keyring_rotate(void **state)
{
    struct fixture *f = *state;
    struct sign_keyring *kr = NULL;
    struct mg_error err = {0};
    struct sign_key old_pub = {0};
    const struct sign_key *by_hint;
    char dir[64], path[PATH_MAX], old_id[65], new_id[65] = "", *old_pem, *old_bundle = NULL, *text;
    struct timespec ms20 = {0, 20 * 1000 * 1000};
    const char *at;
    json_t *j, *items;

    make_tmpdir(dir);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_OK);
    memcpy(old_id, kr->active->keyid, sizeof(old_id));
    old_pem = strdup(kr->active->public_pem);
    assert_non_null(old_pem);
    assert_int_equal(
        sign_bundle_create(kr->active, "resnet-v3", f->res, 3, f->meta, &old_bundle, &err), MG_OK);
    sign_keyring_free(&kr);

    nanosleep(&ms20, NULL);
    assert_int_equal(sign_keyring_rotate(dir, new_id, &err), MG_OK);
    assert_int_equal(strlen(new_id), 64);
    assert_string_not_equal(new_id, old_id);
    snprintf(path, sizeof(path), "%s/keys/active", dir);
    text = read_text(path);
    assert_memory_equal(text, new_id, 64);
    free(text);
    key_path(dir, new_id, path);
    assert_int_equal(file_mode(path), 0600);

    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_OK);
    assert_int_equal(kr->n, 2);
    assert_string_equal(kr->active->keyid, new_id);
    assert_string_equal(kr->keys[0].keyid, new_id); /* newest first */
    assert_true(kr->keys[0].active);
    assert_string_equal(kr->keys[1].keyid, old_id);
    assert_false(kr->keys[1].active);
    assert_true(kr->keys[0].created_ms >= kr->keys[1].created_ms);

    j = sign_keyring_json(kr);
    assert_non_null(j);
    items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "keyid")),
                        new_id);
    assert_true(json_is_true(json_object_get(json_array_get(items, 0), "active")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "keyid")),
                        old_id);
    assert_true(json_is_false(json_object_get(json_array_get(items, 1), "active")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "algorithm")),
                        "ecdsa-p256-sha256");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(items, 1), "public_key_pem")), old_pem);
    at = json_string_value(json_object_get(json_array_get(items, 1), "created_at"));
    assert_non_null(at);
    assert_int_equal(strlen(at), 24); /* 2026-11-21T10:00:00.123Z */
    assert_int_equal(at[23], 'Z');
    json_decref(j);

    /* the old bundle still verifies with the old public key, and not with the new one */
    assert_int_equal(sign_key_from_public_pem(old_pem, strlen(old_pem), &old_pub, &err), MG_OK);
    assert_string_equal(old_pub.keyid, old_id);
    assert_int_equal(verify(old_bundle, &old_pub, f->res, 3, &err), MG_OK);
    by_hint = sign_keyring_by_hint(kr, old_pub.hint);
    assert_ptr_equal(by_hint, &kr->keys[1]);
    assert_int_equal(verify(old_bundle, by_hint, f->res, 3, &err), MG_OK);
    assert_int_equal(verify(old_bundle, kr->active, f->res, 3, &err), MG_EINVAL);

    sign_key_release(&old_pub);
    sign_keyring_free(&kr);
    free(old_bundle);
    free(old_pem);
    rm_rf(dir);
}

static void test_keyring_key_file(void **state)
{
    struct sign_keyring *kr = NULL, *kr2 = NULL;
    struct mg_error err = {0};
    char dir[64], other[64], ext[PATH_MAX], inner[PATH_MAX], dir_id[65];

    (void)state;
    make_tmpdir(dir);
    make_tmpdir(other);
    assert_int_equal(sign_keyring_load(dir, NULL, true, &kr, &err), MG_OK);
    memcpy(dir_id, kr->active->keyid, sizeof(dir_id));
    key_path(dir, dir_id, inner);
    sign_keyring_free(&kr);

    snprintf(ext, sizeof(ext), "%s/signing.pem", other);
    write_new_key(ext, "EC", "P-256", 0600);

    /* the key file is active and joins the ring */
    assert_int_equal(sign_keyring_load(dir, ext, false, &kr, &err), MG_OK);
    assert_int_equal(kr->n, 2);
    assert_string_not_equal(kr->active->keyid, dir_id);
    assert_true(kr->active->active);
    assert_false(sign_keyring_by_hint(kr, kr->active->hint) != kr->active);
    assert_true(kr->keys[0].active != kr->keys[1].active);

    /* a key file already in the ring is not added twice */
    assert_int_equal(sign_keyring_load(dir, inner, false, &kr2, &err), MG_OK);
    assert_int_equal(kr2->n, 1);
    assert_string_equal(kr2->active->keyid, dir_id);
    sign_keyring_free(&kr2);

    /* no data directory: just the key file */
    assert_int_equal(sign_keyring_load(NULL, ext, false, &kr2, &err), MG_OK);
    assert_int_equal(kr2->n, 1);
    assert_string_equal(kr2->active->keyid, kr->active->keyid);
    sign_keyring_free(&kr2);

    /* a key file in an empty data directory: no key is generated */
    sign_keyring_free(&kr);
    rm_rf(dir);
    make_tmpdir(dir);
    assert_int_equal(sign_keyring_load(dir, ext, true, &kr2, &err), MG_OK);
    assert_int_equal(kr2->n, 1);
    sign_keyring_free(&kr2);

    snprintf(ext, sizeof(ext), "%s/missing.pem", other);
    assert_int_not_equal(sign_keyring_load(dir, ext, true, &kr2, &err), MG_OK);
    assert_null(kr2);
    assert_contains(err.message, "missing.pem");

    rm_rf(other);
    rm_rf(dir);
}

/* ---- stock openssl ---------------------------------------------------- */

static void test_openssl_cli(void **state)
{
    struct fixture *f = *state;
    char dir[64], path[PATH_MAX], cmd[4 * PATH_MAX];
    json_t *b = parse(f->bundle);
    json_t *env = json_object_get(b, "dsseEnvelope");
    size_t body_len, sig_len, pae_len;
    uint8_t *body = b64dec(json_string_value(json_object_get(env, "payload")), &body_len);
    uint8_t *sig = b64dec(json_string_value(json_object_get(
                              json_array_get(json_object_get(env, "signatures"), 0), "sig")),
                          &sig_len);
    uint8_t *pae = sign_pae((const char *)body, body_len, &pae_len);

    assert_non_null(pae);
    make_tmpdir(dir);
    snprintf(path, sizeof(path), "%s/pub.pem", dir);
    write_file(path, f->a->active->public_pem, strlen(f->a->active->public_pem), 0644);
    snprintf(path, sizeof(path), "%s/body", dir);
    write_file(path, body, body_len, 0644);
    snprintf(path, sizeof(path), "%s/sig", dir);
    write_file(path, sig, sig_len, 0644);
    snprintf(path, sizeof(path), "%s/pae", dir);
    write_file(path, pae, pae_len, 0644);

    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl dgst -sha256 -verify pub.pem -signature sig pae >/dev/null 2>&1",
             dir);
    assert_int_equal(run_sh(cmd), 0);

    /* the PAE of docs/design.md's shell recipe is byte-identical to sign_pae() */
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && { printf 'DSSEv1 28 application/vnd.in-toto+json %%d ' "
             "\"$(stat -c%%s body)\"; cat body; } > pae2 && cmp -s pae pae2",
             dir);
    assert_int_equal(run_sh(cmd), 0);

    /* the whole recipe from the bundle file, when jq is there */
    if (run_sh("command -v jq >/dev/null 2>&1") == 0) {
        snprintf(path, sizeof(path), "%s/v.sig", dir);
        write_file(path, f->bundle, strlen(f->bundle), 0644);
        snprintf(cmd, sizeof(cmd),
                 "cd '%s' && jq -r .dsseEnvelope.payload v.sig | base64 -d > body3 && "
                 "jq -r '.dsseEnvelope.signatures[0].sig' v.sig | base64 -d > sig3 && "
                 "{ printf 'DSSEv1 28 application/vnd.in-toto+json %%d ' "
                 "\"$(stat -c%%s body3)\"; cat body3; } > pae3 && "
                 "openssl dgst -sha256 -verify pub.pem -signature sig3 pae3 >/dev/null 2>&1",
                 dir);
        assert_int_equal(run_sh(cmd), 0);
    }

    /* one flipped byte of the PAE and openssl refuses */
    pae[pae_len - 5] ^= 0x01;
    snprintf(path, sizeof(path), "%s/pae", dir);
    write_file(path, pae, pae_len, 0644);
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl dgst -sha256 -verify pub.pem -signature sig pae >/dev/null 2>&1",
             dir);
    assert_int_not_equal(run_sh(cmd), 0);

    free(pae);
    free(sig);
    free(body);
    json_decref(b);
    rm_rf(dir);
}

/* model_signing's order, computed here independently of sign_path_cmp: split both paths
 * into components and compare the lists lexicographically, component by component. */
static int independent_path_cmp(const char *a, const char *b)
{
    char x[256], y[256], *sx = NULL, *sy = NULL, *cx, *cy;
    int c;

    snprintf(x, sizeof(x), "%s", a);
    snprintf(y, sizeof(y), "%s", b);
    cx = strtok_r(x, "/", &sx);
    cy = strtok_r(y, "/", &sy);
    while (cx != NULL && cy != NULL) {
        if ((c = strcmp(cx, cy)) != 0)
            return c < 0 ? -1 : 1;
        cx = strtok_r(NULL, "/", &sx);
        cy = strtok_r(NULL, "/", &sy);
    }
    return cx == NULL ? (cy == NULL ? 0 : -1) : 1;
}

static int independent_res_cmp(const void *a, const void *b)
{
    return independent_path_cmp(((const struct sign_resource *)a)->name,
                                ((const struct sign_resource *)b)->name);
}

static int byte_res_cmp(const void *a, const void *b)
{
    return strcmp(((const struct sign_resource *)a)->name, ((const struct sign_resource *)b)->name);
}

static int sign_of(int v)
{
    return (v > 0) - (v < 0);
}

static void test_path_order(void **state)
{
    static const char *const names[] = {
        "sub/a.txt", "sub-notes.txt",
        "sub.cfg",   "sub/deep/b",
        "sub",       "a",
        "a-b",       "a/b/c",
        "a.b/c",     "a0",
        "ab",        "Z",
        "_x",        "é",
        "sub/",      "su",
    };
    size_t n = sizeof(names) / sizeof(names[0]), i, j;

    (void)state;
    for (i = 0; i < n; i++) {
        for (j = 0; j < n; j++) {
            if (strchr(names[i], '/') != NULL && names[i][strlen(names[i]) - 1] == '/')
                continue; /* not a normalised path */
            if (strchr(names[j], '/') != NULL && names[j][strlen(names[j]) - 1] == '/')
                continue;
            if (sign_of(sign_path_cmp(names[i], names[j])) !=
                independent_path_cmp(names[i], names[j]))
                fail_msg("'%s' vs '%s': %d, expected %d", names[i], names[j],
                         sign_path_cmp(names[i], names[j]),
                         independent_path_cmp(names[i], names[j]));
        }
    }
    /* the example of docs/design.md "Signing" */
    assert_true(sign_path_cmp("sub/deep/b", "sub-notes.txt") < 0);
    assert_true(sign_path_cmp("sub/a.txt", "sub.cfg") < 0);
    assert_true(strcmp("sub/a.txt", "sub.cfg") > 0); /* where byte order disagrees */
}

/* Names whose byte order and path order differ: the bundle lists them in path order, and the
 * subject is the ROOT over that order, both computed here independently. */
static void test_bundle_path_order(void **state)
{
    struct fixture *f = *state;
    struct sign_resource res[4] = {
        {"sub.cfg", {0}}, {"sub-notes.txt", {0}}, {"sub/deep/b", {0}}, {"sub/a.txt", {0}}};
    struct sign_resource bytes[4];
    struct mg_error err = {0};
    char *bundle = NULL, *body, root[65];
    json_t *st, *items;
    size_t i;

    for (i = 0; i < 4; i++)
        sha256_raw(res[i].name, res[i].digest);
    memcpy(bytes, res, sizeof(res));
    qsort(res, 4, sizeof(res[0]), independent_res_cmp);
    qsort(bytes, 4, sizeof(bytes[0]), byte_res_cmp);
    assert_string_equal(res[0].name, "sub/a.txt");
    assert_string_equal(res[1].name, "sub/deep/b");
    assert_string_equal(res[2].name, "sub-notes.txt");
    assert_string_equal(res[3].name, "sub.cfg");

    /* byte order is refused at signing, path order accepted */
    assert_int_equal(sign_bundle_create(f->a->active, "m-v1", bytes, 4, f->meta, &bundle, &err),
                     MG_EINVAL);
    assert_int_equal(sign_bundle_create(f->a->active, "m-v1", res, 4, f->meta, &bundle, &err),
                     MG_OK);
    body = payload_of(bundle);
    st = parse(body);
    items = json_object_get(json_object_get(st, "predicate"), "resources");
    assert_int_equal(json_array_size(items), 4);
    for (i = 0; i < 4; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(items, i), "name")),
                            res[i].name);
    expected_root(res, 4, root);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_array_get(json_object_get(st, "subject"), 0), "digest"),
            "sha256")),
        root);
    /* verification takes the actual files in any order */
    assert_int_equal(verify(bundle, f->a->active, res, 4, &err), MG_OK);
    assert_int_equal(verify(bundle, f->a->active, bytes, 4, &err), MG_OK);
    json_decref(st);
    free(body);
    free(bundle);
}

/* A bundle stored before the order changed lists its files in byte order, with the ROOT over
 * that order: it still verifies; the same bundle with its ROOT recomputed in another order
 * (a forgery of the subject) does not. */
static void test_verify_legacy_byte_order(void **state)
{
    struct fixture *f = *state;
    struct sign_resource res[4] = {
        {"sub.cfg", {0}}, {"sub-notes.txt", {0}}, {"sub/deep/b", {0}}, {"sub/a.txt", {0}}};
    struct sign_resource path[4];
    struct mg_error err = {0};
    char *bundle = NULL, *body, *legacy_body, *legacy, root[65];
    json_t *st, *items, *sorted, *digest;
    size_t i, j;

    for (i = 0; i < 4; i++)
        sha256_raw(res[i].name, res[i].digest);
    qsort(res, 4, sizeof(res[0]), byte_res_cmp);
    memcpy(path, res, sizeof(res));
    qsort(path, 4, sizeof(path[0]), independent_res_cmp);
    assert_int_equal(sign_bundle_create(f->a->active, "m-v1", path, 4, f->meta, &bundle, &err),
                     MG_OK);
    /* rewrite the statement as the old code wrote it: byte order, ROOT over byte order */
    body = payload_of(bundle);
    st = parse(body);
    items = json_incref(json_object_get(json_object_get(st, "predicate"), "resources"));
    sorted = json_array();
    for (i = 0; i < 4; i++)
        for (j = 0; j < 4; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(items, j), "name")),
                       res[i].name) == 0)
                json_array_append(sorted, json_array_get(items, j));
    assert_int_equal(json_array_size(sorted), 4);
    json_object_set_new(json_object_get(st, "predicate"), "resources", sorted);
    digest = json_object_get(json_array_get(json_object_get(st, "subject"), 0), "digest");
    expected_root(res, 4, root);
    json_object_set_new(digest, "sha256", json_string(root));
    legacy_body = dump(st);
    legacy = bundle_from_body(f->a->active, legacy_body);
    assert_int_equal(verify(legacy, f->a->active, path, 4, &err), MG_OK);
    assert_int_equal(verify(legacy, f->a->active, res, 4, &err), MG_OK);
    free(legacy);
    free(legacy_body);

    /* byte-order listing with a path-order ROOT: the subject no longer matches */
    expected_root(path, 4, root);
    json_object_set_new(digest, "sha256", json_string(root));
    legacy_body = dump(st);
    legacy = bundle_from_body(f->a->active, legacy_body);
    assert_int_equal(verify(legacy, f->a->active, path, 4, &err), MG_EINVAL);
    assert_contains(err.message, "root digest");
    free(legacy);
    free(legacy_body);

    /* a signed file listed twice is refused */
    json_array_append(json_object_get(json_object_get(st, "predicate"), "resources"),
                      json_array_get(items, 0));
    legacy_body = dump(st);
    legacy = bundle_from_body(f->a->active, legacy_body);
    assert_int_equal(verify(legacy, f->a->active, path, 4, &err), MG_EINVAL);
    free(legacy);
    free(legacy_body);

    json_decref(items);
    json_decref(st);
    free(body);
    free(bundle);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pae_known),
        cmocka_unit_test(test_root_known),
        cmocka_unit_test(test_bundle_shape),
        cmocka_unit_test(test_bundle_create_rejects),
        cmocka_unit_test(test_path_order),
        cmocka_unit_test(test_bundle_path_order),
        cmocka_unit_test(test_verify_legacy_byte_order),
        cmocka_unit_test(test_verify_ok),
        cmocka_unit_test(test_verify_changed_artifact),
        cmocka_unit_test(test_verify_changed_payload),
        cmocka_unit_test(test_verify_other_key),
        cmocka_unit_test(test_verify_truncated_signature),
        cmocka_unit_test(test_verify_removed_file),
        cmocka_unit_test(test_verify_added_file),
        cmocka_unit_test(test_verify_statement_checks),
        cmocka_unit_test(test_verify_malformed),
        cmocka_unit_test(test_key_from_public_pem),
        cmocka_unit_test(test_keyring_generate_reload),
        cmocka_unit_test(test_keyring_refuses_loose_modes),
        cmocka_unit_test(test_keyring_refuses_other_curves),
        cmocka_unit_test(test_keyring_rotate),
        cmocka_unit_test(test_keyring_key_file),
        cmocka_unit_test(test_openssl_cli),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
