/*
 * test_scan.c - the artifact safety scan through the real daemon (docs/contract.md "Artifact safety
 * scan"): the report an upload gets, its copy in versions, the scan gate of a policy,
 * `modelgate pull` refusing what is not clean, a rescan after --scan-allow changes (admin
 * only, audited), modelgate_scan_findings_total, and the background rescan of blobs stored
 * before the scanner.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "sys.h"
#include "base/util.h"

/* A data-only pickle ({'a': 1}), one that calls os.system, one importing a project class. */
static const char clean_pk[] = "\x80\x02}q\x00X\x01\x00\x00\x00"
                               "aq\x01K\x01s.";
static const char evil_pk[] = "cos\nsystem\n(S'echo pwned'\ntR.";
static const char custom_pk[] = "\x80\x02\x63mypkg.config\nConfig\n)\x81}b.";

static json_t *upload(struct mg_server *s, const void *data, size_t n, char digest[])
{
    struct it_resp *r = it_upload(s, data, n, digest);
    json_t *scan;

    it_expect_status_not(r, 400, 500);
    scan = json_incref(it_jobj(r->json, "scan"));
    assert_string_equal(it_jstr(scan, "scanner"), "modelgate-scan/1");
    it_resp_free(s, &r);
    return scan;
}

static void version(struct mg_server *s, const char *digest)
{
    char body[200];
    struct it_resp *r = it_jreq(s, "POST", "/api/v1/models/m/versions", s->admin_token,
                                it_fmt(body, sizeof(body), "{\"artifact\":\"%s\"}", digest));
    it_expect_status(s, r, 201);
    it_resp_free(s, &r);
}

/* The scan gate of version n under the production policy: its status; detail into out. */
static const char *scan_gate(struct mg_server *s, int n, char *detail, size_t cap)
{
    static char status[32];
    char path[200];
    struct it_resp *r = it_get(
        s, it_fmt(path, sizeof(path), "/api/v1/models/m/versions/%d/gates?alias=production", n),
        s->admin_token);
    json_t *g;
    size_t i;

    it_expect_status(s, r, 200);
    status[0] = '\0';
    json_array_foreach(it_jarr(r->json, "gates"), i, g)
    {
        if (strcmp(it_jstr(g, "kind"), "scan") == 0) {
            snprintf(status, sizeof(status), "%s", it_jstr(g, "status"));
            snprintf(detail, cap, "%s",
                     json_string_value(json_object_get(g, "detail"))
                         ? json_string_value(json_object_get(g, "detail"))
                         : "");
        }
    }
    it_resp_free(s, &r);
    if (status[0] == '\0')
        fail_msg("version %d's gate report has no scan gate", n);
    return status;
}

static int pull(struct mg_server *s, int n, const char *dir, bool allow)
{
    char cmd[4096];
    int rc = system(it_fmt(cmd, sizeof(cmd),
                           "MODELGATE_URL=%s MODELGATE_TOKEN=%s XDG_CONFIG_HOME=%s %s pull m %d "
                           "-o %s %s >/dev/null 2>%s/pull.err",
                           s->base_url, s->admin_token, s->root, getenv("MODELGATE_CLI"), n, dir,
                           allow ? "--allow-unsafe" : "", s->root));
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* GET /v2/m/referrers/<manifest of tag>: the scan referrer, its manifest (subject: the
 * version's manifest) and its report blob, whose verdict is `verdict`. */
static void oci_report(struct mg_server *s, const char *tag, const char *verdict)
{
    char pair[200], hdr[400], path[400], mdig[IT_DIGEST_LEN + 1], got[IT_DIGEST_LEN + 1];
    const char *h[2] = {hdr, NULL}, *rd, *ld;
    char *b64;
    struct it_resp *r;
    json_t *index, *desc = NULL, *d, *m, *report;
    size_t i;

    snprintf(pair, sizeof(pair), "anyone:%s", s->admin_token);
    b64 = mg_base64_encode((const uint8_t *)pair, strlen(pair));
    snprintf(hdr, sizeof(hdr), "Authorization: Basic %s", b64);
    free(b64);
    r = it_request_h(s, "GET", it_fmt(path, sizeof(path), "/v2/m/manifests/%s", tag), NULL, NULL,
                     NULL, 0, h);
    it_expect_status(s, r, 200);
    it_digest(r->body, r->len, mdig);
    it_resp_free(s, &r);
    r = it_request_h(
        s, "GET",
        it_fmt(path, sizeof(path),
               "/v2/m/referrers/%s?artifactType=application/vnd.modelgate.scan.v1%%2Bjson", mdig),
        NULL, NULL, NULL, 0, h);
    it_expect_status(s, r, 200);
    index = json_loadb(r->body, r->len, 0, NULL);
    it_resp_free(s, &r);
    json_array_foreach(json_object_get(index, "manifests"), i, d)
    {
        assert_string_equal(json_string_value(json_object_get(d, "artifactType")),
                            "application/vnd.modelgate.scan.v1+json");
        desc = d;
    }
    assert_non_null(desc);
    assert_int_equal(json_array_size(json_object_get(index, "manifests")), 1);
    rd = json_string_value(json_object_get(desc, "digest"));
    r = it_request_h(s, "GET", it_fmt(path, sizeof(path), "/v2/m/manifests/%s", rd), NULL, NULL,
                     NULL, 0, h);
    it_expect_status(s, r, 200);
    it_digest(r->body, r->len, got);
    assert_string_equal(got, rd);
    m = json_loadb(r->body, r->len, 0, NULL);
    it_resp_free(s, &r);
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "subject"), "digest")),
                        mdig);
    ld = json_string_value(
        json_object_get(json_array_get(json_object_get(m, "layers"), 0), "digest"));
    r = it_request_h(s, "GET", it_fmt(path, sizeof(path), "/v2/m/blobs/%s", ld), NULL, NULL, NULL,
                     0, h);
    it_expect_status(s, r, 200);
    it_digest(r->body, r->len, got);
    assert_string_equal(got, ld);
    report = json_loadb(r->body, r->len, 0, NULL);
    it_resp_free(s, &r);
    assert_string_equal(json_string_value(json_object_get(report, "verdict")), verdict);
    json_decref(report);
    json_decref(m);
    json_decref(index);
}

