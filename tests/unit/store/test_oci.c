/*
 * test_oci.c - store/oci.c: a version's OCI documents are kept once (the first writer wins
 * and every later read, after a reopen too, returns those bytes), and a digest is found
 * only among its own model's versions: kept documents, whole artifacts and the files of
 * archives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_fixture.h"

#define M1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define C1 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define R1 "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define B1 "sha256:4444444444444444444444444444444444444444444444444444444444444444"

/* A tar holding a/weights.bin ("WEIGHTS") and README.md ("read me"), stored as a blob. */
static void put_tar(struct fx *fx, char digest[72])
{
    static const char *const names[] = {"a/weights.bin", "README.md"};
    static const char *const bodies[] = {"WEIGHTS", "read me"};
    struct archive *a = archive_write_new();
    struct store_blob_upload *up = NULL;
    char buf[16384];
    size_t used = 0, i;
    json_t *blob = NULL;
    bool created;

    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_memory(a, buf, sizeof(buf), &used), ARCHIVE_OK);
    for (i = 0; i < 2; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_size(e, (la_int64_t)strlen(bodies[i]));
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        assert_int_equal(archive_write_data(a, bodies[i], strlen(bodies[i])),
                         (la_ssize_t)strlen(bodies[i]));
        archive_entry_free(e);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    fx_digest(buf, used, digest);
    assert_int_equal(store_blob_upload_begin(fx->st, 1 << 20, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, buf, used, &fx->err), MG_OK);
    if (store_blob_upload_commit(&up, "alice", digest, &blob, &created, &fx->err) != MG_OK)
        fail_msg("commit: %s", fx->err.message);
    assert_int_equal(json_integer_value(json_object_get(blob, "files")), 2);
    json_decref(blob);
}

