/*
 * test_onnx.c - artifact/onnx.c and onnx_filter.c: ONNX graphs read through libprotobuf-c.
 *
 * - Models built by Debian's python3-onnx (onnx_make.py): inputs, outputs, initializer
 *   counts and dtypes as the builder made them; a 16 MiB initializer is skipped while
 *   streaming, so the model reads with a 64 KiB structure cap.
 * - ONNX's own test corpus (Debian libonnx-testdata, over a thousand model.onnx files):
 *   every file reads, and its graph inputs and outputs (names, element types, shapes),
 *   initializer counts and opset equal what python3-onnx reads from it (onnx_io.py).
 * - Hand-made protobuf bytes: truncations, huge lengths, groups, wrong wire types, bad
 *   UTF-8, nesting past the depth cap, the structure and memory caps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifact/introspect.h"
#include "tests/skip.h"

#define PY "/usr/bin/python3"
#define CORPUS_DEFAULT "/usr/share/libonnx-testdata/data"

static char dir[] = "/tmp/test_onnx.XXXXXX";

static const char *source_dir(void)
{
    const char *s = getenv("MG_SOURCE_DIR");
    return s ? s : ".";
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static int setup(void **state)
{
    char cmd[4096];

    (void)state;
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(cmd, sizeof(cmd), PY " %s/tests/unit/artifact/onnx_make.py %s", source_dir(), dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    uint8_t *p;
    long len;

    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc((size_t)len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

static enum mg_code read_file(const char *path, const struct art_introspect_limits *lim,
                              json_t **out, struct mg_error *err)
{
    size_t n;
    uint8_t *p = slurp(path, &n);
    enum mg_code rc = art_introspect_buffer(p, n, "onnx", lim, out, err);

    free(p);
    return rc;
}

/* What python3-onnx reads from paths (files or directories), as {path: {...}}. */
static json_t *python_view(const char *paths)
{
    char cmd[8192], out[1100];
    json_error_t jerr;
    json_t *j;

    snprintf(out, sizeof(out), "%s/expected.json", dir);
    snprintf(cmd, sizeof(cmd), PY " %s/tests/unit/artifact/onnx_io.py %s > %s", source_dir(), paths,
             out);
    assert_int_equal(system(cmd), 0);
    j = json_load_file(out, 0, &jerr);
    if (j == NULL)
        fail_msg("%s: %s", out, jerr.text);
    return j;
}

/* Compare modelgate's view of one file with python3-onnx's; returns false (and says why). */
static bool same_as_python(const char *path, const json_t *want, const json_t *got, char *why,
                           size_t cap)
{
    static const char *const keys[] = {"inputs", "outputs", "tensors", "parameters", "dtypes"};
    const json_t *meta = json_object_get(got, "metadata");
    size_t i;

    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const json_t *a = json_object_get(want, keys[i]), *b = json_object_get(got, keys[i]);
        if (a != b && !json_equal(a, b)) {
            char *a = json_dumps(json_object_get(want, keys[i]), JSON_COMPACT);
            char *b = json_dumps(json_object_get(got, keys[i]), JSON_COMPACT);
            snprintf(why, cap, "%s: %s: python %.200s, modelgate %.200s", path, keys[i], a, b);
            free(a);
            free(b);
            return false;
        }
    }
    if (json_object_get(want, "opset") != json_object_get(meta, "opset") &&
        !json_equal(json_object_get(want, "opset"), json_object_get(meta, "opset"))) {
        snprintf(why, cap, "%s: opset differs", path);
        return false;
    }
    return true;
}

static void test_python_models(void **state)
{
    char paths[1024], path[1024], why[600];
    const char *names[] = {"vision", "renamed", "extra", "seq", "big"};
    json_t *want, *got, *d, *in;
    struct mg_error err;
    size_t i;

    (void)state;
    snprintf(paths, sizeof(paths), "%s", dir);
    want = python_view(paths);
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s.onnx", dir, names[i]);
        memset(&err, 0, sizeof(err));
        if (read_file(path, NULL, &got, &err) != MG_OK)
            fail_msg("%s: %s", path, err.message);
        if (!same_as_python(path, json_object_get(want, path), got, why, sizeof(why)))
            fail_msg("%s", why);
        json_decref(got);
    }
    json_decref(want);

    /* What the builder put in, independently of python's reading. */
    snprintf(path, sizeof(path), "%s/vision.onnx", dir);
    assert_int_equal(read_file(path, NULL, &got, &err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(got, "format")), "onnx");
    assert_int_equal(json_integer_value(json_object_get(got, "tensors")), 3);
    assert_int_equal(json_integer_value(json_object_get(got, "parameters")),
                     64 * 3 * 7 * 7 + 64 + 10);
    d = json_object_get(got, "dtypes");
    assert_int_equal(json_integer_value(json_object_get(d, "F32")), 64 * 3 * 7 * 7);
    assert_int_equal(json_integer_value(json_object_get(d, "F16")), 64);
    assert_int_equal(json_integer_value(json_object_get(d, "I64")), 10);
    assert_int_equal(json_integer_value(json_object_get(got, "weights_bytes")),
                     64 * 3 * 7 * 7 * 4 + 64 * 2 + 10 * 8);
    in = json_array_get(json_object_get(got, "inputs"), 0);
    assert_string_equal(json_string_value(json_object_get(in, "name")), "image");
    assert_string_equal(json_string_value(json_object_get(in, "dtype")), "F32");
    assert_string_equal(json_string_value(json_array_get(json_object_get(in, "shape"), 0)),
                        "batch");
    in = json_array_get(json_object_get(got, "inputs"), 1);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(in, "shape"), 0)), -1);
    d = json_object_get(got, "metadata");
    assert_int_equal(json_integer_value(json_object_get(d, "opset")), 13);
    assert_string_equal(json_string_value(json_object_get(d, "producer_name")), "modelgate-tests");
    json_decref(got);

    snprintf(path, sizeof(path), "%s/seq.onnx", dir);
    assert_int_equal(read_file(path, NULL, &got, &err), MG_OK);
    in = json_array_get(json_object_get(got, "inputs"), 0);
    assert_string_equal(json_string_value(json_object_get(in, "dtype")), "seq(F32)");
    in = json_array_get(json_object_get(got, "outputs"), 0);
    assert_string_equal(json_string_value(json_object_get(in, "dtype")), "optional(F32)");
    json_decref(got);
}

