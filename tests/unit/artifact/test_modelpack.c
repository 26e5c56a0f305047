/*
 * test_modelpack.c - artifact/modelpack.c: a version as a ModelPack OCI artifact. The
 * bytes are a function of what never changes in a version (two builds agree; the
 * description, tags and later metrics change nothing), the layout is ModelPack's (media
 * types, annotations, a config with only its three sections), layers follow the file
 * manifest in model_signing's path order, and the referrer attaches the bundle to the
 * manifest. Tables for the name heuristics and paramSize.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/modelpack.h"
#include "base/util.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define ART "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static json_t *version_record(const char *media, json_t *files_count)
{
    json_t *v =
        json_pack("{s:s, s:i, s:s, s:s, s:{s:s, s:i, s:s, s:o}, s:s, s:s, s:{s:s, s:s}, "
                  "s:[{s:s, s:s, s:s, s:s}], s:{s:i}, s:{s:I, s:s}, s:s, s:{s:s}, s:{s:f}}",
                  "model", "fraud", "version", 3, "created_at", "2026-11-21T10:00:00.123Z",
                  "created_by", "ci", "artifact", "digest", ART, "size", 4096, "media_type", media,
                  "files", files_count, "image",
                  "registry.example/serve@sha256:"
                  "0123456789abcdef0123456789abcdef0123456789abcdef"
                  "0123456789abcdef",
                  "run_id", "train-1234", "source", "repo", "https://git.example/ml/fraud",
                  "commit", "9f2c", "datasets", "digest", D3, "name", "fraud-train", "uri",
                  "s3://bucket/train/", "role", "train", "params", "epochs", 12, "resources",
                  "parameters", (json_int_t)7000000000LL, "precision", "fp16", "description",
                  "first description", "tags", "team", "risk", "metrics", "auc", 0.5);

    assert_non_null(v);
    return v;
}

static json_t *three_files(void)
{
    /* Stored order (the database's) differs from model_signing's path order. */
    json_t *f =
        json_pack("{s:[{s:s, s:i, s:s}, {s:s, s:i, s:s}, {s:s, s:i, s:s}]}", "items", "path",
                  "sub.cfg", "size", 10, "digest", D1, "path", "sub/weights.safetensors", "size",
                  2000, "digest", D2, "path", "README.md", "size", 30, "digest", D3);
    assert_non_null(f);
    return f;
}

/* A bundle whose statement says metrics {"auc":0.94}: what the server signed at creation. */
static char *fake_bundle(size_t *len)
{
    const char *st = "{\"predicate\":{\"modelgate\":{\"model\":\"fraud\",\"version\":3,"
                     "\"metrics\":{\"auc\":0.94},\"created_by\":\"ci\"}}}";
    char *b64 = mg_base64_encode((const uint8_t *)st, strlen(st)), *out = NULL;

    assert_non_null(b64);
    assert_true(asprintf(&out,
                         "{\"mediaType\":\"application/vnd.dev.sigstore.bundle.v0.3+json\","
                         "\"dsseEnvelope\":{\"payload\":\"%s\"}}",
                         b64) > 0);
    free(b64);
    *len = strlen(out);
    return out;
}

static json_t *parse(const struct art_oci_doc *d)
{
    json_t *v;
    char hex[65], digest[72];

    assert_non_null(d->text);
    assert_int_equal(strlen(d->text), d->len);
    mg_sha256_hex(d->text, d->len, hex);
    snprintf(digest, sizeof(digest), "sha256:%s", hex);
    assert_string_equal(d->digest, digest);
    v = json_loads(d->text, 0, NULL);
    assert_non_null(v);
    return v;
}

static const char *ann(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "annotations"), key));
}

