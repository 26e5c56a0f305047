/*
 * test_lifecycle.c - docs/contract.md "Lifecycle" over HTTP: archive and unarchive
 * (hidden from lists, never routed or promoted), delete to a tombstone (410
 * artifact, signature kept) with its guards (routed, last-known-good, active
 * candidate → 409), retention rules with their dry run and scheduled runs,
 * usage, withdrawn datasets and the gate that blocks them, and the audit
 * entries of each.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct life_ctx {
    struct mg_server *s;
    char *pub, *dep, *rev, *rd, *adm;
};

static struct life_ctx cx;

static int group_setup(void **state)
{
    /* No periodic runs: each test asks for what it checks. */
    static const char *const args[] = {
        "--retention-interval", "0s", "--gc-interval", "0s", "--gc-grace", "0s", NULL};

    memset(&cx, 0, sizeof(cx));
    cx.s = it_server_start(args);
    cx.pub = it_token_create(cx.s, "pub", "publisher,reader", NULL);
    cx.dep = it_token_create(cx.s, "dep", "deployer,reader", NULL);
    cx.rev = it_token_create(cx.s, "rev", "reviewer,reader", NULL);
    cx.rd = it_token_create(cx.s, "rd", "reader", NULL);
    cx.adm = cx.s->admin_token;
    it_release(cx.s);
    *state = cx.s;
    return 0;
}

static int group_teardown(void **state)
{
    free(cx.pub);
    free(cx.dep);
    free(cx.rev);
    free(cx.rd);
    it_server_stop(cx.s);
    it_server_free(&cx.s);
    *state = NULL;
    return 0;
}

/* A blob of its own for version i of model (distinct bytes, `size` long). */
static void blob_for(const char *model, int i, size_t size, char digest[IT_DIGEST_LEN + 1])
{
    char *buf = malloc(size), head[96];
    int n = snprintf(head, sizeof(head), "%s artifact %d ", model, i);

    assert_non_null(buf);
    for (size_t k = 0; k < size; k++)
        buf[k] = (char)('a' + (k * 7 + (size_t)i) % 26);
    memcpy(buf, head, n > 0 && (size_t)n < size ? (size_t)n : 0);
    it_upload(cx.s, buf, size, digest);
    free(buf);
}

/* Model with n versions, each with an artifact of its own of 1000 + i bytes. */
static void world(const char *model, int n)
{
    char d[IT_DIGEST_LEN + 1];

    it_model_create(cx.s, cx.pub, model);
    for (int i = 1; i <= n; i++) {
        blob_for(model, i, 1000 + (size_t)i, d);
        assert_int_equal(it_version_create(cx.s, cx.pub, model, d, NULL), i);
    }
    it_release(cx.s);
}

static struct it_resp *post(const char *token, const char *fmt_path, const char *model, int n,
                            const char *what)
{
    char path[200];

    return it_jreq(cx.s, "POST", it_fmt(path, sizeof(path), fmt_path, model, n, what), token, NULL);
}

static struct it_resp *lifecycle(const char *token, const char *model, int n, const char *what)
{
    return post(token, "/api/v1/models/%s/versions/%d/%s", model, n, what);
}

static struct it_resp *delete_version(const char *token, const char *model, int n, const char *body)
{
    char path[160];

    return it_jreq(cx.s, "DELETE",
                   it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%d", model, n), token,
                   body);
}

static struct it_resp *get_version(const char *model, int n)
{
    char path[160];

    return it_get(cx.s, it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%d", model, n),
                  cx.rd);
}

/* The version numbers a list answers, as "5,4,1". */
static void list_text(const char *model, const char *query, char *out, size_t cap)
{
    char path[200];
    struct it_resp *r = it_get(
        cx.s, it_fmt(path, sizeof(path), "/api/v1/models/%s/versions%s", model, query), cx.rd);
    json_t *v;
    size_t i, off = 0;

    it_expect_status(cx.s, r, 200);
    out[0] = '\0';
    json_array_foreach(it_jarr(r->json, "items"), i, v) off += (size_t)snprintf(
        out + off, cap - off, "%s%lld", i ? "," : "", (long long)it_jint(v, "version"));
}

