/*
 * test_tenancy.c - M22 "Tenancy: bytes and lineage belong to teams" (docs/contract.md), found by
 * attacking the second release, against the real daemon under --read-scope team:
 *   - a team-scoped token reads bytes (GET/HEAD /blobs, the presigned redirect, /v2/) only
 *     when a model it can read cites them or a token of its teams uploaded them, and cites
 *     only such bytes in a version;
 *   - bytes no live version cites any more answer 410 until uploaded again;
 *   - dataset records belong to teams: another team's record never flags a version;
 *   - page tokens never carry a hidden item's name, and writes to a hidden model are 404;
 *   - an alias-scoped deployer queues smoke tests only of versions its aliases alone route;
 *   - `modelgated backup` never follows a link planted at its temporary file.
 * The whole program runs again on PostgreSQL (pg_integration_test_tenancy) and on the
 * remote blob backends (s3_/oci_integration_test_tenancy).
 */
#include "harness.h"
#include "schema_undo.h"
#include "sys.h"
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct mg_server *srv;
static char *risk_pub, *ads_pub, *ads_read, *risk_read;

static char *token(const char *name, const char *roles, const char *teams, const char *aliases)
{
    char body[512];
    struct it_resp *r;
    char *secret;

    snprintf(body, sizeof(body), "{\"name\":\"%s\",\"roles\":%s%s%s%s%s}", name, roles,
             teams ? ",\"teams\":" : "", teams ? teams : "", aliases ? ",\"aliases\":" : "",
             aliases ? aliases : "");
    r = it_jreq(srv, "POST", "/api/v1/tokens", srv->admin_token, body);
    it_expect_status(srv, r, 201);
    secret = strdup(it_jstr(r->json, "token"));
    it_resp_free(srv, &r);
    return secret;
}

static void call(const char *method, const char *path, const char *tok, const char *body,
                 long status)
{
    struct it_resp *r = it_jreq(srv, method, path, tok, body);

    it_expect_status(srv, r, status);
    it_resp_free(srv, &r);
}

/* POST the bytes as a blob with tok; asserts 200/201. */
static void upload_as(const char *tok, const char *text, char digest[IT_DIGEST_LEN + 1])
{
    struct it_resp *r = it_request(srv, "POST", "/api/v1/blobs", tok, "application/octet-stream",
                                   text, strlen(text));

    if (r->status != 201)
        it_expect_status(srv, r, 200);
    it_digest(text, strlen(text), digest);
    assert_string_equal(it_jstr(r->json, "digest"), digest);
    it_resp_free(srv, &r);
}

static int setup(void **state)
{
    srv = it_server_start((const char *const[]){"--read-scope", "team", NULL});
    call("POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"risk\"}", 201);
    call("POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"ads\"}", 201);
    risk_pub = token("risk-pub", "[\"publisher\"]", "[\"risk\"]", NULL);
    ads_pub = token("ads-pub", "[\"publisher\"]", "[\"ads\"]", NULL);
    risk_read = token("risk-read", "[\"reader\"]", "[\"risk\"]", NULL);
    ads_read = token("ads-read", "[\"reader\"]", "[\"ads\"]", NULL);
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(risk_pub);
    free(ads_pub);
    free(risk_read);
    free(ads_read);
    it_server_free(&srv);
    return 0;
}

/* `modelgated backup --out F` never follows a link planted at F.part (nor at its database
 * snapshot), and F is the owner's alone. */
