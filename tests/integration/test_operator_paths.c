/*
 * test_operator_paths.c - what an operator following the README meets (M22, "Operator
 * friction"), on the real daemon:
 *
 *   - numbers in replies and error messages are the shortest text that reads back as the
 *     same double ("0.942", never "0.94199999999999995");
 *   - repeated filters (?metric=…&metric=…, ?tag=…&tag=…) all apply;
 *   - after a signing-key rotation, /signing-keys names each key's bundle hint and only the
 *     key that signs now is active: an old version's bundle finds its key by its hint;
 *   - GET /audit?order=desc is newest first, and its pages continue that way;
 *   - GET /cluster says which replica leads;
 *   - the start log says where the UI is.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static struct mg_server *S(void **state)
{
    return *state;
}

/* Replies and messages: "0.942", never 17 digits. */
static void test_numbers_shortest(void **state)
{
    struct mg_server *s = S(state);
    struct it_resp *r;
    char art[IT_DIGEST_LEN + 1];

    it_upload(s, "numbers model", 13, art);
    it_model_create(s, s->admin_token, "numbers");
    it_version_create(
        s, s->admin_token, "numbers", art,
        json_pack("{s:{s:f, s:f, s:f}}", "metrics", "auc", 0.942, "p", 0.1, "third", 0.1 + 0.2));
    r = it_get(s, "/api/v1/models/numbers/versions/1", s->admin_token);
    it_expect_status(s, r, 200);
    print_message("version: %.300s\n", r->body);
    assert_non_null(strstr(r->body, "\"auc\":0.942"));
    assert_non_null(strstr(r->body, "\"p\":0.1"));
    assert_non_null(strstr(r->body, "0.30000000000000004")); /* 17 digits where it takes 17 */
    assert_null(strstr(r->body, "0.94199999999999995"));
    assert_null(strstr(r->body, "0.10000000000000001"));
    assert_true(it_jnum(it_jobj(r->json, "metrics"), "auc") == 0.942);
    it_resp_free(s, &r);

    /* The list, and an error message naming the value. */
    r = it_get(s, "/api/v1/models/numbers/versions", s->admin_token);
    it_expect_status(s, r, 200);
    assert_non_null(strstr(r->body, "\"auc\":0.942"));
    it_resp_free(s, &r);
    r = it_jreq(s, "POST", "/api/v1/models/numbers/versions/1/metrics", s->admin_token,
                "{\"metrics\":{\"auc\":0.95}}");
    it_expect_error(s, r, 409, "conflict");
    print_message("conflict: %s\n", r->body);
    assert_non_null(strstr(r->body, "already has the value 0.942;"));
    it_resp_free(s, &r);
}