static void test_archive_and_unarchive(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    char got[128];

    world("arch", 3);
    r = lifecycle(cx.pub, "arch", 2, "archive");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "status"), "archived");
    it_expect_rfc3339(it_jstr(r->json, "archived_at"));
    assert_string_equal(it_jstr(r->json, "archived_by"), "pub");
    /* Again: the same answer, nothing new. */
    r = lifecycle(cx.pub, "arch", 2, "archive");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "status"), "archived");

    list_text("arch", "", got, sizeof(got));
    assert_string_equal(got, "3,1");
    list_text("arch", "?status=archived", got, sizeof(got));
    assert_string_equal(got, "2");
    list_text("arch", "?status=all", got, sizeof(got));
    assert_string_equal(got, "3,2,1");
    r = it_get(s, "/api/v1/models/arch/versions?status=gone", cx.rd);
    it_expect_error_field(s, r, 400, "invalid_argument", "status");
    /* Still readable by number, with its bytes. */
    r = it_get(s, "/api/v1/models/arch/versions/2/artifact", cx.rd);
    it_expect_status(s, r, 200);

    /* Never routed nor promoted while archived. */
    r = it_jreq(s, "PUT", "/api/v1/models/arch/aliases/production", cx.dep, "{\"version\":2}");
    it_expect_error(s, r, 409, "conflict");
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "archived"));
    r = it_promotion_post(s, cx.dep, "arch", 2, "production");
    it_expect_error(s, r, 409, "conflict");
    r = it_get(s, "/api/v1/models/arch/aliases/production", cx.rd);
    it_expect_error(s, r, 404, "not_found");

    /* A routed version cannot be archived. */
    it_alias_to(s, cx.dep, "arch", "production", 3, 0);
    r = lifecycle(cx.pub, "arch", 3, "archive");
    it_expect_error(s, r, 409, "conflict");
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "production"));

    /* Roles: a reader cannot archive. */
    r = lifecycle(cx.rd, "arch", 1, "archive");
    it_expect_error(s, r, 403, "forbidden");

    r = lifecycle(cx.pub, "arch", 2, "unarchive");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "status"), "ready");
    assert_null(json_object_get(r->json, "archived_at"));
    list_text("arch", "", got, sizeof(got));
    assert_string_equal(got, "3,2,1");
    it_alias_to(s, cx.dep, "arch", "production", 2, 0);
    r = lifecycle(cx.pub, "arch", 9, "archive");
    it_expect_error(s, r, 404, "not_found");

    /* The answer is the whole Version, its derived VRAM estimate included. */
    {
        char d[IT_DIGEST_LEN + 1], body[256];

        blob_for("arch", 4, 1004, d);
        r = it_jreq(s, "POST", "/api/v1/models/arch/versions", cx.pub,
                    it_fmt(body, sizeof(body),
                           "{\"artifact\":\"%s\",\"resources\":{\"parameters\":1000000000,"
                           "\"precision\":\"fp16\"}}",
                           d));
        it_expect_status(s, r, 201);
        assert_int_equal(it_jint(r->json, "version"), 4);
        r = lifecycle(cx.pub, "arch", 4, "archive");
        it_expect_status(s, r, 200);
        assert_true(it_jnum(r->json, "estimated_vram_gib") > 2.0);
        assert_non_null(json_object_get(r->json, "vram_estimate"));
    }
}

