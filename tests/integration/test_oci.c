/*
 * test_oci.c - M17: every version pulled with standard OCI tools (docs/contract.md "OCI
 * distribution (read-only)"), against the real daemon.
 *
 *   - Debian's skopeo: inspect --raw (and --config --raw) and copy docker://…/fraud:v1 to an
 *     oci: layout with --src-creds (the token flow: 401 challenge, GET /v2/token with Basic,
 *     then bearer); every layer is a file of the version with that file's digest, and the
 *     copied bytes hash to it; fraud:production follows a rollback.
 *   - The distribution spec's pull workflow, request by request (its conformance suite is not
 *     installable here): manifests HEAD/GET by tag and digest, Accept, blobs HEAD/GET with
 *     Range, tags/list with n/last and Link, referrers, and the 404 shapes and codes.
 *   - Writes answer 405 UNSUPPORTED; no credentials or a wrong token 401 with the challenge;
 *     under --read-scope team another team's model is NAME_UNKNOWN exactly like a missing
 *     one; the layer cache stays under --oci-layer-cache; the manifest digest survives a
 *     restart (and the whole program runs again on PostgreSQL as pg_integration_test_oci).
 *
 * skopeo missing: the skopeo tests skip (fail with MG_REQUIRE_ALL=1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "base/util.h"
#include "harness.h"
#include "sys.h"

#define OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define BUNDLE_TYPE "application/vnd.dev.sigstore.bundle.v0.3+json"
#define EMPTY_DIGEST "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
#define WEIGHTS_BYTES (200 * 1024)
#define CACHE_CAP (64 * 1024)

static struct mg_server *srv;
static char *risk_reader, *ads_reader;
static char art1[IT_DIGEST_LEN + 1], art2[IT_DIGEST_LEN + 1], tiny[IT_DIGEST_LEN + 1];
static char basic[256]; /* "Authorization: Basic …" of the admin token, any user name */

/* ---- fixtures ------------------------------------------------------------------------ */

/* The weights file of model_tgz(seed): a real safetensors file (the upload reads its
 * header), one U8 tensor of patterned bytes. */
static void fill_weights(uint32_t seed, char *weights)
{
    size_t n = WEIGHTS_BYTES - 8 - 96, hl, k;
    char hdr[97];

    hl = (size_t)snprintf(hdr, sizeof(hdr),
                          "{\"w\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", n,
                          n);
    assert_true(hl <= 96);
    memset(hdr + hl, ' ', 96 - hl);
    for (k = 0; k < 8; k++)
        weights[k] = (char)(k == 0 ? 96 : 0);
    memcpy(weights + 8, hdr, 96);
    it_pattern(seed, 0, weights + 104, n);
}

/* A tar.gz of a model directory: weights (seeded pattern), config, README, code. */
static void model_tgz(uint32_t seed, char digest[IT_DIGEST_LEN + 1])
{
    static const char *const names[] = {"model.safetensors", "config.json", "README.md",
                                        "sub/tok.py"};
    struct archive *a = archive_write_new();
    size_t cap = WEIGHTS_BYTES + 65536, used = 0, i;
    char *buf = malloc(cap), *weights = malloc(WEIGHTS_BYTES), cfg[64];
    struct it_resp *r;

    assert_non_null(buf);
    assert_non_null(weights);
    fill_weights(seed, weights);
    snprintf(cfg, sizeof(cfg), "{\"seed\":%u}", seed);
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
    for (i = 0; i < 4; i++) {
        const char *body = i == 0   ? weights
                           : i == 1 ? cfg
                           : i == 2 ? "# fraud scorer\n"
                                    : "print('hi')\n";
        size_t len = i == 0 ? WEIGHTS_BYTES : strlen(body);
        struct archive_entry *e = archive_entry_new();

        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_size(e, (la_int64_t)len);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        assert_int_equal(archive_write_data(a, body, len), (la_ssize_t)len);
        archive_entry_free(e);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    r = it_upload(srv, buf, used, digest);
    it_resp_free(srv, &r);
    free(buf);
    free(weights);
}

static char *reader_token(const char *name, const char *team)
{
    char body[160];
    struct it_resp *r;
    char *t;

    snprintf(body, sizeof(body), "{\"name\":\"%s\",\"roles\":[\"reader\"],\"teams\":[\"%s\"]}",
             name, team);
    r = it_jreq(srv, "POST", "/api/v1/tokens", srv->admin_token, body);
    it_expect_status(srv, r, 201);
    t = strdup(it_jstr(r->json, "token"));
    it_resp_free(srv, &r);
    return t;
}

static int setup(void **state)
{
    static const char *const args[] = {"--read-scope", "team", "--oci-layer-cache", "64K", NULL};
    char pair[200], *b64;
    struct it_resp *r;

    (void)state;
    srv = it_server_start(args);
    snprintf(pair, sizeof(pair), "anyone:%s", srv->admin_token);
    b64 = mg_base64_encode((const uint8_t *)pair, strlen(pair));
    snprintf(basic, sizeof(basic), "Authorization: Basic %s", b64);
    free(b64);
    r = it_jreq(srv, "POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"risk\"}");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"ads\"}");
    it_resp_free(srv, &r);
    risk_reader = reader_token("risk-reader", "risk");
    ads_reader = reader_token("ads-reader", "ads");

    model_tgz(1, art1);
    model_tgz(2, art2);
    r = it_upload(srv, "a single weights file", 21, tiny);
    it_resp_free(srv, &r);
    it_model_create(srv, srv->admin_token, "fraud");
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/owners", srv->admin_token,
                "{\"teams\":[\"risk\"]}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    it_version_create(srv, srv->admin_token, "fraud", art1,
                      json_pack("{s:{s:f}, s:{s:I, s:s}}", "metrics", "auc", 0.91, "resources",
                                "parameters", (json_int_t)7000000000LL, "precision", "fp16"));
    it_version_create(srv, srv->admin_token, "fraud", art2, NULL);
    it_model_create(srv, srv->admin_token, "tiny");
    it_version_create(srv, srv->admin_token, "tiny", tiny, NULL);
    /* production: v1, then v2 (its last-known-good); staging: v2; canary: a split, which
     * makes no version known-good. */
    it_alias_to(srv, srv->admin_token, "fraud", "production", 1, 0);
    it_alias_to(srv, srv->admin_token, "fraud", "production", 2, 0);
    it_alias_to(srv, srv->admin_token, "fraud", "staging", 2, 0);
    it_alias_set(srv, srv->admin_token, "fraud", "canary",
                 "{\"routes\":[{\"version\":1,\"weight\":50},{\"version\":2,\"weight\":50}]}");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(risk_reader);
    free(ads_reader);
    it_server_free(&srv);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------- */

