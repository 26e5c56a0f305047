/*
 * test_introspection.c - artifact introspection over HTTP (docs/contract.md "Artifact introspection
 * and schema compatibility"), on SQLite and PostgreSQL:
 * - uploads record the formats they hold; versions carry what was read, vram_estimate and
 *   estimated_vram_gib; a malformed header is a 400 naming the member and the byte offset,
 *   and nothing is stored;
 * - a GGUF with a LLaMA-7B-shaped header (metadata and tensor infos only) gives weights +
 *   KV cache within 1% of the formula computed here from the architecture; the fit gate
 *   uses that estimate;
 * - io_schema: normalised, validated, and checked against the graph read from an ONNX file;
 * - the schema gate: a candidate that renamed an input is rejected naming it, a compatible
 *   one (an extra output, an extra optional input) is promoted.
 * Weight files come from the tests' own writers (tests/unit/artifact/weights_writer.h) and
 * ONNX models from Debian's python3-onnx (tests/unit/artifact/onnx_make.py).
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "release_common.h"

#include <ftw.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "tests/unit/artifact/weights_writer.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static char onnx_dir[] = "/tmp/it_introspection.XXXXXX";

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static int group_setup(void **state)
{
    char cmd[2048];
    const char *src = getenv("MG_SOURCE_DIR");

    if (mkdtemp(onnx_dir) == NULL)
        return -1;
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/unit/artifact/onnx_make.py %s",
             src ? src : ".", onnx_dir);
    if (system(cmd) != 0)
        return -1;
    return rel_group_setup(state);
}

static int group_teardown(void **state)
{
    nftw(onnx_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rel_group_teardown(state);
}

/* POST the bytes as a blob with the publisher token. */
static struct it_resp *upload(const void *p, size_t n)
{
    return it_request(cx.s, "POST", "/api/v1/blobs", cx.t.pub, "application/octet-stream", p, n);
}

static void upload_ok(const void *p, size_t n, char digest[IT_DIGEST_LEN + 1], const char *format)
{
    struct it_resp *r = upload(p, n);
    json_t *f;

    if (r->status != 201 && r->status != 200)
        fail_msg("upload: %ld %s", r->status, r->body);
    snprintf(digest, IT_DIGEST_LEN + 1, "%s", it_jstr(r->json, "digest"));
    f = it_jarr(r->json, "formats");
    if (format == NULL)
        assert_int_equal(json_array_size(f), 0);
    else
        assert_string_equal(json_string_value(json_array_get(f, 0)), format);
    it_resp_free(cx.s, &r);
}

static void upload_file(const char *name, char digest[IT_DIGEST_LEN + 1])
{
    char path[512];
    size_t n;
    FILE *f;
    uint8_t *p;

    snprintf(path, sizeof(path), "%s/%s", onnx_dir, name);
    f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc(n);
    assert_int_equal(fread(p, 1, n, f), n);
    fclose(f);
    upload_ok(p, n, digest, "onnx");
    free(p);
}

/* A tar of one member. */
static void tar_of(const char *name, const struct wbuf *data, struct wbuf *out)
{
    struct archive *a = archive_write_new();
    struct archive_entry *e = archive_entry_new();
    size_t used = 0, cap = data->n + 64 * 1024;

    out->p = malloc(cap);
    out->cap = cap;
    archive_write_set_format_pax_restricted(a);
    assert_int_equal(archive_write_open_memory(a, out->p, cap, &used), ARCHIVE_OK);
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)data->n);
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    assert_int_equal(archive_write_data(a, data->p, data->n), (la_ssize_t)data->n);
    archive_write_close(a);
    archive_write_free(a);
    archive_entry_free(e);
    out->n = used;
}

static json_t *version_get(const char *model, json_int_t v)
{
    char path[256];
    struct it_resp *r = it_get(
        cx.s, it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld", model, (long long)v),
        cx.t.rd);
    json_t *j;

    it_expect_status(cx.s, r, 200);
    j = json_incref(r->json);
    it_resp_free(cx.s, &r);
    return j;
}