/* ?metric=&metric= and ?tag=&tag=: every one applies. */
static void test_repeated_filters(void **state)
{
    struct mg_server *s = S(state);
    struct it_resp *r;
    char art[IT_DIGEST_LEN + 1];
    static const struct {
        const char *query;
        const char *want; /* version numbers, newest first */
    } cases[] = {
        {"metric=auc%3E%3D0.9", "3 2"},
        {"metric=auc%3E%3D0.9&metric=p95_ms%3C50", "3"},
        {"metric=p95_ms%3C50&metric=auc%3E%3D0.9", "3"}, /* order does not matter */
        {"metric=auc%3E%3D0.9&metric=p95_ms%3C50&metric=auc%3C0.9", ""},
        {"tag=team:risk", "3 2 1"},
        {"tag=team:risk&tag=stage:prod", "3 1"},
        {"tag=stage:prod&tag=team:risk&metric=auc%3E%3D0.9", "3"},
        {"tag=team:risk&tag=team:fraud", ""},
    };

    it_upload(s, "filters model", 13, art);
    it_model_create(s, s->admin_token, "filters");
    it_version_create(s, s->admin_token, "filters", art,
                      json_pack("{s:{s:f, s:f}, s:{s:s, s:s}}", "metrics", "auc", 0.8, "p95_ms",
                                40.0, "tags", "team", "risk", "stage", "prod"));
    it_version_create(s, s->admin_token, "filters", art,
                      json_pack("{s:{s:f, s:f}, s:{s:s, s:s}}", "metrics", "auc", 0.95, "p95_ms",
                                80.0, "tags", "team", "risk", "stage", "dev"));
    it_version_create(s, s->admin_token, "filters", art,
                      json_pack("{s:{s:f, s:f}, s:{s:s, s:s}}", "metrics", "auc", 0.93, "p95_ms",
                                30.0, "tags", "team", "risk", "stage", "prod"));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[256], got[64] = "";
        json_t *v;
        size_t j;

        r = it_get(s,
                   it_fmt(path, sizeof(path), "/api/v1/models/filters/versions?%s", cases[i].query),
                   s->admin_token);
        it_expect_status(s, r, 200);
        json_array_foreach(json_object_get(r->json, "items"), j, v)
        {
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%lld", j ? " " : "",
                     (long long)json_integer_value(json_object_get(v, "version")));
        }
        print_message("?%s -> [%s]\n", cases[i].query, got);
        assert_string_equal(got, cases[i].want);
        it_resp_free(s, &r);
    }
    /* More than the server applies at once: refused, not cut. */
    r = it_get(s, "/api/v1/models/filters/versions?tag=a:1&tag=a:2&tag=a:3&tag=a:4&tag=a:5",
               s->admin_token);
    it_expect_error_field(s, r, 400, "invalid_argument", "tag");
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/models/filters/versions?metric=auc%3E0&metric=bad", s->admin_token);
    it_expect_error_field(s, r, 400, "invalid_argument", "metric");
    it_resp_free(s, &r);
}

/* The hint of version n's bundle, into out. */
static void bundle_hint(struct mg_server *s, const char *model, int n, char out[65])
{
    char path[128];
    struct it_resp *r =
        it_get(s, it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%d/signature", model, n),
               s->admin_token);
    json_t *pk;

    it_expect_status(s, r, 200);
    pk = json_object_get(json_object_get(r->json, "verificationMaterial"), "publicKey");
    snprintf(out, 65, "%s", it_jstr(pk, "hint"));
    it_resp_free(s, &r);
}

/* `modelgated keys rotate` on s's data directory (and database); the new key's id. */
static void rotate(struct mg_server *s, char keyid[65])
{
    char cmd[IT_PATH_MAX * 3];
    FILE *p;
    int status;

    it_fmt(cmd, sizeof(cmd), "'%s' keys rotate --data-dir '%s'%s%s%s 2>/dev/null",
           getenv("MODELGATED"), s->data_dir, s->database[0] ? " --database '" : "", s->database,
           s->database[0] ? "'" : "");
    if ((p = popen(cmd, "r")) == NULL)
        fail_msg("popen %s: %s", cmd, strerror(errno));
    if (fgets(keyid, 65, p) == NULL)
        keyid[0] = '\0';
    keyid[strcspn(keyid, "\n")] = '\0';
    status = pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || strlen(keyid) != 64)
        fail_msg("keys rotate failed (status %d), printed '%s'", status, keyid);
}

/* The active keys of GET /signing-keys: how many, and the last one's keyid. */
static int active_keys(struct mg_server *s, char keyid[65], size_t *nkeys)
{
    struct it_resp *r = it_get(s, "/api/v1/signing-keys", NULL);
    json_t *k;
    size_t i;
    int n = 0;

    it_expect_status(s, r, 200);
    *nkeys = json_array_size(json_object_get(r->json, "items"));
    json_array_foreach(json_object_get(r->json, "items"), i, k)
    {
        if (json_is_true(json_object_get(k, "active"))) {
            snprintf(keyid, 65, "%s", it_jstr(k, "keyid"));
            n++;
        }
    }
    it_resp_free(s, &r);
    return n;
}

/* After a rotation: every key carries its hint, one is active, the old bundle's hint names
 * the old key (the README's verification snippet selects by it). */