static struct it_resp *oci(const char *method, const char *path, const char *extra)
{
    const char *const h[] = {basic, extra, NULL};

    return it_request_h(srv, method, path, NULL, NULL, NULL, 0, h);
}

/* Assert an OCI error: status and {"errors":[{"code":code,"message":…}]}. */
#define expect_oci_error(r, status, code) expect_oci_error_at(r, status, code, __FILE__, __LINE__)
static void expect_oci_error_at(const struct it_resp *r, long status, const char *code,
                                const char *file, int line)
{
    json_t *e = json_array_get(json_object_get(r->json, "errors"), 0);
    const char *got = json_string_value(json_object_get(e, "code"));

    if (r->status != status || e == NULL || got == NULL || strcmp(got, code) != 0 ||
        json_string_length(json_object_get(e, "message")) == 0)
        fail_msg("%s:%d: %s: want %ld %s, got %ld: %.400s", file, line, r->desc, status, code,
                 r->status, r->body);
}

static const char *oci_message(const struct it_resp *r)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(r->json, "errors"), 0), "message"));
}

/* The manifest of model:ref as served: its digest (checked against the bytes). */
static void manifest_digest(const char *model, const char *ref, char out[IT_DIGEST_LEN + 1])
{
    char path[256];
    struct it_resp *r =
        oci("GET", it_fmt(path, sizeof(path), "/v2/%s/manifests/%s", model, ref), NULL);

    it_expect_status(srv, r, 200);
    it_digest(r->body, r->len, out);
    assert_string_equal(it_header(r, "Docker-Content-Digest"), out);
    it_resp_free(srv, &r);
}

static json_t *manifest_json(const char *model, const char *ref)
{
    char path[256];
    struct it_resp *r =
        oci("GET", it_fmt(path, sizeof(path), "/v2/%s/manifests/%s", model, ref), NULL);
    json_t *m;

    it_expect_status(srv, r, 200);
    m = json_loadb(r->body, r->len, 0, NULL);
    assert_non_null(m);
    it_resp_free(srv, &r);
    return m;
}

/* The version's file manifest, path -> digest. */
static json_t *version_files(const char *model, int n)
{
    char path[128];
    struct it_resp *r =
        it_get(srv, it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%d/files", model, n),
               srv->admin_token);
    json_t *out = json_object(), *f;
    size_t i;

    it_expect_status(srv, r, 200);
    json_array_foreach(it_jarr(r->json, "items"), i, f)
        json_object_set(out, it_jstr(f, "path"), json_object_get(f, "digest"));
    it_resp_free(srv, &r);
    return out;
}

/* Run a shell command; its whole stdout (malloc'd) and exit status. */
static char *sh(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    char *out = NULL;
    size_t cap = 0, len = 0, n;
    int st;

    if (p == NULL)
        fail_msg("popen %s", cmd);
    do {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            out = realloc(out, cap);
            assert_non_null(out);
        }
        n = fread(out + len, 1, cap - len - 1, p);
        len += n;
    } while (n > 0);
    out[len] = '\0';
    st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

static bool have_skopeo(void)
{
    if (system("command -v skopeo >/dev/null 2>&1") == 0)
        return true;
    it_skip("skopeo is not installed (scripts/install-deps.sh installs it)");
    return false;
}