/* Create a version of model from body (JSON text): the create's answer (the Version built as
 * json_t, decorated with its VRAM estimate, printed) and a GET of it (written from its rows
 * without json_t) are the same bytes. */
static void created_as_read(const char *model, const char *body)
{
    char path[256];
    struct it_resp *c, *g;

    c = it_jreq(cx.s, "POST", it_fmt(path, sizeof(path), "/api/v1/models/%s/versions", model),
                cx.t.pub, body);
    it_expect_status(cx.s, c, 201);
    g = it_get(cx.s,
               it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld", model,
                      (long long)it_jint(c->json, "version")),
               cx.t.rd);
    it_expect_status(cx.s, g, 200);
    assert_string_equal(g->body, c->body);
    it_resp_free(cx.s, &c);
    it_resp_free(cx.s, &g);
}

static void test_safetensors_version(void **state)
{
    static const struct st_tensor t[] = {{"emb", "BF16", 2, 2, {1000, 64}},
                                         {"norm", "F32", 4, 1, {64}}};
    char digest[IT_DIGEST_LEN + 1], path[256];
    struct wbuf st = {0}, tar = {0};
    struct it_resp *r;
    json_t *v, *in, *e;
    json_int_t n;

    (void)state;
    st_write(&st, t, 2, "{\"format\":\"pt\"}");
    tar_of("model/model.safetensors", &st, &tar);
    upload_ok(tar.p, tar.n, digest, "safetensors");
    r = it_get(cx.s, it_fmt(path, sizeof(path), "/api/v1/blobs/%s", digest), cx.t.rd);
    it_resp_free(cx.s, &r);
    it_model_create(cx.s, cx.t.pub, "st");
    n = it_version_create(cx.s, cx.t.pub, "st", digest, NULL);
    v = version_get("st", n);
    in = it_jobj(v, "introspection");
    assert_string_equal(it_jstr(in, "format"), "safetensors");
    assert_int_equal(it_jint(in, "parameters"), 64000 + 64);
    assert_int_equal(it_jint(it_jobj(in, "dtypes"), "BF16"), 64000);
    assert_int_equal(it_jint(in, "weights_bytes"), 128000 + 256);
    /* No resources: the estimate is weights × 1.2. */
    e = it_jobj(v, "vram_estimate");
    assert_string_equal(it_jstr(e, "source"), "introspection");
    assert_true(fabs(it_jnum(v, "estimated_vram_gib") - round(128256 * 1.2 / GIB * 1000) / 1000) <
                1e-9);
    json_decref(v);
    /* Declared resources still override. */
    n = it_version_create(cx.s, cx.t.pub, "st", digest,
                          json_pack("{s:{s:I, s:s}}", "resources", "parameters",
                                    (json_int_t)7000000000LL, "precision", "fp16"));
    v = version_get("st", n);
    assert_string_equal(it_jstr(it_jobj(v, "vram_estimate"), "source"), "resources");
    assert_true(fabs(it_jnum(v, "estimated_vram_gib") - 7e9 * 2 * 1.3 / GIB) < 1e-3);
    json_decref(v);
    /* The estimate a read writes is the create's, byte for byte: from the introspection, and
     * from resources of every precision. */
    {
        static const char *const resources[] = {
            "{\"parameters\":7000000001,\"precision\":\"bf16\"}",
            "{\"parameters\":123456789,\"precision\":\"int4\"}",
            "{\"parameters\":1000,\"precision\":\"fp32\"}",
            "{\"parameters\":1,\"precision\":\"int8\"}",
            "{\"parameters\":70000000000,\"precision\":\"fp16\"}",
            "{\"parameters\":999999999999,\"precision\":\"fp16\"}",
            NULL};
        char body[512];

        it_fmt(body, sizeof(body), "{\"artifact\":\"%s\",\"image\":\"%s\"}", digest, IT_IMAGE);
        created_as_read("st", body);
        for (size_t i = 0; resources[i] != NULL; i++) {
            it_fmt(body, sizeof(body), "{\"artifact\":\"%s\",\"image\":\"%s\",\"resources\":%s}",
                   digest, IT_IMAGE, resources[i]);
            created_as_read("st", body);
        }
    }
    wb_free(&st);
    wb_free(&tar);
}

