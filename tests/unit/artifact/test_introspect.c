/*
 * test_introspect.c - artifact/introspect.c and weights.c: which files of a blob are read
 * (plain blobs by content, archive members by name), the per-blob summary (formats, the
 * format holding the most bytes, sharded totals, members), errors naming the member and the
 * offset, and the dtype names users may write.
 *
 * Archives are written here with libarchive's write API (tar, tar.gz, zip); the weight
 * files inside by weights_writer.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "artifact/introspect.h"
#include "weights_writer.h"

struct member {
    const char *path;
    const struct wbuf *data;
};

enum kind { K_TAR, K_TGZ, K_ZIP };

static const char *media[] = {"application/x-tar", "application/gzip", "application/zip"};

/* Write an archive of the members to a temp file; returns its path (static buffer). */
static const char *archive_of(enum kind k, const struct member *m, size_t n)
{
    static char path[64];
    struct archive *a = archive_write_new();
    struct archive_entry *e;
    size_t i;
    int fd;

    snprintf(path, sizeof(path), "/tmp/test_introspect.XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    if (k == K_ZIP)
        archive_write_set_format_zip(a);
    else
        archive_write_set_format_pax_restricted(a);
    if (k == K_TGZ)
        archive_write_add_filter_gzip(a);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (i = 0; i < n; i++) {
        e = archive_entry_new();
        archive_entry_set_pathname(e, m[i].path);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)m[i].data->n);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        assert_int_equal(archive_write_data(a, m[i].data->p, m[i].data->n),
                         (la_ssize_t)m[i].data->n);
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    return path;
}

/* Inspect (as the upload does) and introspect the archive at path. */
static enum mg_code introspect_archive(const char *path, enum kind k, json_t **formats,
                                       json_t **intro, struct mg_error *err)
{
    struct store_archive_manifest m = {0};
    bool is_archive = false;
    enum mg_code rc;

    assert_int_equal(store_archive_inspect(path, media[k], NULL, &m, &is_archive, err), MG_OK);
    assert_true(is_archive);
    rc = art_introspect(path, media[k], &m, NULL, formats, intro, err);
    store_archive_manifest_release(&m);
    return rc;
}

static void test_sharded_safetensors_in_every_archive_kind(void **state)
{
    static const struct st_tensor a[] = {{"l0.w", "BF16", 2, 2, {8, 8}},
                                         {"l0.b", "F32", 4, 1, {8}}};
    static const struct st_tensor b[] = {{"l1.w", "BF16", 2, 2, {8, 8}}};
    struct wbuf s1 = {0}, s2 = {0}, cfg = {0};
    json_t *formats, *intro, *members;
    struct mg_error err = {0};
    const char *path;
    int k;

    (void)state;
    st_write(&s1, a, 2, NULL);
    st_write(&s2, b, 1, NULL);
    wb_put(&cfg, "{\"model_type\":\"llama\"}", 22);
    for (k = K_TAR; k <= K_ZIP; k++) {
        struct member m[] = {{"model/config.json", &cfg},
                             {"model/model-00002-of-00002.safetensors", &s2},
                             {"model/model-00001-of-00002.safetensors", &s1}};
        path = archive_of((enum kind)k, m, 3);
        if (introspect_archive(path, (enum kind)k, &formats, &intro, &err) != MG_OK)
            fail_msg("%s: %s", media[k], err.message);
        assert_int_equal(json_array_size(formats), 1);
        assert_string_equal(json_string_value(json_array_get(formats, 0)), "safetensors");
        assert_int_equal(json_integer_value(json_object_get(intro, "tensors")), 3);
        assert_int_equal(json_integer_value(json_object_get(intro, "parameters")), 64 + 8 + 64);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(intro, "dtypes"), "BF16")), 128);
        members = json_object_get(intro, "members");
        assert_int_equal(json_array_size(members), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(members, 0), "path")),
                            "model/model-00001-of-00002.safetensors");
        json_decref(formats);
        json_decref(intro);
        unlink(path);
    }
    wb_free(&s1);
    wb_free(&s2);
    wb_free(&cfg);
}