/* The sha256 digest of skopeo inspect --raw's manifest of fraud:tag. */
static void skopeo_manifest(const char *tag, char out[IT_DIGEST_LEN + 1])
{
    char cmd[1024], *raw;
    int st;

    it_fmt(cmd, sizeof(cmd),
           "skopeo inspect --raw --tls-verify=false --creds 'x:%s' docker://127.0.0.1:%d/fraud:%s",
           srv->admin_token, srv->port, tag);
    raw = sh(cmd, &st);
    if (st != 0)
        fail_msg("skopeo inspect --raw fraud:%s failed (%d): %s", tag, st, raw);
    it_digest(raw, strcspn(raw, "\n"), out); /* skopeo adds a newline */
    free(raw);
}

/* ---- skopeo -------------------------------------------------------------------------- */

static void test_skopeo_copy(void **state)
{
    char dir[IT_PATH_MAX], cmd[2048], path[IT_PATH_MAX + 200], want[IT_DIGEST_LEN + 1];
    char got[IT_DIGEST_LEN + 1], *out, *bytes;
    json_t *index, *man, *files, *l, *cfg;
    size_t i, len;
    int st;

    (void)state;
    if (!have_skopeo())
        return;
    it_mkdtemp(dir, "oci-copy");
    it_write_file(it_fmt(path, sizeof(path), "%s/policy.json", dir),
                  "{\"default\":[{\"type\":\"insecureAcceptAnything\"}]}");
    /* --src-creds: skopeo meets the 401 challenge, trades them at /v2/token, pulls with it. */
    it_fmt(cmd, sizeof(cmd),
           "skopeo --policy '%s/policy.json' copy --src-tls-verify=false --src-creds 'ci:%s' "
           "docker://127.0.0.1:%d/fraud:v1 'oci:%s/layout:fraud-v1' 2>&1",
           dir, srv->admin_token, srv->port, dir);
    out = sh(cmd, &st);
    if (st != 0)
        fail_msg("skopeo copy failed (%d): %s", st, out);
    free(out);

    index = json_load_file(it_fmt(path, sizeof(path), "%s/layout/index.json", dir), 0, NULL);
    assert_non_null(index);
    manifest_digest("fraud", "v1", want);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(index, "manifests"), 0), "digest")),
                        want); /* the manifest was copied byte for byte */
    man = json_load_file(it_fmt(path, sizeof(path), "%s/layout/blobs/sha256/%s", dir, want + 7), 0,
                         NULL);
    assert_non_null(man);
    assert_string_equal(json_string_value(json_object_get(man, "artifactType")),
                        "application/vnd.cncf.model.manifest.v1+json");

    /* Every layer is a file of the version, under that file's digest; the bytes hash to it. */
    files = version_files("fraud", 1);
    assert_int_equal(json_array_size(json_object_get(man, "layers")), json_object_size(files));
    json_array_foreach(json_object_get(man, "layers"), i, l)
    {
        const char *d = json_string_value(json_object_get(l, "digest"));
        const char *p = json_string_value(
            json_object_get(json_object_get(l, "annotations"), "org.cncf.model.filepath"));

        assert_non_null(p);
        if (!json_equal(json_object_get(files, p), json_object_get(l, "digest")))
            fail_msg("layer %s: %s, but the version's file manifest says %s", p, d,
                     json_string_value(json_object_get(files, p)));
        bytes =
            it_read_file(it_fmt(path, sizeof(path), "%s/layout/blobs/sha256/%s", dir, d + 7), &len);
        assert_non_null(bytes);
        it_digest(bytes, len, got);
        assert_string_equal(got, d);
        assert_int_equal(len, json_integer_value(json_object_get(l, "size")));
        free(bytes);
    }
    /* The config: ModelPack's, with the version's metadata. */
    cfg = json_load_file(
        it_fmt(path, sizeof(path), "%s/layout/blobs/sha256/%s", dir,
               json_string_value(json_object_get(json_object_get(man, "config"), "digest")) + 7),
        0, NULL);
    assert_non_null(cfg);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(cfg, "descriptor"), "name")), "fraud");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(cfg, "config"), "paramSize")), "7B");
    json_decref(cfg);
    json_decref(files);
    json_decref(man);
    json_decref(index);
    it_rmtree(dir);
}