static void test_archive_layout(void **state)
{
    json_t *ver = version_record("application/gzip", json_integer(3)), *files = three_files();
    json_t *man, *cfg, *layers, *k;
    struct art_modelpack m;
    struct mg_error err;
    size_t blen, i;
    char *bundle = fake_bundle(&blen);
    const char *key;

    (void)state;
    assert_int_equal(art_modelpack_build(ver, files, bundle, blen, &m, &err), MG_OK);
    man = parse(&m.manifest);
    cfg = parse(&m.config);
    assert_int_equal(json_integer_value(json_object_get(man, "schemaVersion")), 2);
    assert_string_equal(json_string_value(json_object_get(man, "mediaType")), ART_OCI_MANIFEST);
    assert_string_equal(json_string_value(json_object_get(man, "artifactType")),
                        "application/vnd.cncf.model.manifest.v1+json");
    k = json_object_get(man, "config");
    assert_string_equal(json_string_value(json_object_get(k, "mediaType")),
                        "application/vnd.cncf.model.config.v1+json");
    assert_string_equal(json_string_value(json_object_get(k, "digest")), m.config.digest);
    assert_int_equal(json_integer_value(json_object_get(k, "size")), m.config.len);

    /* One raw layer per file, in model_signing's order: README.md, sub/…, sub.cfg. */
    layers = json_object_get(man, "layers");
    assert_int_equal(json_array_size(layers), 3);
    {
        static const char *const path[] = {"README.md", "sub/weights.safetensors", "sub.cfg"};
        static const char *const digest[] = {D3, D2, D1};
        static const char *const type[] = {"application/vnd.cncf.model.doc.v1.raw",
                                           "application/vnd.cncf.model.weight.v1.raw",
                                           "application/vnd.cncf.model.weight.config.v1.raw"};
        static const json_int_t size[] = {30, 2000, 10};

        for (i = 0; i < 3; i++) {
            json_t *l = json_array_get(layers, i);
            assert_string_equal(json_string_value(json_object_get(l, "digest")), digest[i]);
            assert_int_equal(json_integer_value(json_object_get(l, "size")), size[i]);
            assert_string_equal(json_string_value(json_object_get(l, "mediaType")), type[i]);
            assert_string_equal(ann(l, "org.cncf.model.filepath"), path[i]);
            assert_string_equal(ann(l, "org.opencontainers.image.title"), path[i]);
            assert_string_equal(ann(l, "org.cncf.model.file.mediatype.untested"), "true");
        }
    }

    /* The config: ModelPack's three sections and nothing else (its schema is closed). */
    assert_int_equal(json_object_size(cfg), 3);
    json_object_foreach(json_object_get(cfg, "descriptor"), key, k)
    {
        static const char *const allowed[] = {
            "createdAt",   "authors", "vendor",    "family",      "name",     "version",  "title",
            "description", "docURL",  "sourceURL", "datasetsURL", "revision", "licenses", NULL};
        bool ok = false;
        for (i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok)
            fail_msg("descriptor.%s is not a ModelPack field", key);
    }
    k = json_object_get(cfg, "descriptor");
    assert_string_equal(json_string_value(json_object_get(k, "name")), "fraud");
    assert_string_equal(json_string_value(json_object_get(k, "version")), "3");
    assert_string_equal(json_string_value(json_object_get(k, "createdAt")),
                        "2026-11-21T10:00:00.123Z");
    assert_string_equal(json_string_value(json_object_get(k, "sourceURL")),
                        "https://git.example/ml/fraud");
    assert_string_equal(json_string_value(json_object_get(k, "revision")), "9f2c");
    assert_string_equal(json_string_value(json_array_get(json_object_get(k, "datasetsURL"), 0)),
                        "s3://bucket/train/");
    assert_null(json_object_get(k, "description")); /* editable: not in the frozen bytes */
    k = json_object_get(cfg, "config");
    assert_string_equal(json_string_value(json_object_get(k, "format")), "safetensors");
    assert_string_equal(json_string_value(json_object_get(k, "paramSize")), "7B");
    assert_string_equal(json_string_value(json_object_get(k, "precision")), "float16");
    k = json_object_get(cfg, "modelfs");
    assert_string_equal(json_string_value(json_object_get(k, "type")), "layers");
    assert_int_equal(json_array_size(json_object_get(k, "diffIds")), 3);
    for (i = 0; i < 3; i++)
        assert_true(json_equal(json_array_get(json_object_get(k, "diffIds"), i),
                               json_object_get(json_array_get(layers, i), "digest")));

    /* Annotations: OCI's, and the signed metadata (metrics as signed, not as now). */
    assert_string_equal(ann(man, "org.opencontainers.image.created"), "2026-11-21T10:00:00.123Z");
    assert_string_equal(ann(man, "org.opencontainers.image.revision"), "9f2c");
    assert_string_equal(ann(man, "dev.modelgate.artifact"), ART);
    assert_string_equal(ann(man, "dev.modelgate.run-id"), "train-1234");
    {
        json_t *meta = json_loads(ann(man, "dev.modelgate.metadata+json"), 0, NULL);
        assert_non_null(meta);
        assert_true(json_number_value(json_object_get(json_object_get(meta, "metrics"), "auc")) ==
                    0.94);
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(meta, "params"), "epochs")), 12);
        json_decref(meta);
    }

    /* The referrer: the bundle as its one layer, the manifest as its subject. */
    {
        json_t *ref = parse(&m.referrer), *l, *sub;
        char hex[65], bd[72];

        mg_sha256_hex(bundle, blen, hex);
        snprintf(bd, sizeof(bd), "sha256:%s", hex);
        assert_string_equal(m.bundle_digest, bd);
        assert_string_equal(json_string_value(json_object_get(ref, "artifactType")),
                            ART_SIGSTORE_BUNDLE);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(ref, "config"), "digest")),
            ART_OCI_EMPTY_DIGEST);
        l = json_array_get(json_object_get(ref, "layers"), 0);
        assert_string_equal(json_string_value(json_object_get(l, "digest")), bd);
        assert_int_equal(json_integer_value(json_object_get(l, "size")), blen);
        assert_string_equal(json_string_value(json_object_get(l, "mediaType")),
                            ART_SIGSTORE_BUNDLE);
        sub = json_object_get(ref, "subject");
        assert_string_equal(json_string_value(json_object_get(sub, "digest")), m.manifest.digest);
        assert_int_equal(json_integer_value(json_object_get(sub, "size")), m.manifest.len);
        assert_string_equal(ann(ref, "dev.sigstore.bundle.content"), "dsse-envelope");
        json_decref(ref);
    }
    json_decref(man);
    json_decref(cfg);
    art_modelpack_release(&m);
    json_decref(ver);
    json_decref(files);
    free(bundle);
}