static void test_delete_guards_and_tombstone(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    char id[64], path[160];

    world("del", 5);
    /* v1 at 100% (the LKG), then a direct split of v2 and v3: v1 is LKG but not routed. */
    it_alias_to(s, cx.dep, "del", "production", 1, 0);
    it_alias_set(s, cx.dep, "del", "production",
                 "{\"routes\":[{\"version\":2,\"weight\":50},{\"version\":3,\"weight\":50}]}");
    /* v4 waits for an approval on staging. */
    it_policy_put(s, "del", "staging", "{\"approvals\":{\"required\":1}}");
    r = it_promote(s, cx.dep, "del", 4, "staging", id);
    assert_string_equal(it_jstr(r->json, "state"), "awaiting_approval");

    r = delete_version(cx.adm, "del", 2, "{\"reason\":\"bad data\"}");
    it_expect_error(s, r, 409, "conflict");
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "routed"));
    r = delete_version(cx.adm, "del", 1, "{\"reason\":\"bad data\"}");
    it_expect_error(s, r, 409, "conflict");
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "last-known-good"));
    r = delete_version(cx.adm, "del", 4, "{\"reason\":\"bad data\"}");
    it_expect_error(s, r, 409, "conflict");
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), id));
    /* Archive has the same guards. */
    r = lifecycle(cx.pub, "del", 1, "archive");
    it_expect_error(s, r, 409, "conflict");

    /* Bad requests change nothing. */
    r = delete_version(cx.adm, "del", 5, NULL);
    it_expect_error_field(s, r, 400, "invalid_argument", "reason");
    r = delete_version(cx.adm, "del", 5, "{\"reason\":\"\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "reason");
    r = delete_version(cx.adm, "del", 5, "{\"why\":\"x\"}");
    it_expect_error(s, r, 400, "invalid_argument");
    r = delete_version(cx.pub, "del", 5, "{\"reason\":\"not mine to delete\"}");
    it_expect_error(s, r, 403, "forbidden");
    r = get_version("del", 5);
    assert_string_equal(it_jstr(r->json, "status"), "ready");

    r = delete_version(cx.adm, "del", 5, "{\"reason\":\"licence revoked\"}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "status"), "deleted");
    assert_string_equal(it_jstr(r->json, "deletion_reason"), "licence revoked");
    assert_string_equal(it_jstr(r->json, "deleted_by"), "admin");
    it_expect_rfc3339(it_jstr(r->json, "deleted_at"));
    /* The tombstone: the record and its signature stay, the bytes answer 410. */
    r = get_version("del", 5);
    assert_string_equal(it_jstr(r->json, "status"), "deleted");
    r = it_get(s, "/api/v1/models/del/versions/5/artifact", cx.rd);
    it_expect_error(s, r, 410, "gone");
    r = it_get(s, "/api/v1/models/del/versions/5/signature", cx.rd);
    it_expect_status(s, r, 200);
    r = it_get(s, "/api/v1/models/del/versions/5/files", cx.rd);
    it_expect_status(s, r, 200);
    /* Deleting again answers the tombstone; it cannot come back or move. */
    r = delete_version(cx.adm, "del", 5, "{\"reason\":\"again\"}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "deletion_reason"), "licence revoked");
    r = lifecycle(cx.pub, "del", 5, "unarchive");
    it_expect_error(s, r, 409, "conflict");
    r = it_jreq(s, "PUT", "/api/v1/models/del/aliases/canary", cx.dep, "{\"version\":5}");
    it_expect_error(s, r, 409, "conflict");
    r = it_jreq(s, "POST", "/api/v1/models/del/versions/5/metrics", cx.pub,
                "{\"metrics\":{\"auc\":0.5}}");
    it_expect_error(s, r, 409, "conflict");
    r = it_jreq(s, "POST", "/api/v1/models/del/versions/5/smoke-tests", cx.dep, "{}");
    it_expect_error(s, r, 410, "gone");

    /* Over /v2/ a deleted version is no tag and pulls nothing; the others still do. */
    {
        static const char *const accept[] = {"Accept: application/vnd.oci.image.manifest.v1+json",
                                             NULL};
        json_t *t;
        size_t i;
        bool v5 = false, v4 = false;

        r = it_request_h(s, "GET", "/v2/del/manifests/v5", cx.rd, NULL, NULL, 0, accept);
        it_expect_status(s, r, 404);
        assert_non_null(strstr(r->body, "MANIFEST_UNKNOWN"));
        r = it_request_h(s, "GET", "/v2/del/manifests/v4", cx.rd, NULL, NULL, 0, accept);
        it_expect_status(s, r, 200);
        r = it_get(s, "/v2/del/tags/list", cx.rd);
        it_expect_status(s, r, 200);
        json_array_foreach(it_jarr(r->json, "tags"), i, t)
        {
            v5 = v5 || strcmp(json_string_value(t), "v5") == 0;
            v4 = v4 || strcmp(json_string_value(t), "v4") == 0;
        }
        assert_false(v5);
        assert_true(v4);
    }

    /* Once the alias moves on, v2 may go; deleted versions are never a rollback target. */
    it_alias_to(s, cx.dep, "del", "production", 3, 0);
    r = delete_version(cx.adm, "del", 2, "{\"reason\":\"superseded\"}");
    it_expect_status(s, r, 200);

    r = it_get(s, it_fmt(path, sizeof(path), "/api/v1/audit?after=0&limit=1000"), cx.adm);
    {
        json_t *e;
        size_t i;
        int deletes = 0;

        json_array_foreach(it_jarr(r->json, "items"), i, e)
        {
            if (strcmp(it_jstr(e, "action"), "version.delete") == 0 &&
                strncmp(it_jstr(e, "target"), "del/", 4) == 0)
                deletes++;
        }
        assert_int_equal(deletes, 2);
    }
}

/* The version a rollback would go to is kept like the last-known-good itself: archiving or
 * deleting it would leave the alias nothing to roll back to. */
static void test_rollback_target_is_kept(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;

    world("rbk", 3);
    it_alias_to(s, cx.dep, "rbk", "production", 1, 0);
    it_alias_to(s, cx.dep, "rbk", "production", 2, 0);
    r = lifecycle(cx.pub, "rbk", 1, "archive");
    it_expect_error(s, r, 409, "conflict");
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "rollback"));
    r = delete_version(cx.adm, "rbk", 1, "{\"reason\":\"old\"}");
    it_expect_error(s, r, 409, "conflict");
    r = get_version("rbk", 1);
    assert_string_equal(it_jstr(r->json, "status"), "ready");
    r = it_jreq(s, "POST", "/api/v1/models/rbk/aliases/production/rollback", cx.dep,
                "{\"reason\":\"v2 misbehaves\"}");
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(json_array_get(it_jarr(r->json, "routes"), 0), "version"), 1);
    /* Rolled back from, v2 is nobody's fallback any more; v3 never was one. */
    r = lifecycle(cx.pub, "rbk", 2, "archive");
    it_expect_status(s, r, 200);
    r = lifecycle(cx.pub, "rbk", 3, "archive");
    it_expect_status(s, r, 200);
}