/* fraud:production is the alias's last-known-good: a rollback shows at the next pull. */
static void test_skopeo_follows_rollback(void **state)
{
    char v1[IT_DIGEST_LEN + 1], v2[IT_DIGEST_LEN + 1], got[IT_DIGEST_LEN + 1], cmd[1024];
    struct it_resp *r;
    char *out;
    int st;

    (void)state;
    if (!have_skopeo())
        return;
    manifest_digest("fraud", "v1", v1);
    manifest_digest("fraud", "v2", v2);
    assert_string_not_equal(v1, v2);
    skopeo_manifest("production", got);
    assert_string_equal(got, v2);

    r = it_jreq(srv, "POST", "/api/v1/models/fraud/aliases/production/rollback", srv->admin_token,
                "{\"reason\":\"p95 regression\"}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    skopeo_manifest("production", got);
    assert_string_equal(got, v1);
    manifest_digest("fraud", "production", got);
    assert_string_equal(got, v1);

    /* The config reads back through skopeo too; a wrong token is refused. */
    it_fmt(cmd, sizeof(cmd),
           "skopeo inspect --config --raw --tls-verify=false --creds 'x:%s' "
           "docker://127.0.0.1:%d/fraud:v1",
           srv->admin_token, srv->port);
    out = sh(cmd, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "\"modelfs\""));
    free(out);
    it_fmt(cmd, sizeof(cmd),
           "skopeo inspect --raw --tls-verify=false --creds 'x:mgt_wrong' "
           "docker://127.0.0.1:%d/fraud:v1 2>&1",
           srv->port);
    out = sh(cmd, &st);
    assert_int_not_equal(st, 0);
    free(out);
}

/* ---- the pull workflow, request by request ------------------------------------------- */

static void test_manifests(void **state)
{
    char d[IT_DIGEST_LEN + 1], path[256], len[32];
    struct it_resp *r;

    (void)state;
    manifest_digest("fraud", "v1", d);
    r = oci("HEAD", "/v2/fraud/manifests/v1", NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_header(r, "Docker-Content-Digest"), d);
    assert_string_equal(it_header(r, "Content-Type"), OCI_MANIFEST);
    snprintf(len, sizeof(len), "%s", it_header(r, "Content-Length"));
    it_resp_free(srv, &r);

    r = oci("GET", it_fmt(path, sizeof(path), "/v2/fraud/manifests/%s", d), NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_header(r, "Content-Type"), OCI_MANIFEST);
    assert_string_equal(it_header(r, "Docker-Content-Digest"), d);
    assert_int_equal(r->len, strtoul(len, NULL, 10));
    it_resp_free(srv, &r);
    r = oci("HEAD", path, NULL);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);

    /* Accept: a client that takes only Docker's manifests gets no OCI one. */
    r = oci("GET", "/v2/fraud/manifests/v1",
            "Accept: application/vnd.docker.distribution.manifest.v2+json");
    expect_oci_error(r, 404, "MANIFEST_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/manifests/v1", "Accept: " OCI_MANIFEST ";q=0, text/plain");
    expect_oci_error(r, 404, "MANIFEST_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/manifests/v1",
            "Accept: application/vnd.docker.distribution.manifest.v2+json, " OCI_MANIFEST);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);

    /* 404s: the right code for what is missing. */
    r = oci("GET", "/v2/fraud/manifests/v99", NULL);
    expect_oci_error(r, 404, "MANIFEST_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/manifests/nosuchalias", NULL);
    expect_oci_error(r, 404, "MANIFEST_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/manifests/Latest_1.0", NULL);
    expect_oci_error(r, 404, "MANIFEST_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/manifests/sha256:" IT_HEX64, NULL);
    expect_oci_error(r, 404, "MANIFEST_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("HEAD", "/v2/fraud/manifests/v99", NULL);
    it_expect_status(srv, r, 404);
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/nosuchmodel/manifests/v1", NULL);
    expect_oci_error(r, 404, "NAME_UNKNOWN");
    it_resp_free(srv, &r);
    /* A layer's digest is no manifest. */
    r = oci("GET", it_fmt(path, sizeof(path), "/v2/tiny/manifests/%s", tiny), NULL);
    expect_oci_error(r, 404, "MANIFEST_UNKNOWN");
    it_resp_free(srv, &r);
    /* 400s */
    r = oci("GET", "/v2/Fraud/manifests/v1", NULL);
    expect_oci_error(r, 400, "NAME_INVALID");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/manifests/sha256:abc", NULL);
    expect_oci_error(r, 400, "DIGEST_INVALID");
    it_resp_free(srv, &r);
}

static void expect_range(const char *path, const char *range, long status, const char *content,
                         size_t off, size_t n, size_t total)
{
    char h[64], cr[96];
    struct it_resp *r;

    snprintf(h, sizeof(h), "Range: %s", range);
    r = oci("GET", path, h);
    it_expect_status(srv, r, status);
    if (status == 206) {
        snprintf(cr, sizeof(cr), "bytes %zu-%zu/%zu", off, off + n - 1, total);
        assert_string_equal(it_header(r, "Content-Range"), cr);
        assert_int_equal(r->len, n);
        assert_memory_equal(r->body, content + off, n);
    } else {
        snprintf(cr, sizeof(cr), "bytes */%zu", total);
        assert_string_equal(it_header(r, "Content-Range"), cr);
        expect_oci_error(r, 416, "UNSUPPORTED");
    }
    it_resp_free(srv, &r);
}