/* Same version, same bytes: whatever can still change in the record changes nothing. */
static void test_deterministic(void **state)
{
    json_t *a = version_record("application/gzip", json_integer(3)), *files = three_files();
    json_t *b = version_record("application/gzip", json_integer(3)), *rev;
    struct art_modelpack m1, m2;
    struct mg_error err;
    size_t blen;
    char *bundle = fake_bundle(&blen);

    (void)state;
    json_object_set_new(b, "description", json_string("edited later"));
    json_object_set_new(b, "tags", json_pack("{s:s}", "stage", "gold"));
    json_object_set_new(b, "metrics", json_pack("{s:f, s:f}", "auc", 0.5, "f1", 0.8));
    /* The file manifest in another order (another database's collation). */
    rev = json_pack("{s:[O, O, O]}", "items", json_array_get(json_object_get(files, "items"), 2),
                    json_array_get(json_object_get(files, "items"), 0),
                    json_array_get(json_object_get(files, "items"), 1));
    assert_int_equal(art_modelpack_build(a, files, bundle, blen, &m1, &err), MG_OK);
    assert_int_equal(art_modelpack_build(b, rev, bundle, blen, &m2, &err), MG_OK);
    assert_string_equal(m1.manifest.text, m2.manifest.text);
    assert_string_equal(m1.manifest.digest, m2.manifest.digest);
    assert_string_equal(m1.config.text, m2.config.text);
    assert_string_equal(m1.referrer.text, m2.referrer.text);
    art_modelpack_release(&m1);
    art_modelpack_release(&m2);
    json_decref(a);
    json_decref(b);
    json_decref(rev);
    json_decref(files);
    free(bundle);
}

/* A single file, an archive without files, one with too many: one layer of the whole. */
static void test_whole_artifact_layer(void **state)
{
    static const struct {
        const char *media;
        bool archive;
        size_t nfiles;
        const char *type, *name;
    } cases[] = {
        {"application/octet-stream", false, 0, "application/vnd.cncf.model.weight.v1.raw", "model"},
        {"application/x-tar", true, 0, "application/vnd.cncf.model.weight.v1.tar", "model.tar"},
        {"application/gzip", true, ART_MODELPACK_MAX_FILE_LAYERS + 1,
         "application/vnd.cncf.model.weight.v1.tar+gzip", "model.tar.gz"},
        {"application/zstd", true, 0, "application/vnd.cncf.model.weight.v1.tar+zstd",
         "model.tar.zst"},
        {"application/zip", true, 0, "application/vnd.cncf.model.weight.v1.raw", "model.zip"},
    };
    size_t c, i;

    (void)state;
    for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        json_t *ver = version_record(cases[c].media, cases[c].archive
                                                         ? json_integer((json_int_t)cases[c].nfiles)
                                                         : json_null());
        json_t *files = NULL, *man, *l;
        struct art_modelpack m;
        struct mg_error err;

        if (cases[c].archive) {
            files = json_pack("{s:[]}", "items");
            for (i = 0; i < cases[c].nfiles; i++) {
                char p[32];
                snprintf(p, sizeof(p), "f%05zu.bin", i);
                json_array_append_new(
                    json_object_get(files, "items"),
                    json_pack("{s:s, s:i, s:s}", "path", p, "size", 1, "digest", D1));
            }
        }
        assert_int_equal(art_modelpack_build(ver, files, NULL, 0, &m, &err), MG_OK);
        man = parse(&m.manifest);
        assert_int_equal(json_array_size(json_object_get(man, "layers")), 1);
        l = json_array_get(json_object_get(man, "layers"), 0);
        assert_string_equal(json_string_value(json_object_get(l, "digest")), ART);
        assert_int_equal(json_integer_value(json_object_get(l, "size")), 4096);
        assert_string_equal(json_string_value(json_object_get(l, "mediaType")), cases[c].type);
        assert_string_equal(ann(l, "org.cncf.model.filepath"), cases[c].name);
        /* Unsigned: no referrer; the metadata comes from the record, without metrics. */
        assert_null(m.referrer.text);
        assert_string_equal(m.bundle_digest, "");
        assert_null(strstr(ann(man, "dev.modelgate.metadata+json"), "\"metrics\""));
        json_decref(man);
        art_modelpack_release(&m);
        json_decref(ver);
        json_decref(files);
    }
}