static void test_malformed_header_refused(void **state)
{
    static const struct st_tensor t[] = {{"w", "F32", 4, 1, {8}}};
    char digest[IT_DIGEST_LEN + 1], path[256];
    struct wbuf st = {0}, cut = {0}, tar = {0};
    struct it_resp *r;

    (void)state;
    st_write(&st, t, 1, NULL);
    wb_put(&cut, st.p, st.n - 4);
    tar_of("weights/model.safetensors", &cut, &tar);
    r = upload(tar.p, tar.n);
    it_expect_error(cx.s, r, 400, "invalid_argument");
    if (strstr(r->body, "archive member 'weights/model.safetensors'") == NULL ||
        strstr(r->body, "byte offset") == NULL)
        fail_msg("%s", r->body);
    it_resp_free(cx.s, &r);
    /* Nothing was kept. */
    it_digest(tar.p, tar.n, digest);
    r = it_request(cx.s, "HEAD", it_fmt(path, sizeof(path), "/api/v1/blobs/%s", digest), cx.t.rd,
                   NULL, NULL, 0);
    it_expect_status(cx.s, r, 404);
    it_resp_free(cx.s, &r);
    /* A plain blob that merely starts with 0x08 is no ONNX and stays a plain blob. */
    upload_ok("\x08\x01 just bytes", 13, digest, NULL);
    wb_free(&st);
    wb_free(&cut);
    wb_free(&tar);
}

/* LLaMA-7B: weights from the tensor infos, KV cache from the metadata. */
static void test_gguf_7b_vram(void **state)
{
    static const struct gg_llama m = {32000, 4096, 11008, 32, 32, 32, 4096};
    char digest[IT_DIGEST_LEN + 1], path[256];
    struct wbuf gg = {0};
    uint64_t data;
    double norms, params, weights, kv, want, got;
    struct it_resp *r;
    json_t *v, *e, *fit;
    json_int_t n;

    (void)state;
    gg_llama_write(&gg, 3, &m, 0, &data);
    upload_ok(gg.p, gg.n, digest, "gguf");
    it_model_create(cx.s, cx.t.pub, "llama");
    n = it_version_create(cx.s, cx.t.pub, "llama", digest, NULL);
    v = version_get("llama", n);
    /* The formula, from the architecture alone: F16 matrices, F32 norms; the KV cache in
     * f16 for every layer, KV head, head dimension and position. */
    norms = (double)m.embd * (2 * m.layers + 1);
    params = 2.0 * m.vocab * m.embd + m.embd +
             m.layers * (2.0 * m.embd + 4.0 * m.embd * m.embd + 3.0 * m.embd * m.ffn);
    weights = (params - norms) * 2 + norms * 4;
    kv = 2.0 * m.layers * m.kv_heads * (m.embd / m.heads) * m.ctx * 2;
    want = (weights * 1.2 + kv) / GIB;
    got = it_jnum(v, "estimated_vram_gib");
    if (fabs(got - want) > 0.01 * want)
        fail_msg("estimated %.3f GiB, the formula gives %.3f GiB", got, want);
    e = it_jobj(v, "vram_estimate");
    assert_int_equal(it_jint(e, "layers"), 32);
    assert_int_equal(it_jint(e, "kv_heads"), 32);
    assert_int_equal(it_jint(e, "head_dim"), 128);
    assert_int_equal(it_jint(e, "context"), 4096);
    assert_int_equal(it_jint(e, "kv_cache_bytes"), (json_int_t)kv);
    assert_int_equal(it_jint(it_jobj(v, "introspection"), "parameters"), (json_int_t)params);
    json_decref(v);
    /* The fit gate takes this estimate (no GPU on this runner: it fails, showing it). */
    it_policy_put(cx.s, "llama", "production",
                  "{\"smoke\":{\"required\":false,\"gpu\":\"required\"}}");
    r = it_get(cx.s,
               it_fmt(path, sizeof(path),
                      "/api/v1/models/llama/versions/%lld/gates?alias=production", (long long)n),
               cx.t.rd);
    it_expect_status(cx.s, r, 200);
    fit = it_gate_find(it_jarr(r->json, "gates"), "fit", "");
    assert_non_null(fit);
    if (fabs(json_number_value(json_object_get(fit, "observed")) - want) > 0.01 * want)
        fail_msg("the fit gate observed %s", r->body);
    it_resp_free(cx.s, &r);
    wb_free(&gg);
}