static void test_backup_refuses_planted_link(void **state)
{
    char out[IT_PATH_MAX], part[IT_PATH_MAX + 8], victim[IT_PATH_MAX], cmd[4 * IT_PATH_MAX];
    struct stat st;
    char *text;

    (void)state;
    if (it_on_postgres() || strcmp(it_blob_kind(), "file") != 0)
        it_not_applicable("the embedded installation's backup (the others back up their own way)");
    it_fmt(out, sizeof(out), "%s/backup.tar", srv->root);
    it_fmt(part, sizeof(part), "%s.part", out);
    it_fmt(victim, sizeof(victim), "%s/victim", srv->root);
    it_write_file(victim, "someone else's file\n");
    chmod(victim, 0644);
    assert_int_equal(symlink(victim, part), 0);
    it_fmt(cmd, sizeof(cmd), "'%s' backup --data-dir '%s' --out '%s' >/dev/null 2>&1",
           getenv("MODELGATED"), srv->data_dir, out);
    (void)system(cmd); /* refusing or replacing the link are both safe; following it is not */
    text = it_read_file(victim, NULL);
    assert_non_null(text);
    assert_string_equal(text, "someone else's file\n");
    free(text);
    assert_int_equal(lstat(victim, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    /* Without a planted link the backup is made, readable by its owner alone. */
    unlink(part);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(lstat(out, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
}

/* Every name and page token a list answers, walking its pages with limit: no hidden
 * item's name or id appears anywhere; the visible ones all appear, once. Returns the
 * cursor_key values seen, joined by ','. */
static void walk(const char *base, const char *tok, const char *key, char *seen, size_t cap)
{
    char path[512], next[300] = "";
    struct it_resp *r;
    json_t *item;
    size_t i, o = 0;

    seen[0] = '\0';
    for (int pages = 0; pages < 20; pages++) {
        char *enc = it_urlencode(next);

        it_fmt(path, sizeof(path), "%s%s%s", base, next[0] ? "&page_token=" : "",
               next[0] ? enc : "");
        free(enc);
        r = it_get(srv, path, tok);
        it_expect_status(srv, r, 200);
        json_array_foreach(it_jarr(r->json, "items"), i, item) o +=
            (size_t)snprintf(seen + o, cap - o, "%s%s", o ? "," : "", it_jstr(item, key));
        if (!json_is_string(json_object_get(r->json, "next_page_token"))) {
            it_resp_free(srv, &r);
            return;
        }
        snprintf(next, sizeof(next), "%s", it_jstr(r->json, "next_page_token"));
        assert_true(strstr(seen, next) != NULL); /* a token is an item already answered */
        it_resp_free(srv, &r);
    }
    fail_msg("%s never ended", base);
}

/* Page tokens of /models and /promotions never carry what the caller cannot see, and a
 * hidden model answers 404 to every route, writes included (not 403 naming its owners). */
static void test_pages_and_writes_hide_other_teams(void **state)
{
    static const char *const models[] = {"pg-a", "pg-b", "pg-c", "pg-d", "pg-e"};
    static const char *const owners[] = {"ads", "risk", "ads", "risk", "ads"};
    char art[IT_DIGEST_LEN + 1], body[256], path[256], seen[2048], hidden[5][64];
    struct it_resp *r;
    char *ads_dep = token("ads-dep", "[\"deployer\"]", "[\"ads\"]", NULL);
    size_t i;

    (void)state;
    upload_as(srv->admin_token, "pages model bytes", art);
    for (i = 0; i < 5; i++) {
        it_fmt(body, sizeof(body), "{\"name\":\"%s\"}", models[i]);
        call("POST", "/api/v1/models", srv->admin_token, body, 201);
        it_fmt(path, sizeof(path), "/api/v1/models/%s/owners", models[i]);
        it_fmt(body, sizeof(body), "{\"teams\":[\"%s\"]}", owners[i]);
        call("PUT", path, srv->admin_token, body, 200);
        it_version_create(srv, srv->admin_token, models[i], art, NULL);
        r = it_promotion_post(srv, srv->admin_token, models[i], 1, "staging");
        it_expect_status(srv, r, 201);
        snprintf(hidden[i], sizeof(hidden[i]), "%s", it_jstr(r->json, "id"));
        it_resp_free(srv, &r);
    }
    for (unsigned limit = 1; limit <= 3; limit++) {
        it_fmt(path, sizeof(path), "/api/v1/models?q=pg-&limit=%u", limit);
        walk(path, ads_read, "name", seen, sizeof(seen));
        assert_string_equal(seen, "pg-a,pg-c,pg-e");
        it_fmt(path, sizeof(path), "/api/v1/promotions?limit=%u", limit);
        walk(path, ads_read, "id", seen, sizeof(seen));
        for (i = 0; i < 5; i++) /* newest first: e, c, a */
            assert_true((strstr(seen, hidden[i]) != NULL) == (strcmp(owners[i], "ads") == 0));
        r = it_get(srv, path, ads_read);
        for (i = 0; i < 5; i++)
            if (strcmp(owners[i], "risk") == 0)
                assert_null(strstr(r->body, hidden[i]));
        it_resp_free(srv, &r);
    }
    /* the raw page would end on pg-b: the token must not name it */
    r = it_get(srv, "/api/v1/models?q=pg-&limit=2", ads_read);
    assert_null(strstr(r->body, "pg-b"));
    it_resp_free(srv, &r);
    /* another team's promotion id is no page token (it would say that it exists) */
    it_fmt(path, sizeof(path), "/api/v1/promotions?page_token=%s", hidden[1]);
    r = it_get(srv, path, ads_read);
    it_expect_error_field(srv, r, 400, "invalid_argument", "page_token");
    it_resp_free(srv, &r);

    /* writes to a hidden model: 404 like a missing one, owners unsaid */
    r = it_jreq(srv, "PATCH", "/api/v1/models/pg-b", ads_pub, "{\"description\":\"x\"}");
    it_expect_error(srv, r, 404, "not_found");
    assert_null(strstr(r->body, "risk"));
    it_resp_free(srv, &r);
    it_fmt(body, sizeof(body), "{\"artifact\":\"%s\"}", art);
    r = it_jreq(srv, "POST", "/api/v1/models/pg-b/versions", ads_pub, body);
    it_expect_error(srv, r, 404, "not_found");
    assert_null(strstr(r->body, "risk"));
    it_resp_free(srv, &r);
    r = it_jreq(srv, "PUT", "/api/v1/models/pg-b/aliases/staging", ads_dep, "{\"version\":1}");
    it_expect_error(srv, r, 404, "not_found");
    assert_null(strstr(r->body, "risk"));
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/promotions", ads_dep,
                "{\"model\":\"pg-b\",\"version\":1,\"alias\":\"canary\"}");
    it_expect_error(srv, r, 404, "not_found");
    assert_null(strstr(r->body, "risk"));
    it_resp_free(srv, &r);
    it_fmt(path, sizeof(path), "/api/v1/promotions/%s/abort", hidden[1]);
    r = it_jreq(srv, "POST", path, ads_dep, "{\"reason\":\"x\"}");
    it_expect_error(srv, r, 404, "not_found");
    it_resp_free(srv, &r);
    free(ads_dep);
}

/* An alias-scoped deployer queues smoke tests only of versions that no alias outside its
 * scope routes. */
static void test_scoped_deployer_smoke_tests(void **state)
{
    char art[IT_DIGEST_LEN + 1];
    char *stage_dep = token("stage-dep", "[\"deployer\"]", NULL, "[\"staging\"]");
    struct it_resp *r;

    (void)state;
    upload_as(srv->admin_token, "smoke model bytes", art);
    it_model_create(srv, srv->admin_token, "smk");
    it_version_create(srv, srv->admin_token, "smk", art, NULL);
    it_version_create(srv, srv->admin_token, "smk", art, NULL);
    it_version_create(srv, srv->admin_token, "smk", art, NULL);
    it_alias_to(srv, srv->admin_token, "smk", "production", 1, 0);
    it_alias_to(srv, srv->admin_token, "smk", "staging", 2, 0);
    r = it_jreq(srv, "POST", "/api/v1/models/smk/versions/1/smoke-tests", stage_dep, "{}");
    it_expect_error(srv, r, 403, "forbidden");
    assert_non_null(strstr(r->body, "production"));
    it_resp_free(srv, &r);
    /* its own alias's version, and one no alias routes: its to test */
    r = it_jreq(srv, "POST", "/api/v1/models/smk/versions/2/smoke-tests", stage_dep, "{}");
    it_expect_status_not(r, 403, 404);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/models/smk/versions/3/smoke-tests", stage_dep, "{}");
    it_expect_status_not(r, 403, 404);
    it_resp_free(srv, &r);
    free(stage_dep);
}

static long blob_status(struct mg_server *s, const char *method, const char *digest,
                        const char *tok)
{
    char path[160];
    struct it_resp *r;
    long status;

    it_fmt(path, sizeof(path), "/api/v1/blobs/%s", digest);
    r = it_request(s, method, path, tok, NULL, NULL, 0);
    status = r->status;
    if (status == 404 || status == 410) /* the body says nothing of whose the bytes are */
        assert_null(strstr(r->body, "risk"));
    it_resp_free(s, &r);
    return status;
}

static struct it_resp *version_post(const char *tok, const char *model, const char *digest)
{
    char path[160], body[200];

    it_fmt(path, sizeof(path), "/api/v1/models/%s/versions", model);
    it_fmt(body, sizeof(body), "{\"artifact\":\"%s\"}", digest);
    return it_jreq(srv, "POST", path, tok, body);
}

/* Bytes belong to the teams that uploaded them or whose models cite them: another team's
 * token neither reads them by digest nor cites them in a version of its own model (and so
 * never pulls them through /v2/), until it uploads the same bytes itself. */
static void test_bytes_belong_to_teams(void **state)
{
    char cited[IT_DIGEST_LEN + 1], loose[IT_DIGEST_LEN + 1];
    char *global_read = token("global-read", "[\"reader\"]", NULL, NULL);
    struct it_resp *r;

    (void)state;
    upload_as(risk_pub, "risk team weights, cited", cited);
    upload_as(risk_pub, "risk team weights, loose", loose);
    call("POST", "/api/v1/models", risk_pub, "{\"name\":\"rmod\"}", 201);
    call("POST", "/api/v1/models", ads_pub, "{\"name\":\"amod\"}", 201);
    r = version_post(risk_pub, "rmod", cited);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);

    /* risk's own readers: through the model, or because a risk token uploaded them */
    assert_int_equal(blob_status(srv, "GET", cited, risk_read), 200);
    assert_int_equal(blob_status(srv, "HEAD", cited, risk_read), 200);
    assert_int_equal(blob_status(srv, "GET", loose, risk_read), 200);
    /* ads: as if missing, by GET and HEAD */
    assert_int_equal(blob_status(srv, "GET", cited, ads_read), 404);
    assert_int_equal(blob_status(srv, "HEAD", cited, ads_read), 404);
    assert_int_equal(blob_status(srv, "GET", loose, ads_read), 404);
    assert_int_equal(blob_status(srv, "GET", loose, ads_pub), 404);
    /* global tokens keep reading everything */
    assert_int_equal(blob_status(srv, "GET", loose, global_read), 200);
    assert_int_equal(blob_status(srv, "GET", cited, srv->admin_token), 200);

    /* a version of ads's own model on risk's digest: 404 naming the digest, nothing made */
    r = version_post(ads_pub, "amod", cited);
    it_expect_error(srv, r, 404, "not_found");
    assert_non_null(strstr(r->body, cited));
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/models/amod/versions", ads_read);
    it_expect_status(srv, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 0);
    it_resp_free(srv, &r);
    r = version_post(ads_pub, "amod", loose);
    it_expect_error(srv, r, 404, "not_found");
    it_resp_free(srv, &r);
    /* nor through /v2/: rmod is another team's, amod has no version */
    {
        char path[200];

        it_fmt(path, sizeof(path), "/v2/rmod/blobs/%s", cited);
        r = it_get(srv, path, ads_read);
        assert_int_equal(r->status, 404);
        it_resp_free(srv, &r);
        it_fmt(path, sizeof(path), "/v2/amod/blobs/%s", cited);
        r = it_get(srv, path, ads_read);
        assert_int_equal(r->status, 404);
        it_resp_free(srv, &r);
    }

    /* uploading the same bytes proves possession: then ads reads and cites them */
    upload_as(ads_pub, "risk team weights, cited", cited);
    assert_int_equal(blob_status(srv, "GET", cited, ads_read), 200);
    r = version_post(ads_pub, "amod", cited);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    {
        char path[200];

        it_fmt(path, sizeof(path), "/v2/amod/blobs/%s", cited);
        r = it_get(srv, path, ads_read);
        it_expect_status(srv, r, 200);
        it_resp_free(srv, &r);
    }
    assert_int_equal(blob_status(srv, "GET", loose, ads_read), 404); /* still only risk's */
    /* nor does a dataset record of ads cite risk's bytes */
    {
        char body[300];
        struct it_resp *d;

        it_fmt(body, sizeof(body), "{\"digest\":\"%s\",\"name\":\"stolen\"}", loose);
        d = it_jreq(srv, "POST", "/api/v1/datasets", ads_pub, body);
        it_expect_error(srv, d, 404, "not_found");
        assert_non_null(strstr(d->body, loose));
        it_resp_free(srv, &d);
        call("POST", "/api/v1/datasets", risk_pub, body, 201);
    }
    free(global_read);
}

/* Bytes no live version cites any more are gone (410) to everyone but admins until they
 * are collected, and a new version cites them only after they are uploaded again. */
static void test_released_bytes_are_gone(void **state)
{
    char d[IT_DIGEST_LEN + 1];
    char *global_pub = token("global-pub", "[\"publisher\"]", NULL, NULL);
    struct it_resp *r;

    (void)state;
    upload_as(risk_pub, "weights of a version to delete", d);
    call("POST", "/api/v1/models", risk_pub, "{\"name\":\"gone\"}", 201);
    r = version_post(risk_pub, "gone", d);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    r = version_post(risk_pub, "gone", d);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    call("DELETE", "/api/v1/models/gone/versions/1", srv->admin_token, "{\"reason\":\"test\"}",
         200);
    /* version 2 still cites them */
    assert_int_equal(blob_status(srv, "GET", d, risk_read), 200);
    call("DELETE", "/api/v1/models/gone/versions/2", srv->admin_token, "{\"reason\":\"test\"}",
         200);
    assert_int_equal(blob_status(srv, "GET", d, risk_read), 410);
    assert_int_equal(blob_status(srv, "HEAD", d, risk_pub), 410);
    assert_int_equal(blob_status(srv, "GET", d, global_pub), 410);
    assert_int_equal(blob_status(srv, "GET", d, ads_read), 404); /* never risk's to tell */
    assert_int_equal(blob_status(srv, "GET", d, srv->admin_token), 200);
    r = version_post(risk_pub, "gone", d);
    it_expect_error(srv, r, 410, "gone");
    assert_non_null(strstr(r->body, d));
    it_resp_free(srv, &r);
    r = version_post(global_pub, "gone", d);
    it_expect_error(srv, r, 410, "gone");
    it_resp_free(srv, &r);
    /* uploaded again: readable and citable again */
    upload_as(risk_pub, "weights of a version to delete", d);
    assert_int_equal(blob_status(srv, "GET", d, risk_read), 200);
    r = version_post(risk_pub, "gone", d);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    free(global_pub);
}

/* --blob-downloads redirect: no presigned URL for bytes the token may not read. */
static void test_redirect_only_for_held_bytes(void **state)
{
    struct mg_server *t;
    char d[IT_DIGEST_LEN + 1], path[160], body[200];
    struct it_resp *r;
    char *rp, *ar;

    (void)state;
    if (strcmp(it_blob_kind(), "s3") != 0)
        it_not_applicable("only the s3 backend presigns");
    t = it_server_start(
        (const char *const[]){"--read-scope", "team", "--blob-downloads", "redirect", NULL});
    r = it_jreq(t, "POST", "/api/v1/teams", t->admin_token, "{\"name\":\"risk\"}");
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/teams", t->admin_token, "{\"name\":\"ads\"}");
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/tokens", t->admin_token,
                "{\"name\":\"rp\",\"roles\":[\"publisher\"],\"teams\":[\"risk\"]}");
    rp = strdup(it_jstr(r->json, "token"));
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/tokens", t->admin_token,
                "{\"name\":\"ar\",\"roles\":[\"reader\"],\"teams\":[\"ads\"]}");
    ar = strdup(it_jstr(r->json, "token"));
    it_resp_free(t, &r);
    r = it_request(t, "POST", "/api/v1/blobs", rp, "application/octet-stream", "presigned?", 10);
    it_expect_status(t, r, 201);
    it_resp_free(t, &r);
    it_digest("presigned?", 10, d);
    it_fmt(path, sizeof(path), "/api/v1/blobs/%s", d);
    r = it_get(t, path, ar);
    it_expect_error(t, r, 404, "not_found");
    assert_null(it_header(r, "Location"));
    it_resp_free(t, &r);
    r = it_get(t, path, rp);
    it_expect_status(t, r, 307);
    assert_non_null(it_header(r, "Location"));
    it_resp_free(t, &r);
    (void)body;
    free(rp);
    free(ar);
    it_server_free(&t);
}