static void test_pinned_and_shadow_versions_are_routed(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;

    world("pin", 3);
    it_alias_set(s, cx.dep, "pin", "prod",
                 "{\"routes\":[{\"version\":1,\"weight\":100}],"
                 "\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2}],"
                 "\"shadow\":{\"version\":3,\"percent\":10}}");
    r = delete_version(cx.adm, "pin", 2, "{\"reason\":\"x\"}");
    it_expect_error(s, r, 409, "conflict");
    assert_non_null(
        strstr(it_jstr(it_jobj(r->json, "error"), "message"), "routed by alias 'prod'"));
    r = delete_version(cx.adm, "pin", 3, "{\"reason\":\"x\"}");
    it_expect_error(s, r, 409, "conflict");
    r = lifecycle(cx.pub, "pin", 2, "archive");
    it_expect_error(s, r, 409, "conflict");
    /* Neither a pin nor a shadow may point at an archived version. */
    it_alias_set(s, cx.dep, "pin", "prod", "{\"routes\":[{\"version\":1,\"weight\":100}]}");
    r = lifecycle(cx.pub, "pin", 3, "archive");
    it_expect_status(s, r, 200);
    r = it_jreq(s, "PUT", "/api/v1/models/pin/aliases/prod", cx.dep,
                "{\"routes\":[{\"version\":1,\"weight\":100}],"
                "\"shadow\":{\"version\":3,\"percent\":10}}");
    it_expect_error_field(s, r, 409, "conflict", "shadow.version");
    r = delete_version(cx.adm, "pin", 2, "{\"reason\":\"no longer pinned\"}");
    it_expect_status(s, r, 200);
}

/* The numbers of a RetentionRun's versions, as "26,25". */
static void run_text(const json_t *run, char *out, size_t cap)
{
    json_t *v;
    size_t i, off = 0;

    out[0] = '\0';
    json_array_foreach(json_object_get(run, "versions"), i, v) off += (size_t)snprintf(
        out + off, cap - off, "%s%lld", i ? "," : "", (long long)json_integer_value(v));
}

