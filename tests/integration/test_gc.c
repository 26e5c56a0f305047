/*
 * test_gc.c - blob garbage collection (docs/contract.md "Lifecycle") on the blob backend the suite
 * runs on (file:, and again as s3_integration_test_gc and oci_integration_test_gc): after
 * deletes the bytes go and the bytes reclaimed match the report, a blob a live version
 * shares stays, a dataset holds its blob until it is withdrawn, a deleted version's
 * signature still verifies with stock openssl; uploads racing collections (new bytes and
 * bytes being collected) lose nothing; a collector killed -9 between marking and removing
 * is finished by the next run with nothing live lost.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"

static const char *const grace0[] = {
    "--gc-grace", "0s", "--gc-interval", "0s", "--retention-interval", "0s", NULL};

/* Bytes of their own for blob `i` of a test (`size` long). */
static char *bytes_for(const char *tag, int i, size_t size)
{
    char *buf = malloc(size), head[96];
    int n = snprintf(head, sizeof(head), "%s blob %d ", tag, i);

    assert_non_null(buf);
    for (size_t k = 0; k < size; k++)
        buf[k] = (char)('A' + (k * 13 + (size_t)i * 7) % 26);
    memcpy(buf, head, n > 0 && (size_t)n < size ? (size_t)n : 0);
    return buf;
}

static void upload_bytes(struct mg_server *s, const char *tag, int i, size_t size,
                         char digest[IT_DIGEST_LEN + 1])
{
    char *b = bytes_for(tag, i, size);
    struct it_resp *r = it_upload(s, b, size, digest);

    it_resp_free(s, &r);
    free(b);
}

static json_t *gc(struct mg_server *s, bool dry)
{
    char path[80];
    struct it_resp *r =
        it_jreq(s, "POST",
                it_fmt(path, sizeof(path), "/api/v1/admin/gc?dry_run=%s", dry ? "true" : "false"),
                s->admin_token, NULL);

    it_expect_status(s, r, 200);
    return json_incref(r->json);
}

static void delete_version(struct mg_server *s, const char *model, json_int_t n)
{
    char path[160];
    struct it_resp *r =
        it_jreq(s, "DELETE",
                it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld", model, (long long)n),
                s->admin_token, "{\"reason\":\"test\"}");

    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
}

/* The version's artifact downloads and hashes to digest. */
static void expect_artifact(struct mg_server *s, const char *model, json_int_t n,
                            const char *digest)
{
    char path[160], got[IT_DIGEST_LEN + 1];
    struct it_resp *r = it_get(
        s,
        it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld/artifact", model, (long long)n),
        s->admin_token);

    it_expect_status(s, r, 200);
    it_digest(r->body, r->len, got);
    assert_string_equal(got, digest);
    it_resp_free(s, &r);
}

/* The version's signature bundle verifies with stock openssl against the published key
 * (docs/design.md "Signing", the recipe with nothing of ours). */
static void expect_signature_verifies(struct mg_server *s, const char *model, json_int_t n)
{
    char dir[IT_PATH_MAX], path[IT_PATH_MAX], cmd[4 * IT_PATH_MAX], head[64];
    struct it_resp *sig, *keys;
    json_t *bundle, *env;
    uint8_t *body, *der;
    size_t blen, dlen;
    char *pae;
    int hl;

    sig = it_get(s,
                 it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld/signature", model,
                        (long long)n),
                 s->admin_token);
    it_expect_status(s, sig, 200);
    bundle = json_loadb(sig->body, sig->len, 0, NULL);
    assert_non_null(bundle);
    env = json_object_get(bundle, "dsseEnvelope");
    body = mg_base64_decode(json_string_value(json_object_get(env, "payload")),
                            json_string_length(json_object_get(env, "payload")), &blen);
    der = mg_base64_decode(json_string_value(json_object_get(
                               json_array_get(json_object_get(env, "signatures"), 0), "sig")),
                           strlen(json_string_value(json_object_get(
                               json_array_get(json_object_get(env, "signatures"), 0), "sig"))),
                           &dlen);
    assert_non_null(body);
    assert_non_null(der);
    it_mkdtemp(dir, "gc-sig");
    hl = snprintf(head, sizeof(head), "DSSEv1 28 application/vnd.in-toto+json %zu ", blen);
    pae = malloc((size_t)hl + blen);
    assert_non_null(pae);
    memcpy(pae, head, (size_t)hl);
    memcpy(pae + hl, body, blen);
    it_write_bytes(it_fmt(path, sizeof(path), "%s/pae", dir), pae, (size_t)hl + blen);
    it_write_bytes(it_fmt(path, sizeof(path), "%s/sig", dir), der, dlen);
    keys = it_get(s, "/api/v1/signing-keys", s->admin_token);
    it_expect_status(s, keys, 200);
    it_write_file(it_fmt(path, sizeof(path), "%s/pub.pem", dir),
                  it_jstr(json_array_get(it_jarr(keys->json, "items"), 0), "public_key_pem"));
    snprintf(cmd, sizeof(cmd),
             "openssl dgst -sha256 -verify %s/pub.pem -signature %s/sig %s/pae >/dev/null 2>&1",
             dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    it_rmtree(dir);
    free(pae);
    free(body);
    free(der);
    json_decref(bundle);
    it_resp_free(s, &sig);
    it_resp_free(s, &keys);
}