static void test_blobs(void **state)
{
    json_t *man = manifest_json("fraud", "v1"), *l;
    char path[256], got[IT_DIGEST_LEN + 1], *weights = malloc(WEIGHTS_BYTES), *cfg;
    const char *cd = json_string_value(json_object_get(json_object_get(man, "config"), "digest"));
    struct it_resp *r;
    size_t i, cfg_len;

    (void)state;
    assert_non_null(weights);
    fill_weights(1, weights);
    /* The config: HEAD, GET, a range of it. */
    it_fmt(path, sizeof(path), "/v2/fraud/blobs/%s", cd);
    r = oci("HEAD", path, NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_header(r, "Docker-Content-Digest"), cd);
    it_resp_free(srv, &r);
    r = oci("GET", path, NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_header(r, "Content-Type"), "application/vnd.cncf.model.config.v1+json");
    it_digest(r->body, r->len, got);
    assert_string_equal(got, cd);
    cfg = strdup(r->body);
    cfg_len = r->len;
    it_resp_free(srv, &r);
    expect_range(path, "bytes=0-9", 206, cfg, 0, 10, cfg_len);

    /* Every layer: HEAD (length from the file manifest), GET (bytes hash to the digest). */
    json_array_foreach(json_object_get(man, "layers"), i, l)
    {
        const char *d = json_string_value(json_object_get(l, "digest"));

        it_fmt(path, sizeof(path), "/v2/fraud/blobs/%s", d);
        r = oci("HEAD", path, NULL);
        it_expect_status(srv, r, 200);
        assert_int_equal(strtoll(it_header(r, "Content-Length"), NULL, 10),
                         json_integer_value(json_object_get(l, "size")));
        assert_string_equal(it_header(r, "Docker-Content-Digest"), d);
        it_resp_free(srv, &r);
        r = oci("GET", path, NULL);
        it_expect_status(srv, r, 200);
        it_digest(r->body, r->len, got);
        assert_string_equal(got, d);
        it_resp_free(srv, &r);
    }
    /* Ranges of a file layer: resuming a pull of the weights. */
    l = json_array_get(json_object_get(man, "layers"), 2);
    assert_int_equal(json_integer_value(json_object_get(l, "size")), WEIGHTS_BYTES);
    it_fmt(path, sizeof(path), "/v2/fraud/blobs/%s",
           json_string_value(json_object_get(l, "digest")));
    expect_range(path, "bytes=1000-1999", 206, weights, 1000, 1000, WEIGHTS_BYTES);
    expect_range(path, "bytes=204000-", 206, weights, 204000, WEIGHTS_BYTES - 204000,
                 WEIGHTS_BYTES);
    expect_range(path, "bytes=-10", 206, weights, WEIGHTS_BYTES - 10, 10, WEIGHTS_BYTES);
    expect_range(path, "bytes=204800-", 416, NULL, 0, 0, WEIGHTS_BYTES);

    /* The layer cache holds at most --oci-layer-cache (64K) once the 200K weights files it
     * had to keep are no longer the ones asked for: v2's config.json is a fill of its own. */
    {
        json_t *m2 = manifest_json("fraud", "v2");
        char dir[IT_PATH_MAX], file[IT_PATH_MAX + 80];
        long long total = 0;
        struct dirent *de;
        struct stat sb;
        DIR *d;

        it_fmt(path, sizeof(path), "/v2/fraud/blobs/%s",
               json_string_value(
                   json_object_get(json_array_get(json_object_get(m2, "layers"), 1), "digest")));
        json_decref(m2);
        r = oci("GET", path, NULL);
        it_expect_status(srv, r, 200);
        it_resp_free(srv, &r);
        it_data_path(srv, "oci-layers", dir);
        assert_non_null(d = opendir(dir));
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] != '.' &&
                lstat(it_fmt(file, sizeof(file), "%s/%s", dir, de->d_name), &sb) == 0)
                total += (long long)sb.st_size;
        }
        closedir(d);
        if (total > CACHE_CAP)
            fail_msg("the OCI layer cache holds %lld bytes, over its cap of %d", total, CACHE_CAP);
    }

    /* The whole artifact of a single-file version: the stored blob (api_serve_blob). */
    it_fmt(path, sizeof(path), "/v2/tiny/blobs/%s", tiny);
    r = oci("GET", path, NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(r->body, "a single weights file");
    assert_string_equal(it_header(r, "Docker-Content-Digest"), tiny);
    it_resp_free(srv, &r);
    expect_range(path, "bytes=2-7", 206, "a single weights file", 2, 6, 21);

    /* Unknown, and another model's: BLOB_UNKNOWN (a path never reaches another model). */
    r = oci("GET", "/v2/fraud/blobs/sha256:" IT_HEX64, NULL);
    expect_oci_error(r, 404, "BLOB_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", it_fmt(path, sizeof(path), "/v2/fraud/blobs/%s", tiny), NULL);
    expect_oci_error(r, 404, "BLOB_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", it_fmt(path, sizeof(path), "/v2/tiny/blobs/%s", cd), NULL);
    expect_oci_error(r, 404, "BLOB_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/nosuchmodel/blobs/sha256:" IT_HEX64, NULL);
    expect_oci_error(r, 404, "NAME_UNKNOWN");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/blobs/sha256:zz", NULL);
    expect_oci_error(r, 400, "DIGEST_INVALID");
    it_resp_free(srv, &r);
    free(cfg);
    free(weights);
    json_decref(man);
}