/* A 16 MiB initializer streams past a 64 KiB structure cap: its bytes are never kept. */
static void test_big_initializer_is_skipped(void **state)
{
    struct art_introspect_limits lim;
    char path[1024];
    struct mg_error err = {0};
    json_t *got, *formats;

    (void)state;
    art_introspect_limits_default(&lim);
    lim.max_onnx_structure = 64 << 10;
    lim.max_onnx_memory = 1 << 20;
    snprintf(path, sizeof(path), "%s/big.onnx", dir);
    if (read_file(path, &lim, &got, &err) != MG_OK)
        fail_msg("%s", err.message);
    assert_int_equal(json_integer_value(json_object_get(got, "parameters")), 4 << 20);
    assert_int_equal(json_integer_value(json_object_get(got, "weights_bytes")), 16 << 20);
    json_decref(got);
    /* The same as a plain blob on disk: sniffed, and the payload seeked over. */
    assert_int_equal(
        art_introspect(path, "application/octet-stream", NULL, &lim, &formats, &got, &err), MG_OK);
    assert_string_equal(json_string_value(json_array_get(formats, 0)), "onnx");
    assert_int_equal(json_integer_value(json_object_get(got, "parameters")), 4 << 20);
    json_decref(got);
    json_decref(formats);
}

/* The corpus was missing: the program exits MG_SKIP_EXIT (ctest lists it as skipped). */
static bool corpus_skipped;

static void test_corpus(void **state)
{
    const char *corpus = getenv("MG_ONNX_TESTDATA") ? getenv("MG_ONNX_TESTDATA") : CORPUS_DEFAULT;
    char why[600];
    struct mg_error err;
    const char *path;
    json_t *want, *w, *got;
    size_t files = 0, inputs = 0;
    struct stat st;

    (void)state;
    if (stat(corpus, &st) != 0) {
        if (mg_require_all())
            fail_msg("%s is missing: install libonnx-testdata (scripts/install-deps.sh), and "
                     "MG_REQUIRE_ALL=1 forbids skipping",
                     corpus);
        corpus_skipped = true;
        skip();
    }
    want = python_view(corpus);
    json_object_foreach(want, path, w)
    {
        memset(&err, 0, sizeof(err));
        if (read_file(path, NULL, &got, &err) != MG_OK)
            fail_msg("%s: %s", path, err.message);
        if (!same_as_python(path, w, got, why, sizeof(why)))
            fail_msg("%s", why);
        inputs += json_array_size(json_object_get(got, "inputs"));
        json_decref(got);
        files++;
    }
    print_message("%zu ONNX files from %s read as python3-onnx reads them (%zu inputs)\n", files,
                  corpus, inputs);
    assert_true(files >= 1000);
    json_decref(want);
}

struct bad {
    const char *bytes;
    size_t n;
    const char *want;
};

static void test_malformed(void **state)
{
    static const struct bad cases[] = {
        {"\x08\x07\x0b", 3, "wire type 3"},              /* a group */
        {"\x08\x07\x3a\x7f\x00", 5, "claims 127 bytes"}, /* graph longer than the file */
        {"\x08\x07", 2, "no graph"},                     /* no graph at all */
        {"\x08\x07\x38\x01", 4, "wrong wire type"},      /* graph as a varint */
        {"\x3a\x05\x5a\x03\x0a\x01\xff", 7, "UTF-8"},    /* input name 0xff */
        {"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "10 bytes"}, /* varint */
        {"\x3a\x03\x5a\x05\x0a", 5, "claims 5 bytes"}, /* input longer than the graph */
        {"\x00\x01", 2, "field number 0"},
    };
    struct mg_error err;
    json_t *got;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&err, 0, sizeof(err));
        assert_int_equal(
            art_introspect_buffer(cases[i].bytes, cases[i].n, "onnx", NULL, &got, &err), MG_EINVAL);
        if (strstr(err.message, cases[i].want) == NULL ||
            strstr(err.message, "byte offset") == NULL)
            fail_msg("case %zu: '%s' lacks '%s'", i, err.message, cases[i].want);
    }
}