static void test_scan_end_to_end(void **state)
{
    struct mg_server *s;
    char clean_d[IT_DIGEST_LEN + 1], evil_d[IT_DIGEST_LEN + 1], custom_d[IT_DIGEST_LEN + 1];
    char path[IT_PATH_MAX + 64], detail[1024], *reader, *err_text;
    struct it_resp *r;
    json_t *scan, *f;
    struct stat sb;
    size_t len, i;
    bool audited = false;

    (void)state;
    s = it_server_start(NULL);
    scan = upload(s, clean_pk, sizeof(clean_pk) - 1, clean_d);
    assert_string_equal(it_jstr(scan, "verdict"), "clean");
    json_decref(scan);
    scan = upload(s, evil_pk, sizeof(evil_pk) - 1, evil_d);
    assert_string_equal(it_jstr(scan, "verdict"), "unsafe");
    f = json_array_get(it_jarr(scan, "findings"), 0);
    assert_string_equal(it_jstr(f, "rule"), "pickle-import");
    assert_string_equal(it_jstr(f, "severity"), "high");
    assert_non_null(strstr(it_jstr(f, "detail"), "os.system"));
    json_decref(scan);
    scan = upload(s, custom_pk, sizeof(custom_pk) - 1, custom_d);
    assert_string_equal(it_jstr(scan, "verdict"), "unsafe");
    json_decref(scan);
    assert_true(it_metric(s, "modelgate_scan_findings_total{rule=\"pickle-import\"}") >= 2);

    /* versions carry the report; the client cannot supply its own */
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"m\"}");
    it_expect_status(s, r, 201);
    it_resp_free(s, &r);
    version(s, clean_d);
    version(s, evil_d);
    version(s, custom_d);
    r = it_jreq(s, "POST", "/api/v1/models/m/versions", s->admin_token,
                it_fmt(detail, sizeof(detail),
                       "{\"artifact\":\"%s\",\"scan\":{\"verdict\":\"clean\"}}", evil_d));
    it_expect_status(s, r, 400);
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/models/m/versions/2", s->admin_token);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "scan"), "verdict"), "unsafe");
    it_resp_free(s, &r);

    /* the scan gate passes only on clean */
    r = it_jreq(s, "PUT", "/api/v1/models/m/policies/production", s->admin_token,
                "{\"scan\":{\"required\":true}}");
    it_expect_status(s, r, 200);
    assert_true(json_is_true(json_object_get(it_jobj(r->json, "scan"), "required")));
    it_resp_free(s, &r);
    assert_string_equal(scan_gate(s, 1, detail, sizeof(detail)), "passed");
    assert_string_equal(scan_gate(s, 2, detail, sizeof(detail)), "failed");
    assert_non_null(strstr(detail, "os.system"));
    assert_string_equal(scan_gate(s, 3, detail, sizeof(detail)), "failed");

    /* pull: clean yes; unsafe only with --allow-unsafe, and nothing lands before that */
    assert_int_equal(pull(s, 1, it_fmt(path, sizeof(path), "%s/p1", s->root), false), 0);
    assert_int_not_equal(pull(s, 2, it_fmt(path, sizeof(path), "%s/p2", s->root), false), 0);
    assert_int_not_equal(stat(path, &sb), 0);
    err_text = it_read_file(it_fmt(detail, sizeof(detail), "%s/pull.err", s->root), &len);
    assert_non_null(strstr(err_text, "--allow-unsafe"));
    assert_non_null(strstr(err_text, "unsafe"));
    free(err_text);
    assert_int_equal(pull(s, 2, path, true), 0);
    assert_int_equal(stat(path, &sb), 0);

    /* /v2/: the report is a referrer of the version's manifest */
    oci_report(s, "v2", "unsafe");

    /* rescan: admin only; after --scan-allow the project's class is clean, versions too */
    reader = it_token_create(s, "reader", "reader", NULL);
    r = it_request(s, "POST", it_fmt(path, sizeof(path), "/api/v1/blobs/%s/rescan", custom_d),
                   reader, NULL, NULL, 0);
    it_expect_status(s, r, 403);
    it_resp_free(s, &r);
    it_server_stop(s);
    for (i = 0; s->args[i] != NULL; i++)
        ;
    assert_true(i + 2 < IT_MAX_ARGS);
    s->args[i] = strdup("--scan-allow");
    s->args[i + 1] = strdup("mypkg.config.Config");
    s->args[i + 2] = NULL;
    it_server_restart(s);
    r = it_request(s, "POST", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "scan"), "verdict"), "clean");
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/models/m/versions/3", s->admin_token);
    assert_string_equal(it_jstr(it_jobj(r->json, "scan"), "verdict"), "clean");
    it_resp_free(s, &r);
    assert_string_equal(scan_gate(s, 3, detail, sizeof(detail)), "passed");
    oci_report(s, "v3", "clean"); /* the referrer follows the rescan */
    r = it_request(s, "POST", it_fmt(path, sizeof(path), "/api/v1/blobs/%s/rescan", evil_d),
                   s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "scan"), "verdict"), "unsafe");
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/audit?limit=100", s->admin_token);
    it_expect_status(s, r, 200);
    json_array_foreach(it_jarr(r->json, "items"), i, f)
    {
        const char *a = json_string_value(json_object_get(f, "action"));
        audited = audited || (a && strcmp(a, "blob.rescan") == 0);
    }
    it_resp_free(s, &r);
    assert_true(audited);
    free(reader);
    it_server_free(&s);
}