static void expect_tags(const char *query, const char *want, const char *link)
{
    char path[256];
    struct it_resp *r =
        oci("GET", it_fmt(path, sizeof(path), "/v2/fraud/tags/list%s", query), NULL);
    char *got;

    it_expect_status(srv, r, 200);
    assert_string_equal(it_jstr(r->json, "name"), "fraud");
    got = json_dumps(it_jarr(r->json, "tags"), JSON_COMPACT);
    if (strcmp(got, want) != 0)
        fail_msg("tags/list%s: %s, want %s", query, got, want);
    free(got);
    if (link == NULL)
        assert_null(it_header(r, "Link"));
    else
        assert_string_equal(it_header(r, "Link"), link);
    it_resp_free(srv, &r);
}

static void test_tags(void **state)
{
    (void)state;
    /* canary, a split with no last-known-good version, names nothing: no tag. */
    expect_tags("", "[\"production\",\"staging\",\"v1\",\"v2\"]", NULL);
    expect_tags("?n=2", "[\"production\",\"staging\"]",
                "</v2/fraud/tags/list?n=2&last=staging>; rel=\"next\"");
    expect_tags("?n=2&last=staging", "[\"v1\",\"v2\"]", NULL);
    expect_tags("?last=v1", "[\"v2\"]", NULL);
    expect_tags("?n=0", "[]", NULL);
    expect_tags("?n=10", "[\"production\",\"staging\",\"v1\",\"v2\"]", NULL);
    {
        struct it_resp *r = oci("GET", "/v2/fraud/tags/list?n=x", NULL);
        expect_oci_error(r, 400, "UNSUPPORTED");
        it_resp_free(srv, &r);
        r = oci("GET", "/v2/nosuchmodel/tags/list", NULL);
        expect_oci_error(r, 404, "NAME_UNKNOWN");
        it_resp_free(srv, &r);
        r = oci("GET", "/v2/fraud/manifests/canary", NULL);
        expect_oci_error(r, 404, "MANIFEST_UNKNOWN");
        it_resp_free(srv, &r);
    }
}

/* The signature bundle as a referrer of the version's manifest, fetchable end to end. */
static void test_referrers(void **state)
{
    char d[IT_DIGEST_LEN + 1], path[256], got[IT_DIGEST_LEN + 1];
    json_t *index, *desc, *ref;
    struct it_resp *r, *sig;
    const char *rd, *bd;

    (void)state;
    manifest_digest("fraud", "v1", d);
    r = oci("GET", it_fmt(path, sizeof(path), "/v2/fraud/referrers/%s", d), NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_header(r, "Content-Type"), "application/vnd.oci.image.index.v1+json");
    index = json_loadb(r->body, r->len, 0, NULL);
    assert_non_null(index);
    it_resp_free(srv, &r);
    /* the version's signature, one release attestation per generation routing it
     * (docs/contract.md "Signed releases"), each a Sigstore bundle, and the safety scan's report
     * (test_scan.c reads that one) */
    desc = NULL;
    {
        size_t scans = 0;
        for (size_t i = 0; i < json_array_size(json_object_get(index, "manifests")); i++) {
            json_t *m = json_array_get(json_object_get(index, "manifests"), i);
            const char *pt = json_string_value(json_object_get(
                json_object_get(m, "annotations"), "dev.sigstore.bundle.predicateType"));
            const char *at = json_string_value(json_object_get(m, "artifactType"));
            if (strcmp(at, "application/vnd.modelgate.scan.v1+json") == 0) {
                scans++;
                continue;
            }
            assert_string_equal(at, BUNDLE_TYPE);
            if (pt && strcmp(pt, "https://model_signing/signature/v1.0") == 0) {
                assert_null(desc);
                desc = m;
            }
        }
        assert_int_equal(scans, 1);
    }
    assert_non_null(desc);
    rd = json_string_value(json_object_get(desc, "digest"));

    r = oci("GET", it_fmt(path, sizeof(path), "/v2/fraud/manifests/%s", rd), NULL);
    it_expect_status(srv, r, 200);
    it_digest(r->body, r->len, got);
    assert_string_equal(got, rd);
    assert_int_equal(r->len, json_integer_value(json_object_get(desc, "size")));
    ref = json_loadb(r->body, r->len, 0, NULL);
    it_resp_free(srv, &r);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(ref, "subject"), "digest")), d);
    bd = json_string_value(
        json_object_get(json_array_get(json_object_get(ref, "layers"), 0), "digest"));

    /* The bundle blob is the version's model-signing bundle, byte for byte. */
    r = oci("GET", it_fmt(path, sizeof(path), "/v2/fraud/blobs/%s", bd), NULL);
    it_expect_status(srv, r, 200);
    sig = it_get(srv, "/api/v1/models/fraud/versions/1/signature", srv->admin_token);
    it_expect_status(srv, sig, 200);
    assert_int_equal(r->len, sig->len);
    assert_memory_equal(r->body, sig->body, r->len);
    it_resp_free(srv, &sig);
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/blobs/" EMPTY_DIGEST, NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(r->body, "{}");
    it_resp_free(srv, &r);

    /* A filter that leaves nothing, and a subject with no referrers: empty, never 404. */
    r = oci("GET", it_fmt(path, sizeof(path), "/v2/fraud/referrers/%s?artifactType=text/x", d),
            NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_header(r, "OCI-Filters-Applied"), "artifactType");
    assert_non_null(strstr(r->body, "\"manifests\":[]"));
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/fraud/referrers/sha256:" IT_HEX64, NULL);
    it_expect_status(srv, r, 200);
    assert_non_null(strstr(r->body, "\"manifests\":[]"));
    it_resp_free(srv, &r);
    json_decref(ref);
    json_decref(index);
}