static void test_gc_reclaims_what_nothing_holds(void **state)
{
    struct mg_server *s = it_server_start(grace0);
    char a[IT_DIGEST_LEN + 1], b[IT_DIGEST_LEN + 1], c[IT_DIGEST_LEN + 1], body[256], path[200];
    json_t *rep;
    struct it_resp *r;

    (void)state;
    it_model_create(s, s->admin_token, "gcm");
    upload_bytes(s, "gcm", 1, 3000, a);
    upload_bytes(s, "gcm", 2, 5000, b);
    upload_bytes(s, "gcm", 3, 700, c); /* a dataset's bytes */
    assert_int_equal(it_version_create(s, s->admin_token, "gcm", a, NULL), 1);
    assert_int_equal(it_version_create(s, s->admin_token, "gcm", b, NULL), 2);
    assert_int_equal(it_version_create(s, s->admin_token, "gcm", b, NULL), 3);
    r = it_jreq(s, "POST", "/api/v1/datasets", s->admin_token,
                it_fmt(body, sizeof(body), "{\"digest\":\"%s\",\"name\":\"gc-data\"}", c));
    it_expect_status(s, r, 201);
    it_resp_free(s, &r);

    /* Nothing to collect while everything is held. */
    rep = gc(s, true);
    assert_int_equal(json_integer_value(json_object_get(rep, "blobs")), 0);
    json_decref(rep);

    delete_version(s, "gcm", 1);
    delete_version(s, "gcm", 2); /* v3 still holds b */
    rep = gc(s, true);
    assert_int_equal(json_integer_value(json_object_get(rep, "blobs")), 1);
    assert_int_equal(json_integer_value(json_object_get(rep, "bytes")), 3000);
    json_decref(rep);
    assert_true(it_blob_stored(s, a)); /* a dry run removes nothing */

    rep = gc(s, false);
    assert_int_equal(json_integer_value(json_object_get(rep, "blobs")), 1);
    assert_int_equal(json_integer_value(json_object_get(rep, "bytes")), 3000);
    json_decref(rep);
    assert_false(it_blob_stored(s, a));
    assert_true(it_blob_stored(s, b));
    assert_true(it_blob_stored(s, c));
    expect_artifact(s, "gcm", 3, b);
    r = it_get(s, "/api/v1/models/gcm/versions/1/artifact", s->admin_token);
    it_expect_error(s, r, 410, "gone");
    it_resp_free(s, &r);
    r = it_get(s, it_fmt(path, sizeof(path), "/api/v1/blobs/%s", a), s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    it_resp_free(s, &r);
    /* The tombstone's record and signature outlive the bytes. */
    r = it_get(s, "/api/v1/models/gcm/versions/1", s->admin_token);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "status"), "deleted");
    it_resp_free(s, &r);
    expect_signature_verifies(s, "gcm", 1);
    assert_int_equal(it_metric(s, "modelgate_gc_reclaimed_bytes_total"), 3000);
    /* What is stored now: b (held by v3) and c (the dataset's). */
    assert_int_equal(it_metric(s, "modelgate_storage_bytes"), 5000 + 700);

    /* A second run finds nothing; both are audited (dry runs are not), the first naming
     * what it removed. */
    rep = gc(s, false);
    assert_int_equal(json_integer_value(json_object_get(rep, "blobs")), 0);
    json_decref(rep);
    r = it_get(s, "/api/v1/audit?limit=1000", s->admin_token);
    {
        json_t *e, *found = NULL;
        size_t i, runs = 0, empty = 0;

        json_array_foreach(it_jarr(r->json, "items"), i, e)
        {
            if (strcmp(it_jstr(e, "action"), "blob.gc") != 0)
                continue;
            runs++;
            if (it_jint(it_jobj(e, "detail"), "bytes") == 3000)
                found = e;
            else if (it_jint(it_jobj(e, "detail"), "blobs") == 0)
                empty++;
        }
        assert_int_equal(runs, 2);
        assert_int_equal(empty, 1);
        assert_non_null(found);
        assert_string_equal(
            json_string_value(json_array_get(it_jarr(it_jobj(found, "detail"), "digests"), 0)), a);
    }
    it_resp_free(s, &r);

    /* A backup holds what is stored: the collected blob's row stays, its bytes are not
     * looked for (embedded installation only: the others back up their own way). */
    if (!it_on_postgres() && strcmp(it_blob_kind(), "file") == 0) {
        char cmd[4 * IT_PATH_MAX], out[IT_PATH_MAX + 16];

        snprintf(out, sizeof(out), "%s/backup.tar", s->root);
        snprintf(cmd, sizeof(cmd), "'%s' backup --data-dir '%s' --out '%s' >/dev/null",
                 getenv("MODELGATED"), s->data_dir, out);
        assert_int_equal(system(cmd), 0);
        assert_true(it_exists(out));
    }

    /* A withdrawn dataset holds its bytes no longer. */
    r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/datasets/%s/withdraw", c),
                s->admin_token, "{\"reason\":\"licence ended\"}");
    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
    rep = gc(s, false);
    assert_int_equal(json_integer_value(json_object_get(rep, "blobs")), 1);
    assert_int_equal(json_integer_value(json_object_get(rep, "bytes")), 700);
    json_decref(rep);
    assert_false(it_blob_stored(s, c));

    /* The same bytes uploaded again are a blob again, and serve a new version. */
    {
        char *bytes = bytes_for("gcm", 1, 3000), again[IT_DIGEST_LEN + 1];

        r = it_upload(s, bytes, 3000, again);
        it_expect_status(s, r, 201);
        it_resp_free(s, &r);
        free(bytes);
        assert_string_equal(again, a);
        assert_true(it_blob_stored(s, a));
        assert_int_equal(it_version_create(s, s->admin_token, "gcm", a, NULL), 4);
        expect_artifact(s, "gcm", 4, a);
    }
    r = it_get(s, "/api/v1/audit/verify", s->admin_token);
    assert_true(json_is_true(json_object_get(r->json, "ok")));
    it_resp_free(s, &r);
    it_server_stop(s);
    it_server_free(&s);
}