static void test_signing_keys_after_rotation(void **state)
{
    struct mg_server *s = it_server_start(NULL);
    char art[IT_DIGEST_LEN + 1], old_hint[65], new_hint[65], new_key[65], active[65] = "";
    struct it_resp *r;
    size_t nkeys = 0;
    json_t *k;
    size_t i;
    int found_old = 0, found_new = 0;
    int64_t deadline;

    (void)state;
    it_upload(s, "keys model", 10, art);
    it_model_create(s, s->admin_token, "keys");
    it_version_create(s, s->admin_token, "keys", art, NULL);
    bundle_hint(s, "keys", 1, old_hint);
    if (it_on_postgres()) {
        rotate(s, new_key); /* the running server follows within seconds */
    } else {
        it_server_stop(s);
        rotate(s, new_key);
        it_server_restart(s);
    }
    deadline = it_deadline(20000);
    while (active_keys(s, active, &nkeys) != 1 || strcmp(active, new_key) != 0) {
        if (it_now_ms() > deadline)
            fail_msg("20 s after the rotation the active key is %s (want %s only)", active,
                     new_key);
        it_pause_ms(50);
    }
    assert_int_equal(nkeys, 2);
    it_version_create(s, s->admin_token, "keys", art, NULL);
    bundle_hint(s, "keys", 2, new_hint);
    assert_string_not_equal(old_hint, new_hint);

    r = it_get(s, "/api/v1/signing-keys", NULL);
    it_expect_status(s, r, 200);
    json_array_foreach(json_object_get(r->json, "items"), i, k)
    {
        const char *hint = it_jstr(k, "hint");
        bool is_active = json_is_true(json_object_get(k, "active"));

        assert_int_equal(strlen(hint), 64);
        assert_string_not_equal(hint, it_jstr(k, "keyid")); /* two different hashes */
        if (strcmp(hint, old_hint) == 0) {
            found_old++;
            assert_false(is_active);
        }
        if (strcmp(hint, new_hint) == 0) {
            found_new++;
            assert_true(is_active);
            assert_string_equal(it_jstr(k, "keyid"), new_key);
        }
    }
    assert_int_equal(found_old, 1);
    assert_int_equal(found_new, 1);
    it_resp_free(s, &r);
    it_server_stop(s);
    it_server_free(&s);
}

/* ?order=desc: newest first; its page token continues downwards to the first entry. */
static void test_audit_newest_first(void **state)
{
    struct mg_server *s = S(state);
    struct it_resp *r;
    char path[160], token[64] = "";
    json_int_t last = 0, newest = 0, seen = 0;

    it_model_create(s, s->admin_token, "audit-a");
    it_model_create(s, s->admin_token, "audit-b");
    it_model_create(s, s->admin_token, "audit-c");
    for (;;) {
        json_t *e;
        size_t i;

        r = it_get(s,
                   it_fmt(path, sizeof(path), "/api/v1/audit?order=desc&limit=2%s%s",
                          token[0] ? "&page_token=" : "", token),
                   s->admin_token);
        it_expect_status(s, r, 200);
        json_array_foreach(json_object_get(r->json, "items"), i, e)
        {
            json_int_t seq = it_jint(e, "seq");

            if (newest == 0) {
                newest = seq;
                assert_string_equal(it_jstr(e, "target"), "audit-c"); /* the newest entry */
            } else {
                assert_true(seq == last - 1); /* strictly newest first, nothing skipped */
            }
            last = seq;
            seen++;
        }
        if (!json_is_string(json_object_get(r->json, "next_page_token"))) {
            it_resp_free(s, &r);
            break;
        }
        snprintf(token, sizeof(token), "%s", it_jstr(r->json, "next_page_token"));
        it_resp_free(s, &r);
    }
    assert_int_equal(last, 1);
    assert_int_equal(seen, newest);

    /* asc stays the default; a wrong order is refused. */
    r = it_get(s, "/api/v1/audit?limit=1", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(json_array_get(json_object_get(r->json, "items"), 0), "seq"), 1);
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/audit?order=newest", s->admin_token);
    it_expect_error_field(s, r, 400, "invalid_argument", "order");
    it_resp_free(s, &r);
}