static void test_retention_keep_last(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    char id[64], dry[512], done[512], want[512];
    json_int_t dry_bytes, want_bytes = 0;
    size_t off = 0;

    world("ret", 30);
    /* routed: v10 (50%) and v12 (50%); LKG: v3 (set alone before); candidate: v7. */
    it_alias_to(s, cx.dep, "ret", "production", 3, 0);
    it_alias_set(s, cx.dep, "ret", "production",
                 "{\"routes\":[{\"version\":10,\"weight\":50},{\"version\":12,\"weight\":50}]}");
    it_policy_put(s, "ret", "staging", "{\"approvals\":{\"required\":1}}");
    it_promote(s, cx.dep, "ret", 7, "staging", id);
    /* v20 shares v21's bytes: a version that stays holds them. */
    {
        struct it_resp *v21 = get_version("ret", 21);
        json_int_t n = it_version_create(s, cx.pub, "ret",
                                         it_jstr(it_jobj(v21->json, "artifact"), "digest"), NULL);

        assert_int_equal(n, 31);
    }

    r = it_jreq(s, "GET", "/api/v1/models/ret/retention", cx.rd, NULL);
    it_expect_status(s, r, 200);
    assert_true(json_is_null(r->json));
    r = it_jreq(s, "POST", "/api/v1/models/ret/retention/run", cx.adm, NULL);
    it_expect_error(s, r, 404, "not_found");
    r = it_jreq(s, "PUT", "/api/v1/models/ret/retention", cx.adm,
                "{\"keep_last\":-5,\"action\":\"delete\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "keep_last");
    r = it_jreq(s, "PUT", "/api/v1/models/ret/retention", cx.pub,
                "{\"keep_last\":5,\"action\":\"delete\"}");
    it_expect_error(s, r, 403, "forbidden");
    r = it_jreq(s, "PUT", "/api/v1/models/ret/retention", cx.adm,
                "{\"keep_last\":5,\"action\":\"delete\"}");
    it_expect_status(s, r, 200);
    assert_true(json_is_null(json_object_get(r->json, "keep_days")));
    r = it_jreq(s, "GET", "/api/v1/models/ret/retention", cx.rd, NULL);
    assert_int_equal(it_jint(r->json, "keep_last"), 5);

    /* Kept: the newest five (v31..v27), v12 and v10 (routed), v7 (candidate), v3 (LKG). */
    for (int v = 26; v >= 1; v--) {
        if (v == 12 || v == 10 || v == 7 || v == 3)
            continue;
        off += (size_t)snprintf(want + off, sizeof(want) - off, "%s%d", off ? "," : "", v);
        if (v != 21) /* v21's bytes stay with v31 */
            want_bytes += 1000 + v;
    }
    r = it_jreq(s, "POST", "/api/v1/models/ret/retention/run?dry_run=true", cx.adm, NULL);
    it_expect_status(s, r, 200);
    run_text(r->json, dry, sizeof(dry));
    assert_string_equal(dry, want);
    assert_string_equal(it_jstr(r->json, "action"), "delete");
    dry_bytes = it_jint(r->json, "bytes_reclaimable");
    assert_int_equal(dry_bytes, want_bytes);
    /* The dry run changed nothing. */
    r = get_version("ret", 1);
    assert_string_equal(it_jstr(r->json, "status"), "ready");
    r = it_jreq(s, "POST", "/api/v1/models/ret/retention/run?dry_run=maybe", cx.adm, NULL);
    it_expect_error_field(s, r, 400, "invalid_argument", "dry_run");

    r = it_jreq(s, "POST", "/api/v1/models/ret/retention/run?dry_run=false", cx.adm, NULL);
    it_expect_status(s, r, 200);
    run_text(r->json, done, sizeof(done));
    assert_string_equal(done, want);
    assert_int_equal(it_jint(r->json, "bytes_reclaimable"), dry_bytes);
    for (int v = 1; v <= 31; v++) {
        bool gone = v <= 26 && v != 12 && v != 10 && v != 7 && v != 3;
        r = get_version("ret", v);
        assert_string_equal(it_jstr(r->json, "status"), gone ? "deleted" : "ready");
        it_resp_free(s, &r);
    }
    /* A second run finds nothing more. */
    r = it_jreq(s, "POST", "/api/v1/models/ret/retention/run?dry_run=false", cx.adm, NULL);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "versions")), 0);

    r = it_get(s, "/api/v1/models/ret/usage", cx.rd);
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(it_jobj(r->json, "versions"), "deleted"), 22);
    assert_int_equal(it_jint(it_jobj(r->json, "versions"), "ready"), 9);
    assert_int_equal(it_jint(it_jobj(r->json, "versions"), "archived"), 0);
    {
        /* Kept: v27..v30 and v31 (v21's bytes), v12, v10, v7, v3. */
        json_int_t bytes = 1000 + 27 + 1000 + 28 + 1000 + 29 + 1000 + 30 + 1000 + 21 + 1000 + 12 +
                           1000 + 10 + 1000 + 7 + 1000 + 3;
        assert_int_equal(it_jint(r->json, "bytes"), bytes);
        assert_int_equal(it_jint(r->json, "bytes_unique"), bytes);
    }

    /* One audit entry names every version the run removed. */
    r = it_get(s, "/api/v1/audit?after=0&limit=1000", cx.adm);
    {
        json_t *e, *found = NULL;
        size_t i;

        json_array_foreach(it_jarr(r->json, "items"), i, e)
        {
            if (strcmp(it_jstr(e, "action"), "version.retention") == 0 &&
                strcmp(it_jstr(e, "target"), "ret") == 0)
                found = e;
        }
        assert_non_null(found);
        assert_int_equal(json_array_size(it_jarr(it_jobj(found, "detail"), "versions")), 22);
        assert_int_equal(it_jint(it_jobj(found, "detail"), "bytes_reclaimable"), dry_bytes);
    }
}