static void dataset_post(const char *tok, const char *digest, const char *name, const char *parent,
                         long status)
{
    char body[400];

    if (parent)
        it_fmt(body, sizeof(body), "{\"digest\":\"%s\",\"name\":\"%s\",\"parents\":[\"%s\"]}",
               digest, name, parent);
    else
        it_fmt(body, sizeof(body), "{\"digest\":\"%s\",\"name\":\"%s\"}", digest, name);
    call("POST", "/api/v1/datasets", tok, body, status);
}

/* Dataset records belong to teams: another team registering the same digest first, with a
 * withdrawn parent, neither blocks one's own record nor flags one's versions; readers see
 * their teams' and global records, and the versions of models they can read. */
static void test_dataset_records_belong_to_teams(void **state)
{
    char art[IT_DIGEST_LEN + 1], x[IT_DIGEST_LEN + 1], p[IT_DIGEST_LEN + 1];
    char y[IT_DIGEST_LEN + 1], path[200];
    struct it_resp *r;

    (void)state;
    it_digest("dataset x", 9, x);
    it_digest("withdrawn parent p", 18, p);
    it_digest("ads only y", 10, y);
    dataset_post(srv->admin_token, p, "parent", NULL, 201);
    it_fmt(path, sizeof(path), "/api/v1/datasets/%s/withdraw", p);
    call("POST", path, srv->admin_token, "{\"reason\":\"licence ended\"}", 200);
    /* ads registers risk's digest first, derived from the withdrawn parent */
    dataset_post(ads_pub, x, "poisoned", p, 201);
    /* risk's own record of it: no conflict with another team's */
    dataset_post(risk_pub, x, "clean", NULL, 201);
    dataset_post(risk_pub, x, "clean", NULL, 200); /* the same again */
    dataset_post(risk_pub, x, "other", NULL, 409); /* its own record does not change */
    dataset_post(ads_pub, y, "ads data", NULL, 201);

    upload_as(risk_pub, "lineage model bytes", art);
    call("POST", "/api/v1/models", risk_pub, "{\"name\":\"lin\"}", 201);
    r = it_jreq_v(srv, "POST", "/api/v1/models/lin/versions", risk_pub,
                  json_pack("{ss s[{ss ss ss}]}", "artifact", art, "datasets", "digest", x, "name",
                            "train", "role", "train"));
    it_expect_status(srv, r, 201);
    assert_int_equal(json_array_size(it_jarr(r->json, "withdrawn_datasets")), 0);
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/models/lin/versions/1", risk_read);
    it_expect_status(srv, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "withdrawn_datasets")), 0);
    it_resp_free(srv, &r);

    /* each team reads its own record; another team's only record is missing */
    it_fmt(path, sizeof(path), "/api/v1/datasets/%s", x);
    r = it_get(srv, path, risk_read);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_jstr(r->json, "name"), "clean");
    assert_int_equal(json_array_size(it_jarr(r->json, "parents")), 0);
    it_resp_free(srv, &r);
    r = it_get(srv, path, ads_read);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_jstr(r->json, "name"), "poisoned");
    it_resp_free(srv, &r);
    it_fmt(path, sizeof(path), "/api/v1/datasets/%s", y);
    r = it_get(srv, path, risk_read);
    it_expect_error(srv, r, 404, "not_found");
    it_resp_free(srv, &r);
    it_fmt(path, sizeof(path), "/api/v1/datasets/%s", p); /* global: everyone's */
    r = it_get(srv, path, risk_read);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);

    /* the versions trained on it: only of models the reader can read */
    it_fmt(path, sizeof(path), "/api/v1/datasets/%s/versions", x);
    r = it_get(srv, path, risk_read);
    it_expect_status(srv, r, 200);
    assert_non_null(strstr(r->body, "\"lin\""));
    it_resp_free(srv, &r);
    r = it_get(srv, path, ads_read);
    it_expect_status(srv, r, 200);
    assert_null(strstr(r->body, "\"lin\""));
    assert_null(strstr(r->body, "risk"));
    it_resp_free(srv, &r);
    it_fmt(path, sizeof(path), "/api/v1/datasets/%s/versions", p);
    r = it_get(srv, path, ads_read);
    it_expect_status(srv, r, 200);
    assert_null(strstr(r->body, "\"lin\""));
    it_resp_free(srv, &r);

    /* an admin's withdrawal of the digest itself reaches every record */
    it_fmt(path, sizeof(path), "/api/v1/datasets/%s/withdraw", x);
    call("POST", path, srv->admin_token, "{\"reason\":\"privacy\"}", 200);
    r = it_get(srv, "/api/v1/models/lin/versions/1", risk_read);
    assert_int_equal(json_array_size(it_jarr(r->json, "withdrawn_datasets")), 1);
    assert_string_equal(
        json_string_value(json_array_get(it_jarr(r->json, "withdrawn_datasets"), 0)), x);
    it_resp_free(srv, &r);
}