#define KNOWN 10
#define FRESH 10
#define COLLECTORS 4

static void test_gc_racing_uploads_loses_nothing(void **state)
{
    /* The grace period is what an upload's answer has to get to the client and the client's
     * version to reference it: generous for a loaded machine, short for the test. */
    static const char *const args[] = {"--gc-grace", "2s", "--gc-interval", "0s", NULL};
    struct mg_server *s = it_server_start(args);
    json_int_t versions = 0;
    int raced = 0, round;
    /* How much later than the collectors the uploads are sent (negative: earlier), moved
     * round by round onto the race's window: where the collector is busy with these very
     * bytes. The window's place depends on the machine and the backend (a collector talks
     * to a remote registry for each blob it removes); CI once saw uploads sent together
     * with the collectors win all 12 rounds. early and late are the offsets known to be
     * too early (every upload found its bytes) and too late (the collector had taken them
     * all); the next offset halves the gap, or steps out (4, 8, 16 ... ms) while one side
     * is not known yet. */
    int offset = 0, step = 4, early = INT_MIN, late = INT_MAX;

    (void)state;
    it_model_create(s, s->admin_token, "race");
    /* At least 3 rounds, and more (up to 20) until the race was seen: a collector held
     * bytes an upload sent again (503), or in one round some collectable bytes sent again
     * were still there (200) while others had been collected first (201). */
    for (round = 0; round < 3 || (!raced && round < 20); round++) {
        int known_kept = 0, known_remade = 0, busy = 0;
        enum { N = KNOWN + FRESH + COLLECTORS };
        struct it_spec specs[N];
        struct it_resp *out[N];
        int start[N];
        char *bufs[KNOWN + FRESH], digests[KNOWN + FRESH][IT_DIGEST_LEN + 1];
        char tag[32];
        int64_t deadline;
        json_t *rep;
        bool old = false;

        snprintf(tag, sizeof(tag), "race-%d", round);
        /* KNOWN blobs nothing holds, older than the grace period: collectable. */
        for (int i = 0; i < KNOWN; i++)
            upload_bytes(s, tag, i, 2048 + (size_t)i, digests[i]);
        deadline = it_deadline(15000);
        while (!old && it_now_ms() < deadline) {
            rep = gc(s, true);
            old = json_integer_value(json_object_get(rep, "blobs")) >= KNOWN;
            json_decref(rep);
            if (!old)
                it_pause_ms(100);
        }
        assert_true(old);
        /* The same bytes again, new bytes, and collectors, offset as above. */
        memset(specs, 0, sizeof(specs));
        for (int i = 0; i < KNOWN + FRESH; i++) {
            size_t size = 2048 + (size_t)i;

            bufs[i] = bytes_for(tag, i, size);
            if (i >= KNOWN)
                it_digest(bufs[i], size, digests[i]);
            specs[i] = (struct it_spec){
                "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", bufs[i], size};
            start[i] = offset > 0 ? offset : 0;
        }
        for (int i = KNOWN + FRESH; i < N; i++) {
            specs[i] = (struct it_spec){
                "POST", "/api/v1/admin/gc?dry_run=false", s->admin_token, NULL, NULL, 0};
            start[i] = offset < 0 ? -offset : 0;
        }
        it_request_parallel_at(s, N, specs, start, out);
        for (int i = 0; i < KNOWN; i++) {
            known_kept += out[i]->status == 200;
            known_remade += out[i]->status == 201;
            busy += out[i]->status == 503;
        }
        for (int i = KNOWN; i < KNOWN + FRESH; i++)
            busy += out[i]->status == 503;
        if (busy > 0 || (known_kept > 0 && known_remade > 0))
            raced++;
        print_message("round %d, uploads %+d ms after the collectors: collectable bytes sent "
                      "again: %d kept, %d made again; %d answered 503\n",
                      round, offset, known_kept, known_remade, busy);
        if (known_kept == KNOWN && busy == 0) {
            early = offset;
            if (late <= early) { /* a loaded machine contradicted an older round: forget it */
                late = INT_MAX;
                step = 4;
            }
        } else if (known_remade == KNOWN && busy == 0) {
            late = offset;
            if (early >= late) {
                early = INT_MIN;
                step = 4;
            }
        }
        if (early != INT_MIN && late != INT_MAX && late - early > 1) {
            offset = early + (late - early) / 2;
        } else if (known_kept == KNOWN && busy == 0) {
            offset += step;
            step *= 2;
        } else if (known_remade == KNOWN && busy == 0) {
            offset -= step;
            step *= 2;
        }
        for (int i = 0; i < KNOWN + FRESH; i++) {
            /* 503: the collector had these very bytes in hand; the client sends them again. */
            for (int tries = 0; out[i]->status == 503 && tries < 50; tries++) {
                it_resp_free(s, &out[i]);
                it_pause_ms(50);
                out[i] = it_request(s, "POST", "/api/v1/blobs", s->admin_token,
                                    "application/octet-stream", bufs[i], specs[i].len);
            }
            if (out[i]->status != 200 && out[i]->status != 201)
                it_expect_status(s, out[i], 201);
            assert_string_equal(it_jstr(out[i]->json, "digest"), digests[i]);
            /* Accepted: the version that uses it finds it. */
            assert_int_equal(it_version_create(s, s->admin_token, "race", digests[i], NULL),
                             ++versions);
            free(bufs[i]);
        }
        for (int i = KNOWN + FRESH; i < N; i++)
            it_expect_status(s, out[i], 200);
        it_release(s);
    }
    if (raced == 0)
        fail_msg("in %d rounds the collectors never overlapped the uploads: the race this test "
                 "is about did not happen",
                 round);
    /* Another collection, then every version's bytes are there and right. */
    json_decref(gc(s, false));
    for (json_int_t v = 1; v <= versions; v++) {
        char path[128];
        struct it_resp *r =
            it_get(s, it_fmt(path, sizeof(path), "/api/v1/models/race/versions/%lld", (long long)v),
                   s->admin_token);
        char digest[IT_DIGEST_LEN + 1];

        snprintf(digest, sizeof(digest), "%s", it_jstr(it_jobj(r->json, "artifact"), "digest"));
        it_resp_free(s, &r);
        if (!it_blob_stored(s, digest))
            fail_msg("version %lld: its blob %s is gone from the backend", (long long)v, digest);
        expect_artifact(s, "race", v, digest);
    }
    it_server_stop(s);
    it_server_free(&s);
}

