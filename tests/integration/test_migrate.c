/*
 * test_migrate.c - `modelgated migrate`: a populated embedded installation
 * (SQLite and its blob directory) copied to PostgreSQL and a shared blob
 * directory, then served from there by another modelgated: the same answers,
 * the same tokens, the audit chain verifying, the old signing key published,
 * numbering going on; every release attestation served byte for byte, verifying
 * with openssl and sigstore-js, its chain intact and continued by the next
 * generation; run again, it copies nothing twice. Runs in the
 * PostgreSQL pass (pg_integration_test_migrate); skipped on SQLite alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "attest_common.h"
#include "harness.h"
#include "sys.h"

/* Run a command; its first output line into out (when given); the exit status. */
static int run(const char *cmd, char *out, size_t n)
{
    char line[8192];
    FILE *p = popen(cmd, "r");
    int status;

    if (p == NULL)
        fail_msg("popen %s", cmd);
    if (out != NULL) {
        out[0] = '\0';
        if (fgets(out, (int)n, p) != NULL)
            out[strcspn(out, "\n")] = '\0';
    }
    while (fgets(line, sizeof(line), p) != NULL)
        print_message("%s", line);
    status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Run from the data directory's parent with a relative --data-dir, as a user would. */
static json_t *migrate(const char *data, const char *url, const char *blobs)
{
    char cmd[IT_PATH_MAX * 4], out[8192];
    const char *slash = strrchr(data, '/');
    json_t *j;

    assert_non_null(slash);
    it_fmt(cmd, sizeof(cmd),
           "cd '%.*s' && '%s' migrate --data-dir '%s' --to-database '%s' --to-blobs 'file:%s' 2>&1",
           (int)(slash - data), data, getenv("MODELGATED"), slash + 1, url, blobs);
    if (run(cmd, out, sizeof(out)) != 0)
        fail_msg("migrate failed: %s", out);
    if ((j = json_loads(out, 0, NULL)) == NULL)
        fail_msg("migrate printed no JSON summary: %s", out);
    return j;
}

static json_int_t copied(const json_t *summary, const char *table)
{
    return json_integer_value(
        json_object_get(json_object_get(json_object_get(summary, "tables"), table), "copied"));
}

/* The answer's JSON, less what moves by itself (an alias's delivery states: the
 * destination's runner delivers on its own), as compact sorted text (malloc'd). */
static char *body_of(struct mg_server *s, const char *path, const char *token)
{
    struct it_resp *r = it_get(s, path, token);
    char *text;

    it_expect_status(s, r, 200);
    json_object_del(r->json, "deliveries");
    text = json_dumps(r->json, JSON_COMPACT | JSON_SORT_KEYS);
    it_resp_free(s, &r);
    return text;
}

/* The alias generations made before the move. */
#define NGEN 4

static void test_migrate_a_populated_installation(void **state)
{
    static const char *const reads[] = {
        "/api/v1/models",
        "/api/v1/models/fraud",
        "/api/v1/models/fraud/versions",
        "/api/v1/models/fraud/versions/2",
        "/api/v1/models/fraud/aliases/production",
        "/api/v1/models/fraud/aliases/production/history",
        "/api/v1/models/fraud/aliases/production/last-known-good",
        "/api/v1/datasets/sha256:1111111111111111111111111111111111111111111111111111111111111111",
        "/api/v1/teams",
        "/api/v1/models/fraud/retention",
    };
    char url[IT_PATH_MAX + 64], dbname[64], blobs[IT_PATH_MAX], cmd[IT_PATH_MAX * 2];
    char oci_digest[IT_DIGEST_LEN + 1];
    char art[IT_DIGEST_LEN + 1], *reader, *before[sizeof(reads) / sizeof(reads[0])];
    char *referrers;
    struct it_attest att[NGEN + 1], next;
    struct mg_server *src, *dst;
    struct it_resp *r;
    json_t *sum;
    size_t i;

    (void)state;
    if (!it_on_postgres())
        it_not_applicable("needs the PostgreSQL pass (pg_integration_test_migrate)");
    it_attest_need_tools();
    /* The embedded installation, populated through the API. */
    src = it_server_start((const char *const[]){"--database", "sqlite", NULL});
    reader = it_token_create(src, "ci-reader", "reader", NULL);
    r = it_jreq(src, "POST", "/api/v1/teams", src->admin_token, "{\"name\":\"risk\"}");
    it_expect_status(src, r, 201);
    it_resp_free(src, &r);
    r = it_jreq(
        src, "POST", "/api/v1/datasets", src->admin_token,
        "{\"digest\":\"sha256:1111111111111111111111111111111111111111111111111111111111111111\","
        "\"name\":\"clicks\"}");
    it_expect_status(src, r, 201);
    it_resp_free(src, &r);
    it_model_create(src, src->admin_token, "fraud");
    for (i = 1; i <= 3; i++) {
        char bytes[32];

        it_fmt(bytes, sizeof(bytes), "model bytes %zu", i);
        r = it_upload(src, bytes, strlen(bytes), art);
        it_resp_free(src, &r);
        it_version_create(
            src, src->admin_token, "fraud", art,
            json_pack("{s:{s:f}, s:[{s:s, s:s}]}", "metrics", "auc", 0.9 + i / 100.0, "datasets",
                      "digest",
                      "sha256:11111111111111111111111111111111111111111111111111111111"
                      "11111111",
                      "role", "train"));
    }
    it_alias_to(src, src->admin_token, "fraud", "production", 1, 0);
    it_alias_to(src, src->admin_token, "fraud", "production", 2, 0);
    /* Generations 3 and 4: a split, then back to version 2 alone. */
    assert_int_equal(it_alias_set(src, src->admin_token, "fraud", "production",
                                  "{\"routes\":[{\"version\":2,\"weight\":90},"
                                  "{\"version\":3,\"weight\":10}]}"),
                     3);
    assert_int_equal(it_alias_set(src, src->admin_token, "fraud", "production", "{\"version\":2}"),
                     NGEN);
    for (i = 1; i <= NGEN; i++) {
        it_attest_get(src, reader, "fraud", "production", (json_int_t)i, &att[i]);
        if (i > 1)
            it_attest_expect_link(&att[i - 1], &att[i]);
    }
    r = it_jreq(src, "PUT", "/api/v1/models/fraud/retention", src->admin_token,
                "{\"keep_last\":10,\"action\":\"archive\"}");
    it_expect_status(src, r, 200);
    it_resp_free(src, &r);
    for (i = 0; i < sizeof(reads) / sizeof(reads[0]); i++)
        before[i] = body_of(src, reads[i], reader);
    /* A version pulled as an OCI artifact: its manifest was kept, and moves with it. */
    r = it_get(src, "/v2/fraud/manifests/production", reader);
    it_expect_status(src, r, 200);
    it_fmt(oci_digest, sizeof(oci_digest), "%s", it_header(r, "Docker-Content-Digest"));
    it_resp_free(src, &r);
    /* Its referrers: the signature, the scan report and the attestations routing it. */
    r = it_get(src, it_fmt(cmd, sizeof(cmd), "/v2/fraud/referrers/%s", oci_digest), reader);
    it_expect_status(src, r, 200);
    if ((referrers = strdup(r->body)) == NULL)
        fail_msg("out of memory");
    it_resp_free(src, &r);
    it_server_stop(src);

    /* Copy it; a second run (a resumed one) copies nothing more. */
    it_fmt(dbname, sizeof(dbname), "migrated_%d", (int)getpid());
    it_fmt(cmd, sizeof(cmd), "bash '%s/scripts/pg-test.sh' createdb '%s' %s",
           getenv("MG_SOURCE_DIR"), getenv("MG_PG_DIR"), dbname);
    if (run(cmd, url, sizeof(url)) != 0)
        fail_msg("createdb %s: %s", dbname, url);
    it_fmt(blobs, sizeof(blobs), "%s/shared-blobs", src->root);
    sum = migrate(src->data_dir, url, blobs);
    assert_int_equal(copied(sum, "versions"), 3);
    assert_int_equal(copied(sum, "oci_manifests"), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "blobs"), "copied")),
                     3);
    assert_true(json_is_true(json_object_get(json_object_get(sum, "audit"), "ok")));
    json_decref(sum);
    sum = migrate(src->data_dir, url, blobs);
    assert_int_equal(copied(sum, "versions"), 0);
    assert_int_equal(copied(sum, "audit"), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "blobs"), "copied")),
                     0);
    json_decref(sum);

    /* Served from PostgreSQL: the same answers to the same token. */
    it_fmt(cmd, sizeof(cmd), "file:%s", blobs);
    dst = it_server_start_admin((const char *const[]){"--database", url, "--blobs", cmd, NULL},
                                src->admin_token);
    for (i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
        char *after = body_of(dst, reads[i], reader);

        if (strcmp(before[i], after) != 0)
            fail_msg("%s differs after the migration:\nbefore %s\nafter  %s", reads[i], before[i],
                     after);
        free(after);
        free(before[i]);
    }
    r = it_get(dst, "/v2/fraud/manifests/production", reader);
    it_expect_status(dst, r, 200);
    assert_string_equal(it_header(r, "Docker-Content-Digest"), oci_digest);
    it_resp_free(dst, &r);
    r = it_get(dst, "/api/v1/audit/verify", dst->admin_token);
    it_expect_status(dst, r, 200);
    assert_true(json_is_true(json_object_get(r->json, "ok")));
    it_resp_free(dst, &r);
    r = it_get(dst, "/api/v1/models/fraud/versions/1/artifact", reader);
    it_expect_status(dst, r, 200);
    assert_string_equal(r->body, "model bytes 1");
    it_resp_free(dst, &r);
    r = it_get(dst, "/api/v1/models/fraud/versions/1/signature", reader);
    it_expect_status(dst, r, 200); /* its key is published by the new installation */
    it_resp_free(dst, &r);
    /* Each referrer is fetched by its digest before the new installation lists them (a
     * listing writes the current scan report's manifest again): the scan report's manifest
     * and report moved with the version (oci_scan_refs). */
    {
        json_t *list = json_loads(referrers, 0, NULL), *m;
        size_t k;

        assert_non_null(list);
        assert_true(json_array_size(json_object_get(list, "manifests")) >= 2);
        json_array_foreach(json_object_get(list, "manifests"), k, m)
        {
            r = it_get(dst,
                       it_fmt(cmd, sizeof(cmd), "/v2/fraud/manifests/%s", it_jstr(m, "digest")),
                       reader);
            if (r->status != 200)
                fail_msg("referrer %s (%s) is not served after the migration: %ld %s",
                         it_jstr(m, "digest"), it_jstr(m, "artifactType"), r->status, r->body);
            it_resp_free(dst, &r);
        }
        json_decref(list);
    }
    r = it_get(dst, it_fmt(cmd, sizeof(cmd), "/v2/fraud/referrers/%s", oci_digest), reader);
    it_expect_status(dst, r, 200);
    if (strcmp(r->body, referrers) != 0)
        fail_msg("the version's referrers differ after the migration:\nbefore %s\nafter  %s",
                 referrers, r->body);
    it_resp_free(dst, &r);
    free(referrers);
    /* Every attestation: the same bytes, verifying against the key the new installation
     * publishes (the old one, carried by migrate), the chain intact. */
    for (i = 1; i <= NGEN; i++) {
        struct it_attest got;

        it_attest_get(dst, reader, "fraud", "production", (json_int_t)i, &got);
        if (got.bundle_len != att[i].bundle_len || strcmp(got.bundle, att[i].bundle) != 0)
            fail_msg("generation %zu's attestation differs after the migration:\nbefore %s\n"
                     "after  %s",
                     i, att[i].bundle, got.bundle);
        it_attest_verify(dst, &got, dst->root);
        /* ... and as the layer of its OCI referrer, under the bundle's digest */
        it_digest(got.bundle, got.bundle_len, art);
        r = it_get(dst, it_fmt(cmd, sizeof(cmd), "/v2/fraud/blobs/%s", art), reader);
        it_expect_status(dst, r, 200);
        if (r->len != got.bundle_len || memcmp(r->body, got.bundle, r->len) != 0)
            fail_msg("/v2/ serves generation %zu's attestation other bytes after the migration", i);
        it_resp_free(dst, &r);
        if (i > 1)
            it_attest_expect_link(&att[i - 1], &got);
        it_attest_release(&got);
    }
    r = it_upload(dst, "after the move", 14, art);
    it_resp_free(dst, &r);
    assert_int_equal(it_version_create(dst, dst->admin_token, "fraud", art, NULL), 4);
    /* The next generation, signed by the new installation's own key, links to the last one
     * signed before the move. */
    assert_int_equal(it_alias_set(dst, dst->admin_token, "fraud", "production", "{\"version\":4}"),
                     NGEN + 1);
    it_attest_get(dst, reader, "fraud", "production", NGEN + 1, &next);
    it_attest_verify(dst, &next, dst->root);
    it_attest_expect_link(&att[NGEN], &next);
    assert_string_not_equal(next.hint, att[NGEN].hint);
    it_attest_release(&next);
    for (i = 1; i <= NGEN; i++)
        it_attest_release(&att[i]);
    free(reader);
    it_server_stop(dst);
    it_server_free(&dst);
    it_server_free(&src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_a_populated_installation),
    };

    return it_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