/* Migration 015 on a database of the previous release: uploads by team tokens stay their
 * teams' (from the token that sent them), and dataset records become global ones with
 * their lineage. */
/* A team's quota and use are its own: another team's reader or publisher gets the 404 a
 * missing team gets, naming nothing of it; the usage list shows a team token its own
 * teams only; admin and a global reader see every team. */
static void test_quota_and_usage_are_the_teams_own(void **state)
{
    char *global_read = token("quota-reader", "[\"reader\"]", NULL, NULL);
    const char *toks[] = {ads_read, ads_pub};
    struct it_resp *r;
    json_t *items, *item;
    size_t i;

    (void)state;
    call("PUT", "/api/v1/teams/risk/quota", srv->admin_token, "{\"storage_bytes\":987654}", 200);
    r = it_get(srv, "/api/v1/teams/risk/quota", risk_read);
    it_expect_status(srv, r, 200);
    assert_int_equal(it_jint(r->json, "storage_bytes"), 987654);
    it_resp_free(srv, &r);
    for (i = 0; i < 2; i++) {
        r = it_get(srv, "/api/v1/teams/risk/quota", toks[i]);
        it_expect_error(srv, r, 404, "not_found");
        assert_non_null(strstr(it_jstr(json_object_get(r->json, "error"), "message"),
                               "team 'risk' is not visible"));
        assert_null(strstr((const char *)r->body, "987654"));
        it_resp_free(srv, &r);
    }
    /* a team that does not exist reads the same to a team token */
    r = it_get(srv, "/api/v1/teams/nobody/quota", ads_read);
    it_expect_error(srv, r, 404, "not_found");
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/teams/risk/quota", global_read);
    it_expect_status(srv, r, 200);
    assert_int_equal(it_jint(r->json, "storage_bytes"), 987654);
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/teams/risk/quota", srv->admin_token);
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    /* the usage list: ads sees ads only */
    r = it_get(srv, "/api/v1/usage?by=team", ads_read);
    it_expect_status(srv, r, 200);
    items = json_object_get(r->json, "items");
    json_array_foreach(items, i, item) assert_string_equal(it_jstr(item, "team"), "ads");
    it_resp_free(srv, &r);
    free(global_read);
}