static void test_mixed_formats_pick_the_largest(void **state)
{
    static const struct st_tensor small[] = {{"w", "F32", 4, 1, {4}}};
    static const struct gg_llama tiny = {64, 32, 48, 2, 4, 2, 128};
    struct wbuf st = {0}, gg = {0};
    json_t *formats, *intro;
    struct mg_error err = {0};
    uint64_t data;
    const char *path;

    (void)state;
    st_write(&st, small, 1, NULL);
    gg_llama_write(&gg, 3, &tiny, 1, &data);
    {
        struct member m[] = {{"a.safetensors", &st}, {"b.GGUF", &gg}};
        path = archive_of(K_TAR, m, 2);
    }
    assert_int_equal(introspect_archive(path, K_TAR, &formats, &intro, &err), MG_OK);
    assert_int_equal(json_array_size(formats), 2);
    assert_string_equal(json_string_value(json_array_get(formats, 0)), "gguf");
    assert_string_equal(json_string_value(json_array_get(formats, 1)), "safetensors");
    assert_string_equal(json_string_value(json_object_get(intro, "format")), "gguf");
    assert_int_equal(json_integer_value(json_object_get(intro, "parameters")),
                     gg_llama_params(&tiny));
    assert_string_equal(json_string_value(json_object_get(json_object_get(intro, "metadata"),
                                                          "general.architecture")),
                        "llama");
    json_decref(formats);
    json_decref(intro);
    unlink(path);
    wb_free(&st);
    wb_free(&gg);
}

static void test_malformed_member_named(void **state)
{
    static const struct st_tensor t[] = {{"w", "F32", 4, 1, {4}}};
    struct wbuf st = {0}, bad = {0};
    json_t *formats = NULL, *intro = NULL;
    struct mg_error err = {0};
    const char *path;
    int k;

    (void)state;
    st_write(&st, t, 1, NULL);
    wb_put(&bad, st.p, st.n - 3); /* data cut short */
    for (k = K_TAR; k <= K_ZIP; k++) {
        struct member m[] = {{"ok.safetensors", &st}, {"weights/cut.safetensors", &bad}};
        path = archive_of((enum kind)k, m, 2);
        assert_int_equal(introspect_archive(path, (enum kind)k, &formats, &intro, &err), MG_EINVAL);
        assert_null(formats);
        assert_null(intro);
        if (strstr(err.message, "archive member 'weights/cut.safetensors'") == NULL ||
            strstr(err.message, "byte offset") == NULL)
            fail_msg("%s", err.message);
        unlink(path);
    }
    wb_free(&st);
    wb_free(&bad);
}