/* A refused initializer ahead of others: the reader stops counting there and must not
 * sort or search the names it has not reached (a fuzzer found strcmp(NULL) there). */
static void test_bad_initializer_first(void **state)
{
    /* ModelProto{graph: GraphProto{initializer: {dims: -1}, {name: "b"}, {name: "a"}}} */
    static const char model[] = "\x3a\x17"
                                "\x2a\x0b\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
                                "\x2a\x03\x42\x01"
                                "b"
                                "\x2a\x03\x42\x01"
                                "a";
    struct mg_error err = {0};
    json_t *got = NULL;

    (void)state;
    assert_int_equal(art_introspect_buffer(model, sizeof(model) - 1, "onnx", NULL, &got, &err),
                     MG_EINVAL);
    if (strstr(err.message, "negative or overflowing shape") == NULL)
        fail_msg("%s", err.message);
    assert_null(got);
}

/* TypeProto nested through sequence_type past the depth cap. */
static void test_nesting(void **state)
{
    uint8_t inner[512], outer[600];
    size_t n = 0, k, depth;
    struct mg_error err = {0};
    json_t *got;

    (void)state;
    /* TypeProto{} then wrap: TypeProto{sequence_type(4): Sequence{elem_type(1): inner}} */
    for (depth = 0; depth < 40 && n + 4 <= 120; depth++) {
        uint8_t tmp[600];
        k = 0;
        tmp[k++] = 0x22; /* field 4, length-delimited */
        tmp[k++] = (uint8_t)(n + 2);
        tmp[k++] = 0x0a; /* Sequence.elem_type */
        tmp[k++] = (uint8_t)n;
        memcpy(tmp + k, inner, n);
        n += 4;
        memcpy(inner, tmp, n);
    }
    /* ModelProto{graph(7): GraphProto{input(11): ValueInfoProto{type(2): inner}}} */
    k = 0;
    outer[k++] = 0x3a;
    outer[k++] = (uint8_t)(n + 4);
    outer[k++] = 0x5a;
    outer[k++] = (uint8_t)(n + 2);
    outer[k++] = 0x12;
    outer[k++] = (uint8_t)n;
    memcpy(outer + k, inner, n);
    k += n;
    assert_int_equal(art_introspect_buffer(outer, k, "onnx", NULL, &got, &err), MG_EINVAL);
    if (strstr(err.message, "nest deeper") == NULL)
        fail_msg("%s", err.message);
}

static void test_caps(void **state)
{
    struct art_introspect_limits lim;
    char path[1024];
    struct mg_error err = {0};
    json_t *got;
    size_t n, refused = 0, cut;
    uint8_t *p;

    (void)state;
    snprintf(path, sizeof(path), "%s/vision.onnx", dir);
    art_introspect_limits_default(&lim);
    lim.max_onnx_structure = 64;
    assert_int_equal(read_file(path, &lim, &got, &err), MG_EINVAL);
    assert_non_null(strstr(err.message, "cap of 64 bytes"));
    /* The same file as a plain blob: sniffed, and refused for its size, not ignored. */
    {
        json_t *formats = NULL;
        assert_int_equal(
            art_introspect(path, "application/octet-stream", NULL, &lim, &formats, &got, &err),
            MG_EINVAL);
        assert_non_null(strstr(err.message, "cap of 64 bytes"));
    }
    art_introspect_limits_default(&lim);
    lim.max_onnx_memory = 256;
    assert_int_equal(read_file(path, &lim, &got, &err), MG_EINVAL);
    assert_non_null(strstr(err.message, "bytes of memory"));
    /* Every prefix: read or refused, never past the end (ASan watches). A prefix may end on
     * a field boundary after the graph and still be a model. */
    p = slurp(path, &n);
    for (cut = 0; cut < n; cut += 7) {
        uint8_t *q = malloc(cut + 1);
        memcpy(q, p, cut);
        memset(&err, 0, sizeof(err));
        got = NULL;
        enum mg_code rc = art_introspect_buffer(q, cut, "onnx", NULL, &got, &err);
        assert_true(rc == MG_OK || rc == MG_EINVAL);
        refused += rc == MG_EINVAL;
        json_decref(got);
        free(q);
    }
    assert_true(refused > n / 7 / 2);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_models),
        cmocka_unit_test(test_big_initializer_is_skipped),
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_bad_initializer_first),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_caps),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);

    return rc != 0 ? 1 : corpus_skipped ? MG_SKIP_EXIT : 0;
}