static void test_gc_killed_mid_sweep(void **state)
{
    struct mg_server *s;
    char garbage[5][IT_DIGEST_LEN + 1], live[3][IT_DIGEST_LEN + 1];
    json_t *rep;

    (void)state;
    setenv("MODELGATED_TEST_CRASH_AT", "gc-marked", 1);
    s = it_server_start(grace0);
    unsetenv("MODELGATED_TEST_CRASH_AT");
    it_model_create(s, s->admin_token, "kill");
    for (int i = 0; i < 5; i++)
        upload_bytes(s, "garbage", i, 1500, garbage[i]);
    for (int i = 0; i < 3; i++) {
        upload_bytes(s, "live", i, 1800, live[i]);
        it_version_create(s, s->admin_token, "kill", live[i], NULL);
    }
    /* The collector dies with the garbage marked and its bytes still there. */
    {
        char req[512], buf[256];
        int fd = it_connect(s->port), status = 0;
        ssize_t got;

        snprintf(req, sizeof(req),
                 "POST /api/v1/admin/gc?dry_run=false HTTP/1.1\r\nHost: x\r\nAuthorization: "
                 "Bearer %s\r\nContent-Length: 0\r\n\r\n",
                 s->admin_token);
        assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
        got = recv(fd, buf, sizeof(buf), 0); /* blocks until the process is gone */
        assert_true(got <= 0);
        close(fd);
        waitpid(s->pid, &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 86);
        s->pid = 0;
    }
    it_server_restart(s);
    /* The marked blobs are neither served nor uploadable as "already stored" meanwhile. */
    for (int i = 0; i < 3; i++)
        expect_artifact(s, "kill", i + 1, live[i]);
    rep = gc(s, false);
    assert_int_equal(json_integer_value(json_object_get(rep, "blobs")), 5);
    assert_int_equal(json_integer_value(json_object_get(rep, "bytes")), 5 * 1500);
    json_decref(rep);
    for (int i = 0; i < 5; i++)
        assert_false(it_blob_stored(s, garbage[i]));
    for (int i = 0; i < 3; i++) {
        assert_true(it_blob_stored(s, live[i]));
        expect_artifact(s, "kill", i + 1, live[i]);
    }
    /* Bytes collected are welcome again. */
    upload_bytes(s, "garbage", 0, 1500, garbage[0]);
    assert_true(it_blob_stored(s, garbage[0]));
    it_server_stop(s);
    it_server_free(&s);
}