/* An archive inside an archive is not opened: its weights are not counted. */
static void test_nested_archive_not_opened(void **state)
{
    static const struct st_tensor t[] = {{"w", "F32", 4, 1, {4}}};
    struct wbuf st = {0}, inner = {0};
    json_t *formats, *intro;
    struct mg_error err = {0};
    const char *path;
    FILE *f;
    long n;

    (void)state;
    st_write(&st, t, 1, NULL);
    {
        struct member m[] = {{"model.safetensors", &st}};
        path = archive_of(K_TAR, m, 1);
    }
    f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    inner.p = malloc((size_t)n);
    inner.n = inner.cap = (size_t)n;
    assert_int_equal(fread(inner.p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    unlink(path);
    {
        struct member m[] = {{"inner.tar", &inner}};
        path = archive_of(K_TGZ, m, 1);
    }
    assert_int_equal(introspect_archive(path, K_TGZ, &formats, &intro, &err), MG_OK);
    assert_int_equal(json_array_size(formats), 0);
    assert_null(intro);
    json_decref(formats);
    unlink(path);
    wb_free(&st);
    wb_free(&inner);
}

static void test_plain_blobs(void **state)
{
    static const struct st_tensor t[] = {{"w", "F16", 2, 1, {10}}};
    char path[] = "/tmp/test_introspect.XXXXXX";
    struct wbuf st = {0};
    json_t *formats, *intro;
    struct mg_error err = {0};
    int fd = mkstemp(path);

    (void)state;
    st_write(&st, t, 1, NULL);
    assert_int_equal(write(fd, st.p, st.n), (ssize_t)st.n);
    assert_int_equal(
        art_introspect(path, "application/octet-stream", NULL, NULL, &formats, &intro, &err),
        MG_OK);
    assert_string_equal(json_string_value(json_array_get(formats, 0)), "safetensors");
    assert_int_equal(json_integer_value(json_object_get(intro, "parameters")), 10);
    assert_null(json_object_get(intro, "members"));
    json_decref(formats);
    json_decref(intro);
    /* Bytes that only look like a ModelProto's first field are simply not ONNX. */
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, "\x08\x01\x12\x7fnot really", 14, 0), 14);
    assert_int_equal(
        art_introspect(path, "application/octet-stream", NULL, NULL, &formats, &intro, &err),
        MG_OK);
    assert_int_equal(json_array_size(formats), 0);
    assert_null(intro);
    json_decref(formats);
    /* Another protobuf whose first fields outgrow the ONNX structure cap before any graph:
     * not ONNX, not refused. */
    {
        struct art_introspect_limits lim;
        char big[200];
        art_introspect_limits_default(&lim);
        lim.max_onnx_structure = 64;
        memset(big, 'x', sizeof(big));
        big[0] = 0x08, big[1] = 0x01, big[2] = 0x12, big[3] = (char)150, big[4] = 0x01;
        assert_int_equal(ftruncate(fd, 0), 0);
        assert_int_equal(pwrite(fd, big, 155, 0), 155);
        assert_int_equal(
            art_introspect(path, "application/octet-stream", NULL, &lim, &formats, &intro, &err),
            MG_OK);
        assert_int_equal(json_array_size(formats), 0);
        json_decref(formats);
    }
    /* A safetensors-looking blob with a broken header is refused (the blob itself). */
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, "\x04\0\0\0\0\0\0\0{\"a\"", 12, 0), 12);
    assert_int_equal(
        art_introspect(path, "application/octet-stream", NULL, NULL, &formats, &intro, &err),
        MG_EINVAL);
    assert_non_null(strstr(err.message, "in the blob at byte offset"));
    close(fd);
    unlink(path);
    wb_free(&st);
}

static void test_dtype_names(void **state)
{
    static const struct {
        const char *in, *out;
    } ok[] = {
        {"F32", "F32"},
        {"float32", "F32"},
        {"FLOAT", "F32"},
        {"fp16", "F16"},
        {"bfloat16", "BF16"},
        {"INT64", "I64"},
        {"uint8", "U8"},
        {"bool", "BOOL"},
        {"string", "STRING"},
        {"seq(float)", "seq(F32)"},
        {"map(int64, FLOAT)", "map(I64,F32)"},
        {"optional(seq(F16))", "optional(seq(F16))"},
        {"sparse(double)", "sparse(F64)"},
    };
    static const char *const bad[] = {"",
                                      "F33",
                                      "seq()",
                                      "seq(F32",
                                      "map(F32)",
                                      "tensor(F32)",
                                      "seq(seq(seq(seq(seq(seq(seq(seq(seq(F32)))))))))"};
    char out[64];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (!art_dtype_canonical(ok[i].in, out, sizeof(out)))
            fail_msg("'%s' refused", ok[i].in);
        assert_string_equal(out, ok[i].out);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (art_dtype_canonical(bad[i], out, sizeof(out)))
            fail_msg("'%s' accepted as '%s'", bad[i], out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sharded_safetensors_in_every_archive_kind),
        cmocka_unit_test(test_mixed_formats_pick_the_largest),
        cmocka_unit_test(test_malformed_member_named),
        cmocka_unit_test(test_nested_archive_not_opened),
        cmocka_unit_test(test_plain_blobs),
        cmocka_unit_test(test_dtype_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