static void test_malformed_record(void **state)
{
    json_t *ver = version_record("application/gzip", json_integer(3));
    json_t *bad_files =
        json_pack("{s:[{s:s, s:i, s:s}]}", "items", "path", "a", "size", 1, "digest", "sha256:zz");
    struct art_modelpack m;
    struct mg_error err;

    (void)state;
    assert_int_equal(art_modelpack_build(ver, bad_files, NULL, 0, &m, &err), MG_EINVAL);
    assert_null(m.manifest.text);
    json_object_del(ver, "artifact");
    assert_int_equal(art_modelpack_build(ver, NULL, NULL, 0, &m, &err), MG_EINVAL);
    json_decref(ver);
    json_decref(bad_files);
}

static void test_layer_types(void **state)
{
    static const struct {
        const char *path, *kind;
    } cases[] = {
        {"model.safetensors", "weight"},
        {"sub/model-00001-of-00002.safetensors", "weight"},
        {"llama.Q4_K_M.gguf", "weight"},
        {"model.onnx", "weight"},
        {"pytorch_model.bin", "weight"},
        {"weights.PT", "weight"},
        {"blob-without-extension", "weight"},
        {"config.json", "weight.config"},
        {"tokenizer.json", "weight.config"},
        {"tokenizer.model", "weight.config"},
        {"merges.txt", "weight.config"},
        {"params.yaml", "weight.config"},
        {"README.md", "doc"},
        {"LICENSE", "doc"},
        {"docs/notes.txt", "doc"},
        {"serve.py", "code"},
        {"run.sh", "code"},
        {"eval/holdout.csv", "dataset"},
        {"train.parquet", "dataset"},
    };
    size_t i;
    char want[128];

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(want, sizeof(want), "application/vnd.cncf.model.%s.v1.raw", cases[i].kind);
        if (strcmp(art_modelpack_layer_type(cases[i].path), want) != 0)
            fail_msg("%s: %s, want %s", cases[i].path, art_modelpack_layer_type(cases[i].path),
                     want);
    }
}

static void test_param_size(void **state)
{
    static const struct {
        int64_t n;
        const char *want; /* NULL: none */
    } cases[] = {
        {0, NULL},
        {99, NULL},
        {100, "0.1K"},
        {1234, "1.2K"},
        {1250, "1.3K"},
        {999999, "1M"},
        {125000000, "125M"},
        {6700000000LL, "6.7B"},
        {7000000000LL, "7B"},
        {70553706496LL, "70.6B"},
        {1500000000000LL, "1.5T"},
        {2000000000000000LL, "2Q"},
    };
    size_t i;
    char out[32];

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool got = art_modelpack_param_size(cases[i].n, out);
        if (cases[i].want == NULL) {
            assert_false(got);
            continue;
        }
        assert_true(got);
        if (strcmp(out, cases[i].want) != 0)
            fail_msg("%lld: %s, want %s", (long long)cases[i].n, out, cases[i].want);
    }
}

static void test_bundle_metadata(void **state)
{
    size_t len;
    char *b = fake_bundle(&len);
    json_t *m = art_bundle_metadata(b, len);

    (void)state;
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "model")), "fraud");
    json_decref(m);
    assert_null(art_bundle_metadata("{}", 2));
    assert_null(art_bundle_metadata("not json", 8));
    assert_null(art_bundle_metadata("{\"dsseEnvelope\":{\"payload\":\"@@@\"}}", 34));
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_archive_layout),       cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_whole_artifact_layer), cmocka_unit_test(test_malformed_record),
        cmocka_unit_test(test_layer_types),          cmocka_unit_test(test_param_size),
        cmocka_unit_test(test_bundle_metadata),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