/* ---- auth, writes, team scope, restarts ---------------------------------------------- */

static void test_auth(void **state)
{
    char want[512];
    struct it_resp *r;
    const char *const wrong_basic[] = {"Authorization: Basic eDptZ3Rfd3Jvbmc=", NULL};

    (void)state;
    r = it_get(srv, "/v2/", NULL);
    expect_oci_error(r, 401, "UNAUTHORIZED");
    assert_string_equal(it_header(r, "Docker-Distribution-API-Version"), "registry/2.0");
    snprintf(want, sizeof(want),
             "Bearer realm=\"http://127.0.0.1:%d/v2/token\",service=\"modelgate\"", srv->port);
    assert_string_equal(it_header(r, "WWW-Authenticate"), want);
    it_resp_free(srv, &r);
    r = it_get(srv, "/v2/fraud/manifests/v1", NULL);
    expect_oci_error(r, 401, "UNAUTHORIZED");
    snprintf(want, sizeof(want),
             "Bearer realm=\"http://127.0.0.1:%d/v2/token\",service=\"modelgate\","
             "scope=\"repository:fraud:pull\"",
             srv->port);
    assert_string_equal(it_header(r, "WWW-Authenticate"), want);
    it_resp_free(srv, &r);
    r = it_get(srv, "/v2/fraud/manifests/v1", "mgt_wrong");
    expect_oci_error(r, 401, "UNAUTHORIZED");
    assert_non_null(it_header(r, "WWW-Authenticate"));
    it_resp_free(srv, &r);
    r = it_request_h(srv, "GET", "/v2/fraud/manifests/v1", NULL, NULL, NULL, 0, wrong_basic);
    expect_oci_error(r, 401, "UNAUTHORIZED");
    it_resp_free(srv, &r);

    /* Bearer and Basic both work. */
    r = it_get(srv, "/v2/", srv->admin_token);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_header(r, "Docker-Distribution-API-Version"), "registry/2.0");
    it_resp_free(srv, &r);
    r = oci("GET", "/v2/", NULL);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);

    /* The token endpoint: the token presented, under both names; Basic challenge without. */
    r = oci("GET", "/v2/token?service=modelgate&scope=repository:fraud:pull", NULL);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_jstr(r->json, "token"), srv->admin_token);
    assert_string_equal(it_jstr(r->json, "access_token"), srv->admin_token);
    assert_true(it_jint(r->json, "expires_in") >= 60);
    assert_string_equal(it_header(r, "Cache-Control"), "no-store");
    it_resp_free(srv, &r);
    r = it_get(srv, "/v2/token?service=modelgate", NULL);
    expect_oci_error(r, 401, "UNAUTHORIZED");
    assert_non_null(strstr(it_header(r, "WWW-Authenticate"), "Basic realm="));
    it_resp_free(srv, &r);
    r = it_request_h(srv, "GET", "/v2/token", NULL, NULL, NULL, 0, wrong_basic);
    expect_oci_error(r, 401, "UNAUTHORIZED");
    it_resp_free(srv, &r);
}