static void test_io_schema(void **state)
{
    char onnx[IT_DIGEST_LEN + 1], plain[IT_DIGEST_LEN + 1], path[128];
    struct it_resp *r;
    json_t *v, *in;
    json_int_t n;

    (void)state;
    upload_file("vision.onnx", onnx);
    upload_ok("opaque model bytes", 18, plain, NULL);
    it_model_create(cx.s, cx.t.pub, "io");
    /* Declared for a format the server cannot read: kept, with canonical dtypes. */
    n = it_version_create(cx.s, cx.t.pub, "io", plain,
                          json_pack("{s:{s:[{s:s, s:s, s:[s, i, n]}], s:[{s:s, s:s}]}}",
                                    "io_schema", "inputs", "name", "x", "dtype", "float32", "shape",
                                    "batch", 3, "outputs", "name", "y", "dtype", "INT64"));
    v = version_get("io", n);
    in = json_array_get(it_jarr(it_jobj(v, "io_schema"), "inputs"), 0);
    assert_string_equal(it_jstr(in, "dtype"), "F32");
    assert_int_equal(json_integer_value(json_array_get(it_jarr(in, "shape"), 2)), -1);
    assert_null(json_object_get(v, "introspection"));
    json_decref(v);
    /* Agreeing with the ONNX graph (its optional inputs may be left out). */
    n = it_version_create(cx.s, cx.t.pub, "io", onnx,
                          json_pack("{s:{s:[{s:s, s:s, s:[s,i,i,i]}, {s:s, s:s}], s:[{s:s, s:s}]}}",
                                    "io_schema", "inputs", "name", "image", "dtype", "FLOAT",
                                    "shape", "n", 3, 224, 224, "name", "mask", "dtype", "int64",
                                    "outputs", "name", "logits", "dtype", "F32"));
    v = version_get("io", n);
    assert_string_equal(
        it_jstr(json_array_get(it_jarr(it_jobj(v, "introspection"), "inputs"), 0), "name"),
        "image");
    json_decref(v);
    /* Disagreeing: 400 naming the difference, and no version. */
    r = it_jreq_v(cx.s, "POST", "/api/v1/models/io/versions", cx.t.pub,
                  json_pack("{s:s, s:{s:[{s:s, s:s}, {s:s, s:s}], s:[{s:s, s:s}]}}", "artifact",
                            onnx, "io_schema", "inputs", "name", "image", "dtype", "F16", "name",
                            "mask", "dtype", "I64", "outputs", "name", "logits", "dtype", "F32"));
    it_expect_error_field(cx.s, r, 400, "invalid_argument", "io_schema");
    if (strstr(r->body, "input 'image' is F16 in io_schema but F32 in the artifact") == NULL)
        fail_msg("%s", r->body);
    it_resp_free(cx.s, &r);
    r = it_jreq_v(cx.s, "POST", "/api/v1/models/io/versions", cx.t.pub,
                  json_pack("{s:s, s:{s:[{s:s, s:s}]}}", "artifact", onnx, "io_schema", "inputs",
                            "name", "image", "dtype", "F32"));
    it_expect_error_field(cx.s, r, 400, "invalid_argument", "io_schema");
    if (strstr(r->body, "'mask'") == NULL)
        fail_msg("%s", r->body);
    it_resp_free(cx.s, &r);
    /* Malformed declarations. */
    r = it_jreq(cx.s, "POST", "/api/v1/models/io/versions", cx.t.pub,
                "{\"artifact\":\"sha256:0000000000000000000000000000000000000000000000000000000000"
                "000000\",\"io_schema\":{\"inputs\":[{\"name\":\"x\",\"dtype\":\"float33\"}]}}");
    it_expect_error(cx.s, r, 400, "invalid_argument");
    it_resp_free(cx.s, &r);
    r = it_jreq(cx.s, "POST", "/api/v1/models/io/versions", cx.t.pub,
                "{\"artifact\":\"sha256:0000000000000000000000000000000000000000000000000000000000"
                "000000\",\"io_schema\":{\"inputs\":[{\"name\":\"x\",\"dtype\":\"F32\"},"
                "{\"name\":\"x\",\"dtype\":\"F32\"}]}}");
    it_expect_error(cx.s, r, 400, "invalid_argument");
    it_resp_free(cx.s, &r);
    r = it_get(cx.s, it_fmt(path, sizeof(path), "/api/v1/models/io/versions"), cx.t.rd);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 2);
    it_resp_free(cx.s, &r);
}