/* A real torch.save state dict, built by Debian's python3-torch, passes the gate. */
static void test_torch_checkpoint_clean(void **state)
{
    struct mg_server *s;
    char file[IT_PATH_MAX + 64], cmd[8192], d[IT_DIGEST_LEN + 1];
    char *data;
    size_t len;
    json_t *scan;

    (void)state;
    s = it_server_start(NULL);
    it_fmt(file, sizeof(file), "%s/sd.pt", s->root);
    if (system(it_fmt(cmd, sizeof(cmd),
                      "/usr/bin/python3 -c 'import sys, torch; torch.save("
                      "torch.nn.Linear(4, 2).state_dict(), sys.argv[1])' %s",
                      file)) != 0)
        fail_msg("python3-torch could not write a checkpoint (scripts/install-deps.sh)");
    data = it_read_file(file, &len);
    scan = upload(s, data, len, d);
    assert_string_equal(it_jstr(scan, "verdict"), "clean");
    assert_int_equal(json_array_size(it_jarr(scan, "findings")), 0);
    json_decref(scan);
    free(data);
    /* the same checkpoint in a tarball: a zip inside an archive, read through a scratch file
     * in the data directory */
    if (system(it_fmt(cmd, sizeof(cmd), "tar -C %s -cf %s/model.tar sd.pt", s->root, s->root)) != 0)
        fail_msg("tar failed");
    data = it_read_file(it_fmt(file, sizeof(file), "%s/model.tar", s->root), &len);
    scan = upload(s, data, len, d);
    assert_string_equal(it_jstr(scan, "verdict"), "clean");
    json_decref(scan);
    free(data);
    it_server_free(&s);
}

/*
 * Blobs stored before the scanner (migration 018) have no report: the gate fails them and
 * pull refuses them. After the upgrade the leader scans them in the background: every blob
 * gets the report an upload would have given it (the malicious one unsafe, not waved
 * through), copied into its versions, audited as the daemon's own rescan; the gauge of
 * unscanned blobs drops to 0.
 */