static void test_writes_refused(void **state)
{
    static const char *const calls[][2] = {
        {"PUT", "/v2/fraud/manifests/v1"},
        {"PUT", "/v2/fraud/manifests/v3"},
        {"DELETE", "/v2/fraud/manifests/v1"},
        {"POST", "/v2/fraud/blobs/uploads/"},
        {"PATCH", "/v2/fraud/blobs/uploads/u1"},
        {"PUT", "/v2/fraud/blobs/uploads/u1"},
        {"DELETE", "/v2/fraud/blobs/uploads/u1"},
        {"DELETE", "/v2/fraud/blobs/sha256:" IT_HEX64},
        /* whatever the parameters: nothing is writable, so nothing is worth validating */
        {"DELETE", "/v2/fraud/blobs/x"},
        {"PUT", "/v2/Not_A_Model/manifests/v1"},
    };
    char before[IT_DIGEST_LEN + 1], after[IT_DIGEST_LEN + 1];
    size_t i;

    (void)state;
    manifest_digest("fraud", "v1", before);
    for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        /* With a token or without, with a body or without: 405 before anything is read. */
        struct it_resp *r = it_request(srv, calls[i][0], calls[i][1], srv->admin_token,
                                       OCI_MANIFEST, "{\"schemaVersion\":2}", 19);
        expect_oci_error(r, 405, "UNSUPPORTED");
        it_resp_free(srv, &r);
        r = it_request(srv, calls[i][0], calls[i][1], NULL, NULL, NULL, 0);
        expect_oci_error(r, 405, "UNSUPPORTED");
        it_resp_free(srv, &r);
    }
    manifest_digest("fraud", "v1", after);
    assert_string_equal(before, after);
    expect_tags("", "[\"production\",\"staging\",\"v1\",\"v2\"]", NULL);
}

/* --read-scope team: another team's model is exactly a missing one; one's own is there. */
static void test_team_scope(void **state)
{
    static const char *const paths[] = {"/v2/%s/manifests/v1", "/v2/%s/tags/list",
                                        "/v2/%s/blobs/sha256:" IT_HEX64,
                                        "/v2/%s/referrers/sha256:" IT_HEX64};
    char path[256], hidden[512], missing[512];
    struct it_resp *r;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        r = it_get(srv, it_fmt(path, sizeof(path), paths[i], "fraud"), ads_reader);
        expect_oci_error(r, 404, "NAME_UNKNOWN");
        snprintf(hidden, sizeof(hidden), "%s", oci_message(r));
        it_resp_free(srv, &r);
        r = it_get(srv, it_fmt(path, sizeof(path), paths[i], "fraux"), ads_reader);
        expect_oci_error(r, 404, "NAME_UNKNOWN");
        snprintf(missing, sizeof(missing), "%s", oci_message(r));
        it_resp_free(srv, &r);
        /* The same sentence, but for the name. */
        assert_non_null(strstr(hidden, "'fraud'"));
        *strstr(hidden, "'fraud'") = '\0';
        *strstr(missing, "'fraux'") = '\0';
        assert_string_equal(hidden, missing);
    }
    r = it_get(srv, "/v2/fraud/manifests/v1", risk_reader);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    /* The same answer as the REST API gives, for a model of no team as well. */
    r = it_get(srv, "/v2/tiny/manifests/v1", ads_reader);
    expect_oci_error(r, 404, "NAME_UNKNOWN");
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/models/tiny", ads_reader);
    it_expect_error(srv, r, 404, "not_found");
    it_resp_free(srv, &r);
    r = it_get(srv, "/v2/tiny/manifests/v1", srv->admin_token);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
}

/* Same version, same manifest: after a restart, by tag and by digest. */
static void test_digest_survives_restart(void **state)
{
    char v1[IT_DIGEST_LEN + 1], cfg1[IT_DIGEST_LEN + 1], got[IT_DIGEST_LEN + 1], path[256];
    json_t *m;
    struct it_resp *r;

    (void)state;
    manifest_digest("fraud", "v1", v1);
    m = manifest_json("fraud", "v1");
    snprintf(cfg1, sizeof(cfg1), "%s",
             json_string_value(json_object_get(json_object_get(m, "config"), "digest")));
    json_decref(m);
    /* Something editable changes meanwhile: the manifest does not. */
    r = it_jreq(srv, "PATCH", "/api/v1/models/fraud/versions/1", srv->admin_token,
                "{\"description\":\"edited\",\"tags\":{\"stage\":\"gold\"}}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/models/fraud/versions/1/metrics", srv->admin_token,
                "{\"metrics\":{\"f1\":0.8}}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    it_server_restart(srv);
    manifest_digest("fraud", "v1", got);
    assert_string_equal(got, v1);
    r = oci("HEAD", it_fmt(path, sizeof(path), "/v2/fraud/manifests/%s", v1), NULL);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    r = oci("HEAD", it_fmt(path, sizeof(path), "/v2/fraud/blobs/%s", cfg1), NULL);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_skopeo_copy, it_test_teardown),
        cmocka_unit_test_teardown(test_skopeo_follows_rollback, it_test_teardown),
        cmocka_unit_test_teardown(test_manifests, it_test_teardown),
        cmocka_unit_test_teardown(test_blobs, it_test_teardown),
        cmocka_unit_test_teardown(test_tags, it_test_teardown),
        cmocka_unit_test_teardown(test_referrers, it_test_teardown),
        cmocka_unit_test_teardown(test_auth, it_test_teardown),
        cmocka_unit_test_teardown(test_writes_refused, it_test_teardown),
        cmocka_unit_test_teardown(test_team_scope, it_test_teardown),
        cmocka_unit_test_teardown(test_digest_survives_restart, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