static void test_upgrade_keeps_uploads_and_lineage(void **state)
{
    struct mg_server *t, *keep = srv;
    char loose[IT_DIGEST_LEN + 1], p[IT_DIGEST_LEN + 1], c[IT_DIGEST_LEN + 1], path[200];
    char *rp, *ar;
    struct it_resp *r;

    (void)state;
    t = it_server_start((const char *const[]){"--read-scope", "team", NULL});
    srv = t; /* the helpers talk to srv */
    call("POST", "/api/v1/teams", t->admin_token, "{\"name\":\"risk\"}", 201);
    call("POST", "/api/v1/teams", t->admin_token, "{\"name\":\"ads\"}", 201);
    rp = token("rp", "[\"publisher\"]", "[\"risk\"]", NULL);
    ar = token("ar", "[\"reader\"]", "[\"ads\"]", NULL);
    upload_as(rp, "uploaded before the upgrade", loose);
    it_digest("old parent", 10, p);
    it_digest("old child", 9, c);
    dataset_post(t->admin_token, p, "parent", NULL, 201);
    dataset_post(t->admin_token, c, "child", p, 201);
    it_server_stop(t);
    assert_true(it_schema_back(t, 14) >= 1); /* a database of the previous release */
    it_server_restart(t);

    assert_int_equal(blob_status(t, "GET", loose, rp), 200);
    assert_int_equal(blob_status(t, "GET", loose, ar), 404);
    it_fmt(path, sizeof(path), "/api/v1/datasets/%s", c);
    r = it_get(t, path, ar); /* global records: everyone's */
    it_expect_status(t, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "parents")), 1);
    assert_string_equal(json_string_value(json_array_get(it_jarr(r->json, "parents"), 0)), p);
    it_resp_free(t, &r);
    free(rp);
    free(ar);
    srv = keep;
    it_server_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_backup_refuses_planted_link, it_test_teardown),
        cmocka_unit_test_teardown(test_pages_and_writes_hide_other_teams, it_test_teardown),
        cmocka_unit_test_teardown(test_scoped_deployer_smoke_tests, it_test_teardown),
        cmocka_unit_test_teardown(test_bytes_belong_to_teams, it_test_teardown),
        cmocka_unit_test_teardown(test_released_bytes_are_gone, it_test_teardown),
        cmocka_unit_test_teardown(test_dataset_records_belong_to_teams, it_test_teardown),
        cmocka_unit_test_teardown(test_redirect_only_for_held_bytes, it_test_teardown),
        cmocka_unit_test_teardown(test_quota_and_usage_are_the_teams_own, it_test_teardown),
        cmocka_unit_test_teardown(test_upgrade_keeps_uploads_and_lineage, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