/* The collector also runs on its own every --gc-interval (here 1 s), first one interval after
 * the installation started, each run audited with what it removed. */
static void test_gc_runs_on_schedule(void **state)
{
    static const char *const args[] = {"--gc-grace", "0s", "--gc-interval", "1s", NULL};
    struct mg_server *s = it_server_start(args);
    char a[IT_DIGEST_LEN + 1];
    int64_t deadline = it_deadline(30000);
    struct it_resp *r;
    bool gone = false, audited = false;

    (void)state;
    it_model_create(s, s->admin_token, "sched");
    upload_bytes(s, "sched", 1, 1200, a);
    assert_int_equal(it_version_create(s, s->admin_token, "sched", a, NULL), 1);
    delete_version(s, "sched", 1);
    while (!(gone && audited) && it_now_ms() < deadline) {
        json_t *e;
        size_t i;

        gone = !it_blob_stored(s, a);
        r = it_get(s, "/api/v1/audit?limit=1000", s->admin_token);
        it_expect_status(s, r, 200);
        json_array_foreach(it_jarr(r->json, "items"), i, e)
        {
            if (strcmp(it_jstr(e, "action"), "blob.gc") == 0 &&
                strcmp(it_jstr(e, "actor"), "modelgated") == 0 &&
                it_jint(it_jobj(e, "detail"), "bytes") == 1200)
                audited = true;
        }
        it_resp_free(s, &r);
        if (!(gone && audited))
            it_pause_ms(100);
    }
    assert_true(gone);
    assert_true(audited);
    it_server_stop(s);
    it_server_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_gc_reclaims_what_nothing_holds, it_test_teardown),
        cmocka_unit_test_teardown(test_gc_racing_uploads_loses_nothing, it_test_teardown),
        cmocka_unit_test_teardown(test_gc_killed_mid_sweep, it_test_teardown),
        cmocka_unit_test_teardown(test_gc_runs_on_schedule, it_test_teardown),
    };

    return it_main_result(
        cmocka_run_group_tests_name("integration_gc", tests, it_group_setup, it_group_teardown));
}