/* Every replica says whether it leads; one does (this one, alone). */
static void test_cluster_leader(void **state)
{
    struct mg_server *s = S(state);
    struct it_resp *r;
    int64_t deadline = it_deadline(20000);

    for (;;) {
        json_t *rep;
        size_t i;
        int leaders = 0, self_leads = 0;

        r = it_get(s, "/api/v1/cluster", s->admin_token);
        it_expect_status(s, r, 200);
        json_array_foreach(it_jarr(r->json, "replicas"), i, rep)
        {
            json_t *l = json_object_get(rep, "leader");

            assert_true(json_is_boolean(l));
            leaders += json_is_true(l);
            self_leads += json_is_true(l) && json_is_true(json_object_get(rep, "self"));
        }
        if (leaders == 1 && self_leads == 1 && json_is_true(json_object_get(r->json, "leader"))) {
            it_resp_free(s, &r);
            break;
        }
        if (it_now_ms() > deadline)
            fail_msg("no single leader in %s", r->body);
        it_resp_free(s, &r);
        it_pause_ms(50);
    }
}

/* Each request's line reaches the log while the server runs, in order: lines are written
 * in batches (http/reqlog.h), and the last batch must not wait for more requests or a stop. */
static void test_request_lines_reach_the_log(void **state)
{
    struct mg_server *s = S(state);
    int64_t deadline;
    char path[96], want[128];
    int i = 0, tag = (int)getpid(), lines = 40;

    for (i = 0; i < lines; i++) {
        struct it_resp *r;

        it_fmt(path, sizeof(path), "/api/v1/models/logline-%d-%d", tag, i);
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 404);
        it_resp_free(s, &r);
    }
    deadline = it_now_ms() + it_scaled_ms(10000);
    for (;;) {
        char *log = it_read_file(s->log_path, NULL);
        const char *p = log;

        for (i = 0; p != NULL && i < lines; i++) {
            it_fmt(want, sizeof(want), " GET /api/v1/models/logline-%d-%d 404 ", tag, i);
            if ((p = strstr(p, want)) != NULL)
                p += strlen(want);
        }
        if (p != NULL) {
            /* The last one whole: "<ts> GET <path> 404 <bytes>B <ms>.0ms token=<name>". */
            const char *start = p - strlen(want);
            unsigned long long bytes = 0, ms = 0;
            char ts[40] = "", tenth[4] = "", who[64] = "", end = 0;

            while (start > log && start[-1] != '\n')
                start--;
            if (sscanf(start,
                       "%39s GET /api/v1/models/logline-%*d-%*d 404 %lluB %llu.%1[0]ms "
                       "token=%63s%c",
                       ts, &bytes, &ms, tenth, who, &end) != 6 ||
                end != '\n' || strcmp(who, "admin") != 0 || bytes == 0 || !strchr(ts, 'T'))
                fail_msg("a request line of another shape: %.200s", start);
            free(log);
            break;
        }
        free(log);
        if (it_now_ms() > deadline)
            fail_msg("the log has no line for request %d of %d (or not in order)", i, lines);
        it_pause_ms(20);
    }
}

/* The start log names the UI's URL, and it serves the UI. */
static void test_start_log_names_ui(void **state)
{
    struct mg_server *s = S(state);
    char want[128], *log = it_read_file(s->log_path, NULL);
    struct it_resp *r;

    it_fmt(want, sizeof(want), "the UI is at http://127.0.0.1:%d/", s->port);
    if (strstr(log, want) == NULL)
        fail_msg("the start log does not say '%s':\n%s", want, log);
    free(log);
    r = it_get(s, "/", NULL);
    it_expect_status(s, r, 200);
    assert_non_null(strstr(it_header(r, "Content-Type"), "text/html"));
    it_resp_free(s, &r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_shortest),
        cmocka_unit_test(test_request_lines_reach_the_log),
        cmocka_unit_test(test_repeated_filters),
        cmocka_unit_test(test_signing_keys_after_rotation),
        cmocka_unit_test(test_audit_newest_first),
        cmocka_unit_test(test_cluster_leader),
        cmocka_unit_test(test_start_log_names_ui),
    };

    return it_main_result(cmocka_run_group_tests(tests, it_group_setup, it_group_teardown));
}