static void test_scan_backfill(void **state)
{
    struct mg_server *s;
    char clean_d[IT_DIGEST_LEN + 1], evil_d[IT_DIGEST_LEN + 1], path[IT_PATH_MAX + 64];
    char detail[1024];
    struct it_resp *r;
    json_t *scan, *e;
    unsigned long long unscanned;
    int64_t deadline;
    size_t i;
    int audited = 0;

    (void)state;
    s = it_server_start(NULL);
    json_decref(upload(s, clean_pk, sizeof(clean_pk) - 1, clean_d));
    json_decref(upload(s, evil_pk, sizeof(evil_pk) - 1, evil_d));
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"m\"}");
    it_expect_status(s, r, 201);
    it_resp_free(s, &r);
    version(s, clean_d);
    version(s, evil_d);
    r = it_jreq(s, "PUT", "/api/v1/models/m/policies/production", s->admin_token,
                "{\"scan\":{\"required\":true}}");
    it_expect_status(s, r, 200);
    it_resp_free(s, &r);

    /* What a database from before the scanner holds: no reports at all. */
    it_server_stop(s);
    assert_int_equal(it_sql_exec(s, "UPDATE blobs SET scan = NULL"), 2);
    assert_int_equal(it_sql_exec(s, "UPDATE versions SET scan = NULL"), 2);
    it_server_restart(s);

    deadline = it_deadline(60000);
    while ((unscanned = it_metric(s, "modelgate_scan_unscanned_blobs")) > 0 &&
           it_now_ms() < deadline)
        it_pause_ms(100);
    assert_int_equal(unscanned, 0);

    r = it_get(s, "/api/v1/models/m/versions/1", s->admin_token);
    it_expect_status(s, r, 200);
    scan = it_jobj(r->json, "scan");
    assert_string_equal(it_jstr(scan, "verdict"), "clean");
    assert_string_equal(it_jstr(scan, "scanner"), "modelgate-scan/1");
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/models/m/versions/2", s->admin_token);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "scan"), "verdict"), "unsafe");
    it_resp_free(s, &r);
    assert_string_equal(scan_gate(s, 1, detail, sizeof(detail)), "passed");
    assert_string_equal(scan_gate(s, 2, detail, sizeof(detail)), "failed");
    assert_non_null(strstr(detail, "os.system"));
    assert_int_equal(pull(s, 1, it_fmt(path, sizeof(path), "%s/p1", s->root), false), 0);
    assert_int_not_equal(pull(s, 2, it_fmt(path, sizeof(path), "%s/p2", s->root), false), 0);

    r = it_get(s, "/api/v1/audit?limit=1000", s->admin_token);
    it_expect_status(s, r, 200);
    json_array_foreach(it_jarr(r->json, "items"), i, e)
    {
        if (strcmp(it_jstr(e, "action"), "blob.rescan") == 0 &&
            strcmp(it_jstr(e, "actor"), "modelgated") == 0 &&
            (strcmp(it_jstr(e, "target"), clean_d) == 0 ||
             strcmp(it_jstr(e, "target"), evil_d) == 0))
            audited++;
    }
    it_resp_free(s, &r);
    assert_int_equal(audited, 2);
    it_server_free(&s);
}

/* bench/scan.sh's reference (MODELGATED_TEST_SCAN=skip) fails closed: nothing is read and
 * every upload is "unknown", never clean. */
static void test_scan_skip_is_never_clean(void **state)
{
    struct mg_server *s;
    char d[IT_DIGEST_LEN + 1];
    json_t *scan;

    (void)state;
    assert_int_equal(setenv("MODELGATED_TEST_SCAN", "skip", 1), 0);
    s = it_server_start(NULL);
    assert_int_equal(unsetenv("MODELGATED_TEST_SCAN"), 0);
    scan = upload(s, clean_pk, sizeof(clean_pk) - 1, d);
    assert_string_equal(it_jstr(scan, "verdict"), "unknown");
    json_decref(scan);
    it_server_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_scan_end_to_end, it_test_teardown),
        cmocka_unit_test_teardown(test_torch_checkpoint_clean, it_test_teardown),
        cmocka_unit_test_teardown(test_scan_backfill, it_test_teardown),
        cmocka_unit_test_teardown(test_scan_skip_is_never_clean, it_test_teardown),
    };
    return it_main_result(cmocka_run_group_tests(tests, it_group_setup, it_group_teardown));
}