static void test_schema_gate(void **state)
{
    char vision[IT_DIGEST_LEN + 1], renamed[IT_DIGEST_LEN + 1], extra[IT_DIGEST_LEN + 1];
    char id[64];
    struct it_resp *p;
    json_t *g;
    json_int_t v1, v2, v3;

    (void)state;
    upload_file("vision.onnx", vision);
    upload_file("renamed.onnx", renamed);
    upload_file("extra.onnx", extra);
    it_model_create(cx.s, cx.t.pub, "vis");
    v1 = it_version_create(cx.s, cx.t.pub, "vis", vision, NULL);
    v2 = it_version_create(cx.s, cx.t.pub, "vis", renamed, NULL);
    v3 = it_version_create(cx.s, cx.t.pub, "vis", extra, NULL);
    it_policy_put(cx.s, "vis", "production",
                  "{\"schema\":{\"compatible_with_baseline\":true},\"rollout\":{\"steps\":[100]}}");
    /* The first release has no baseline: passes. */
    p = it_promote(cx.s, cx.t.dep, "vis", v1, "production", id);
    rel_expect_state(p, "succeeded");
    rel_expect_gate(it_jarr(p->json, "gates"), "schema", "", "passed");
    /* Renamed input: rejected, naming it. */
    p = it_promote(cx.s, cx.t.dep, "vis", v2, "production", id);
    rel_expect_state(p, "rejected");
    g = it_gate_find(it_jarr(p->json, "gates"), "schema", "");
    assert_non_null(g);
    assert_string_equal(it_jstr(g, "status"), "failed");
    if (strstr(it_jstr(g, "detail"), "input 'image' of the baseline is missing from the "
                                     "candidate (renamed to 'pixels'?)") == NULL)
        fail_msg("%s", p->body);
    assert_true(json_array_size(it_jarr(g, "diff")) >= 2);
    rel_expect_alias_routes(&cx, "vis", "production", 1, v1, 100);
    /* An extra output and an extra optional input: compatible. */
    p = it_promote(cx.s, cx.t.dep, "vis", v3, "production", id);
    rel_expect_state(p, "succeeded");
    rel_expect_gate(it_jarr(p->json, "gates"), "schema", "", "passed");
    rel_expect_alias_routes(&cx, "vis", "production", 1, v3, 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_safetensors_version, it_test_teardown),
        cmocka_unit_test_teardown(test_malformed_header_refused, it_test_teardown),
        cmocka_unit_test_teardown(test_gguf_7b_vram, it_test_teardown),
        cmocka_unit_test_teardown(test_io_schema, it_test_teardown),
        cmocka_unit_test_teardown(test_schema_gate, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests_name("integration_introspection", tests,
                                                      group_setup, group_teardown));
}