static json_t *docs(const char *manifest)
{
    json_t *d = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "digest", M1, "manifest", manifest,
                          "config_digest", C1, "config", "{\"config\":{}}", "referrer_digest", R1,
                          "referrer", "{\"subject\":{}}", "bundle_digest", B1);
    assert_non_null(d);
    return d;
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static void test_kept_once(void **state)
{
    struct fx *fx = *state;
    json_t *out = NULL, *d1 = docs("{\"first\":true}"), *d2 = docs("{\"second\":true}");

    fx_model_versions(fx, "fraud", 2);
    assert_int_equal(store_oci_get(fx->st, "fraud", 1, &out, &fx->err), MG_OK);
    assert_null(out); /* nothing kept yet */
    assert_int_equal(store_oci_get(fx->st, "fraud", 9, &out, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_oci_get(fx->st, "nope", 1, &out, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_oci_put(fx->st, "nope", 1, d1, &out, &fx->err), MG_ENOTFOUND);

    assert_int_equal(store_oci_put(fx->st, "fraud", 1, d1, &out, &fx->err), MG_OK);
    assert_string_equal(str(out, "manifest"), "{\"first\":true}");
    assert_int_equal(json_integer_value(json_object_get(out, "version")), 1);
    json_decref(out);
    /* A second writer (another request, another replica) gets what the first kept. */
    assert_int_equal(store_oci_put(fx->st, "fraud", 1, d2, &out, &fx->err), MG_OK);
    assert_string_equal(str(out, "manifest"), "{\"first\":true}");
    json_decref(out);

    fx_reopen(fx);
    assert_int_equal(store_oci_get(fx->st, "fraud", 1, &out, &fx->err), MG_OK);
    assert_non_null(out);
    assert_string_equal(str(out, "manifest"), "{\"first\":true}");
    assert_string_equal(str(out, "digest"), M1);
    assert_string_equal(str(out, "config_digest"), C1);
    assert_string_equal(str(out, "referrer_digest"), R1);
    assert_string_equal(str(out, "bundle_digest"), B1);
    json_decref(out);
    assert_int_equal(store_oci_get(fx->st, "fraud", 2, &out, &fx->err), MG_OK);
    assert_null(out);
    json_decref(d1);
    json_decref(d2);
}

static void test_unsigned_docs(void **state)
{
    struct fx *fx = *state;
    json_t *out = NULL, *d = docs("{}");

    fx_model_versions(fx, "fraud", 1);
    json_object_set_new(d, "referrer", json_null());
    json_object_set_new(d, "referrer_digest", json_null());
    json_object_set_new(d, "bundle_digest", json_null());
    assert_int_equal(store_oci_put(fx->st, "fraud", 1, d, &out, &fx->err), MG_OK);
    assert_true(json_is_null(json_object_get(out, "referrer")));
    assert_true(json_is_null(json_object_get(out, "bundle_digest")));
    json_decref(out);
    json_decref(d);
}

static void test_find(void **state)
{
    struct fx *fx = *state;
    char tar[72], single[72], weights[72], readme[72];
    static const struct {
        const char *digest, *kind;
    } kept[] = {{M1, "manifest"}, {R1, "referrer"}, {C1, "config"}, {B1, "bundle"}};
    json_t *out = NULL, *d = docs("{}");
    size_t i;

    put_tar(fx, tar);
    fx_put_blob(fx, "a single file", single);
    fx_digest("WEIGHTS", 7, weights);
    fx_digest("read me", 7, readme);
    fx_model(fx, "fraud");
    fx_model(fx, "other");
    assert_int_equal(fx_version(fx, "fraud", json_pack("{s:s}", "artifact", single)), 1);
    assert_int_equal(fx_version(fx, "fraud", json_pack("{s:s}", "artifact", tar)), 2);
    assert_int_equal(store_oci_put(fx->st, "fraud", 2, d, &out, &fx->err), MG_OK);
    json_decref(out);

    for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
        assert_int_equal(store_oci_find(fx->st, "fraud", kept[i].digest, &out, &fx->err), MG_OK);
        assert_string_equal(str(out, "kind"), kept[i].kind);
        assert_int_equal(json_integer_value(json_object_get(out, "version")), 2);
        assert_string_equal(str(out, "digest"), M1);
        json_decref(out);
    }
    assert_int_equal(store_oci_find(fx->st, "fraud", single, &out, &fx->err), MG_OK);
    assert_string_equal(str(out, "kind"), "artifact");
    assert_int_equal(json_integer_value(json_object_get(out, "version")), 1);
    assert_int_equal(json_integer_value(json_object_get(out, "size")), 13);
    json_decref(out);
    assert_int_equal(store_oci_find(fx->st, "fraud", weights, &out, &fx->err), MG_OK);
    assert_string_equal(str(out, "kind"), "file");
    assert_string_equal(str(out, "path"), "a/weights.bin");
    assert_string_equal(str(out, "artifact"), tar);
    assert_int_equal(json_integer_value(json_object_get(out, "size")), 7);
    assert_int_equal(json_integer_value(json_object_get(out, "version")), 2);
    json_decref(out);
    assert_int_equal(store_oci_find(fx->st, "fraud", readme, &out, &fx->err), MG_OK);
    assert_string_equal(str(out, "path"), "README.md");
    json_decref(out);

    /* Nothing of another model: its path reaches none of these bytes. */
    assert_int_equal(store_oci_find(fx->st, "other", weights, &out, &fx->err), MG_ENOTFOUND);
    assert_string_equal(fx->err.field, "");
    assert_int_equal(store_oci_find(fx->st, "other", M1, &out, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_oci_find(fx->st, "other", single, &out, &fx->err), MG_ENOTFOUND);
    /* A model that does not exist says so (field "model"). */
    assert_int_equal(store_oci_find(fx->st, "nope", weights, &out, &fx->err), MG_ENOTFOUND);
    assert_string_equal(fx->err.field, "model");
    assert_int_equal(store_oci_find(fx->st, "fraud", "sha256:zz", &out, &fx->err), MG_EINVAL);
    json_decref(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kept_once, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_unsigned_docs, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_find, fx_setup, fx_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