static void test_retention_archive_scheduled(void **state)
{
    static const char *const args[] = {"--retention-interval", "1s", NULL};
    struct mg_server *s2 = it_server_start(args);
    char *pub = it_token_create(s2, "pub2", "publisher,reader", NULL);
    char d[IT_DIGEST_LEN + 1];
    struct it_resp *r;
    int64_t deadline;
    bool archived = false;

    (void)state;
    it_model_create(s2, pub, "sched");
    it_upload(s2, "scheduled retention", 19, d);
    for (int i = 0; i < 3; i++)
        it_version_create(s2, pub, "sched", d, NULL);
    r = it_jreq(s2, "PUT", "/api/v1/models/sched/retention", s2->admin_token,
                "{\"keep_last\":1,\"action\":\"archive\"}");
    it_expect_status(s2, r, 200);
    /* The leader runs it on its own within an interval or two. */
    deadline = it_deadline(15000);
    while (!archived && it_now_ms() < deadline) {
        r = it_get(s2, "/api/v1/models/sched/versions?status=archived", pub);
        archived = json_array_size(it_jarr(r->json, "items")) == 2;
        it_resp_free(s2, &r);
        if (!archived)
            it_pause_ms(100);
    }
    assert_true(archived);
    r = it_get(s2, "/api/v1/models/sched/versions", pub);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);
    assert_int_equal(it_jint(json_array_get(it_jarr(r->json, "items"), 0), "version"), 3);
    free(pub);
    it_server_stop(s2);
    it_server_free(&s2);
}

static void test_withdrawn_dataset(void **state)
{
    struct mg_server *s = *state;
    char raw[IT_DIGEST_LEN + 1], clean[IT_DIGEST_LEN + 1], train[IT_DIGEST_LEN + 1];
    char other[IT_DIGEST_LEN + 1], art[IT_DIGEST_LEN + 1], body[1024], id[64], path[200];
    struct it_resp *r;
    json_t *g;

    it_digest("raw crawl", 9, raw);
    it_digest("cleaned crawl", 13, clean);
    it_digest("training split", 14, train);
    it_digest("other data", 10, other);
    /* raw → clean → train: a grandchild. */
    r = it_jreq(s, "POST", "/api/v1/datasets", cx.pub,
                it_fmt(body, sizeof(body), "{\"digest\":\"%s\",\"name\":\"raw\"}", raw));
    it_expect_status(s, r, 201);
    r = it_jreq(s, "POST", "/api/v1/datasets", cx.pub,
                it_fmt(body, sizeof(body),
                       "{\"digest\":\"%s\",\"name\":\"clean\",\"parents\":[\"%s\"]}", clean, raw));
    it_expect_status(s, r, 201);
    r = it_jreq(s, "POST", "/api/v1/datasets", cx.pub,
                it_fmt(body, sizeof(body),
                       "{\"digest\":\"%s\",\"name\":\"train\",\"parents\":[\"%s\"]}", train,
                       clean));
    it_expect_status(s, r, 201);
    r = it_jreq(s, "POST", "/api/v1/datasets", cx.pub,
                it_fmt(body, sizeof(body), "{\"digest\":\"%s\",\"name\":\"other\"}", other));
    it_expect_status(s, r, 201);

    it_model_create(s, cx.pub, "wd");
    it_upload(s, "withdrawn data model", 20, art);
    it_version_create(s, cx.pub, "wd", art,
                      json_pack("{s:[{s:s, s:s}]}", "datasets", "digest", train, "role", "train"));
    it_version_create(s, cx.pub, "wd", art,
                      json_pack("{s:[{s:s, s:s}]}", "datasets", "digest", other, "role", "train"));
    r = get_version("wd", 1);
    assert_int_equal(json_array_size(it_jarr(r->json, "withdrawn_datasets")), 0);

    r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/datasets/%s/withdraw", raw), cx.pub,
                "{\"reason\":\"privacy\"}");
    it_expect_error(s, r, 403, "forbidden");
    r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/datasets/%s/withdraw", raw), cx.adm,
                "{}");
    it_expect_error_field(s, r, 400, "invalid_argument", "reason");
    r = it_jreq(s, "POST", "/api/v1/datasets/sha256:" IT_HEX64 "/withdraw", cx.adm,
                "{\"reason\":\"privacy\"}");
    it_expect_error(s, r, 404, "not_found");
    r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/datasets/%s/withdraw", raw), cx.adm,
                "{\"reason\":\"personal data found\"}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "withdrawn"), "reason"), "personal data found");
    assert_string_equal(it_jstr(it_jobj(r->json, "withdrawn"), "by"), "admin");

    /* The grandchild-trained version is marked; the other is not. */
    r = get_version("wd", 1);
    assert_int_equal(json_array_size(it_jarr(r->json, "withdrawn_datasets")), 1);
    assert_string_equal(
        json_string_value(json_array_get(it_jarr(r->json, "withdrawn_datasets"), 0)), raw);
    r = get_version("wd", 2);
    assert_int_equal(json_array_size(it_jarr(r->json, "withdrawn_datasets")), 0);

    /* The gate names the dataset and rejects the promotion. */
    it_policy_put(s, "wd", "production", "{\"require_no_withdrawn_datasets\":true}");
    r = it_promote(s, cx.dep, "wd", 1, "production", id);
    r = it_promotion_wait(s, cx.rd, id, "rejected", 10000);
    g = it_gate_find(it_jarr(r->json, "gates"), "datasets", "withdrawn");
    assert_non_null(g);
    assert_string_equal(it_jstr(g, "status"), "failed");
    assert_non_null(strstr(it_jstr(g, "detail"), raw));
    r = it_promote(s, cx.dep, "wd", 2, "production", id);
    it_promotion_wait(s, cx.rd, id, "succeeded", 10000);

    /* A second withdrawal keeps the first. */
    r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/datasets/%s/withdraw", raw), cx.adm,
                "{\"reason\":\"again\"}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "withdrawn"), "reason"), "personal data found");
}

static void test_audit_verifies(void **state)
{
    struct it_resp *r = it_get(*state, "/api/v1/audit/verify", cx.adm);

    it_expect_status(*state, r, 200);
    assert_true(json_is_true(json_object_get(r->json, "ok")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_archive_and_unarchive, it_test_teardown),
        cmocka_unit_test_teardown(test_delete_guards_and_tombstone, it_test_teardown),
        cmocka_unit_test_teardown(test_rollback_target_is_kept, it_test_teardown),
        cmocka_unit_test_teardown(test_pinned_and_shadow_versions_are_routed, it_test_teardown),
        cmocka_unit_test_teardown(test_retention_keep_last, it_test_teardown),
        cmocka_unit_test_teardown(test_retention_archive_scheduled, it_test_teardown),
        cmocka_unit_test_teardown(test_withdrawn_dataset, it_test_teardown),
        cmocka_unit_test_teardown(test_audit_verifies, it_test_teardown),
    };

    return it_main_result(
        cmocka_run_group_tests_name("integration_lifecycle", tests, group_setup, group_teardown));
}
