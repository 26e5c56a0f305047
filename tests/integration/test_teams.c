/*
 * test_teams.c - M13: teams, team-scoped tokens, model owners, --read-scope, alias-scoped
 * tokens and approval groups (docs/contract.md "Teams"), against the real daemon.
 *
 * The BOLA sweep is generated from the OpenAPI document (whose routes test_openapi checks
 * against the route table): every mutating route that names a model, plus the promotion
 * routes that name one through the body or a stored promotion, is called with another
 * team's token and must answer 403 naming the owners, with nothing changed.
 */
#include "harness.h"
#include "schema_undo.h"
#include "sys.h"
#include "api.h"

#include <ctype.h>
#include <string.h>

static struct mg_server *srv;
static char *risk_pub, *ads_ci, *risk_dep, *stage_dep, *ml1, *ml2, *risk_rev, *global_pub;
static char art[IT_DIGEST_LEN + 1];

static void expect(const char *method, const char *path, const char *token, const char *body,
                   long status)
{
    struct it_resp *r = body ? it_jreq(srv, method, path, token, body) : it_get(srv, path, token);

    it_expect_status(srv, r, status);
    it_resp_free(srv, &r);
}

static void post_ok(const char *path, const char *token, const char *body, long status)
{
    expect("POST", path, token, body, status);
}

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

static int setup(void **state)
{
    char body[256];

    srv = it_server_start(NULL);
    post_ok("/api/v1/teams", srv->admin_token, "{\"name\":\"risk\"}", 201);
    post_ok("/api/v1/teams", srv->admin_token, "{\"name\":\"ads\"}", 201);
    post_ok("/api/v1/teams", srv->admin_token, "{\"name\":\"ml\"}", 201);
    risk_pub = token("risk-pub", "[\"publisher\"]", "[\"risk\"]", NULL);
    ads_ci = token("ads-ci", "[\"publisher\",\"deployer\",\"reviewer\"]", "[\"ads\"]", NULL);
    risk_dep = token("risk-dep", "[\"deployer\"]", "[\"risk\"]", NULL);
    stage_dep = token("stage-dep", "[\"deployer\"]", NULL, "[\"staging\",\"dev-*\"]");
    ml1 = token("ml1", "[\"reviewer\"]", "[\"ml\"]", NULL);
    ml2 = token("ml2", "[\"reviewer\"]", "[\"ml\"]", NULL);
    risk_rev = token("risk-rev", "[\"reviewer\"]", "[\"risk\"]", NULL);
    global_pub = token("global-pub", "[\"publisher\"]", NULL, NULL);
    {
        struct it_resp *u = it_upload(srv, "teams model bytes", 17, art);

        it_resp_free(srv, &u);
    }
    post_ok("/api/v1/models", risk_pub, "{\"name\":\"fraud\"}", 201);
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\",\"metrics\":{\"auc\":0.9}}", art);
    post_ok("/api/v1/models/fraud/versions", risk_pub, body, 201);
    post_ok("/api/v1/models/fraud/versions", risk_pub, body, 201);
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(risk_pub);
    free(ads_ci);
    free(risk_dep);
    free(stage_dep);
    free(ml1);
    free(ml2);
    free(risk_rev);
    free(global_pub);
    it_server_free(&srv);
    return 0;
}

static void test_model_owned_by_creating_team(void **state)
{
    struct it_resp *r;

    (void)state;
    r = it_get(srv, "/api/v1/models/fraud", ads_ci);
    it_expect_status(srv, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "owners")), 1);
    assert_string_equal(json_string_value(json_array_get(it_jarr(r->json, "owners"), 0)), "risk");
    it_resp_free(srv, &r);
    /* a global token's model has no owners */
    post_ok("/api/v1/models", global_pub, "{\"name\":\"open\"}", 201);
    r = it_get(srv, "/api/v1/models/open", ads_ci);
    assert_int_equal(json_array_size(it_jarr(r->json, "owners")), 0);
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/teams", ml1); /* every role reads */
    it_expect_status(srv, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 3);
    it_resp_free(srv, &r);
}

static void fill(const char *tmpl, char *out, size_t cap)
{
    size_t o = 0;

    while (*tmpl && o + 40 < cap) {
        if (*tmpl == '{') {
            const char *end = strchr(tmpl, '}');
            const char *v = strncmp(tmpl, "{model}", 7) == 0   ? "fraud"
                            : strncmp(tmpl, "{alias}", 7) == 0 ? "production"
                            : strncmp(tmpl, "{n}", 3) == 0     ? "1"
                                                               : "x";
            o += (size_t)snprintf(out + o, cap - o, "%s", v);
            tmpl = end + 1;
        } else {
            out[o++] = *tmpl++;
        }
    }
    out[o] = '\0';
}

/* The model as a reader sees it, with its versions and aliases: the sweep must not change it. */
static char *snapshot(void)
{
    struct it_resp *a = it_get(srv, "/api/v1/models/fraud", srv->admin_token);
    struct it_resp *b = it_get(srv, "/api/v1/models/fraud/versions", srv->admin_token);
    struct it_resp *c = it_get(srv, "/api/v1/audit?after=0&limit=1000", srv->admin_token);
    size_t n = a->len + b->len + 64;
    char *out = malloc(n);

    assert_non_null(out);
    snprintf(out, n, "%s|%s|%zu", a->body, b->body, json_array_size(it_jarr(c->json, "items")));
    it_resp_free(srv, &a);
    it_resp_free(srv, &b);
    it_resp_free(srv, &c);
    return out;
}

static void test_bola_sweep(void **state)
{
    struct it_resp *doc = it_get(srv, "/openapi.json", NULL);
    const char *path, *method;
    json_t *ops, *op;
    char *before = snapshot(), *after;
    size_t swept = 0, named = 0;
    char id[64], target[512], up[16];
    struct it_resp *r;

    (void)state;
    /* a promotion of fraud to call the promotion routes on */
    r = it_jreq(srv, "POST", "/api/v1/promotions", risk_dep,
                "{\"model\":\"fraud\",\"version\":1,\"alias\":\"canary\"}");
    it_expect_status(srv, r, 201);
    snprintf(id, sizeof(id), "%s", it_jstr(r->json, "id"));
    it_resp_free(srv, &r);
    free(before);
    before = snapshot();

    json_object_foreach(json_object_get(doc->json, "paths"), path, ops)
    {
        bool names_model = strstr(path, "{model}") != NULL;
        bool promo = strncmp(path, "/api/v1/promotions", 18) == 0;

        if (!names_model && !promo)
            continue;
        json_object_foreach(ops, method, op)
        {
            const char *role = json_string_value(json_object_get(op, "x-modelgate-role"));
            const char *body = "{}";
            size_t k;

            if (strcmp(method, "get") == 0 || strcmp(method, "head") == 0 ||
                strcmp(method, "parameters") == 0)
                continue;
            for (k = 0; method[k] && k < sizeof(up) - 1; k++)
                up[k] = (char)toupper((unsigned char)method[k]);
            up[k] = '\0';
            if (promo && strchr(path, '{')) {
                snprintf(target, sizeof(target), "%.*s%s%s", (int)(strchr(path, '{') - path), path,
                         id, strchr(path, '}') + 1);
            } else if (promo) {
                snprintf(target, sizeof(target), "%s", path);
                body = "{\"model\":\"fraud\",\"version\":2,\"alias\":\"staging\"}";
            } else {
                fill(path, target, sizeof(target));
            }
            if (strstr(path, "/approvals"))
                body = "{\"decision\":\"approve\",\"comment\":\"x\"}";
            else if (strstr(path, "/metrics") && !promo)
                body = "{\"metrics\":{\"evil\":1}}";
            else if (strstr(path, "/aliases/") && strcmp(up, "PUT") == 0)
                body = "{\"version\":2}";
            if (strstr(path, "/versions") && !strstr(path, "{n}") && strcmp(up, "POST") == 0) {
                static char vb[200];

                snprintf(vb, sizeof(vb), "{\"artifact\":\"%s\"}", art);
                body = vb;
            }
            r = it_jreq(srv, up, target, ads_ci, body);
            if (strncmp(path, "/v2/", 4) == 0) {
                /* the OCI registry is read-only: every write is refused, whoever asks */
                if (r->status != 405)
                    fail_msg("%s %s: %ld, expected 405: %s", up, target, r->status, r->body);
                it_resp_free(srv, &r);
                continue;
            }
            if (r->status != 403)
                fail_msg("%s %s as another team's token: %ld, expected 403: %s", up, target,
                         r->status, r->body);
            /* where the token holds the role, the refusal names the owners */
            if (role && (strstr(role, "publisher") || strstr(role, "deployer") ||
                         strstr(role, "reviewer"))) {
                const char *msg = json_string_value(
                    json_object_get(json_object_get(r->json, "error"), "message"));

                if (msg == NULL || strstr(msg, "risk") == NULL)
                    fail_msg("%s %s: the 403 does not name the owning team: %s", up, target,
                             r->body);
                named++;
            }
            it_resp_free(srv, &r);
            swept++;
        }
    }
    after = snapshot();
    assert_string_equal(before, after); /* nothing changed, not even the audit */
    assert_true(swept >= 10);
    assert_true(named >= 8);
    free(before);
    free(after);
    it_resp_free(srv, &doc);
}

static void test_own_team_and_global_tokens_act(void **state)
{
    char body[200];

    (void)state;
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", art);
    post_ok("/api/v1/models/fraud/versions", risk_pub, body, 201);
    /* a token without teams is global: it acts on any team's model (old tokens stay so) */
    post_ok("/api/v1/models/fraud/versions", global_pub, body, 201);
}

static void test_owners_and_token_validation(void **state)
{
    struct it_resp *r;

    (void)state;
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/owners", srv->admin_token,
                "{\"teams\":[\"nope\"]}");
    it_expect_error_field(srv, r, 400, "invalid_argument", "teams");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/owners", risk_pub, "{\"teams\":[\"ads\"]}");
    it_expect_error(srv, r, 403, "forbidden");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/tokens", srv->admin_token,
                "{\"name\":\"t1\",\"roles\":[\"publisher\"],\"teams\":[\"nope\"]}");
    it_expect_error_field(srv, r, 400, "invalid_argument", "teams");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/tokens", srv->admin_token,
                "{\"name\":\"t2\",\"roles\":[\"admin\"],\"teams\":[\"risk\"]}");
    it_expect_error_field(srv, r, 400, "invalid_argument", "teams");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/tokens", srv->admin_token,
                "{\"name\":\"t3\",\"roles\":[\"deployer\"],\"aliases\":[\"Prod\"]}");
    it_expect_error_field(srv, r, 400, "invalid_argument", "aliases");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"risk\"}");
    it_expect_error(srv, r, 409, "conflict");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"-bad\"}");
    it_expect_error_field(srv, r, 400, "invalid_argument", "name");
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/tokens", srv->admin_token);
    it_expect_status(srv, r, 200);
    assert_non_null(strstr(r->body, "\"teams\":[\"risk\"]"));
    assert_non_null(strstr(r->body, "\"aliases\":[\"staging\",\"dev-*\"]"));
    it_resp_free(srv, &r);
}

static void test_alias_scoped_deployer(void **state)
{
    struct it_resp *r, *before, *after;

    (void)state;
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/aliases/staging", stage_dep, "{\"version\":1}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/aliases/dev-eu", stage_dep, "{\"version\":1}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    /* production: the admin sets it; the scoped token can never move it */
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/aliases/production", srv->admin_token,
                "{\"version\":1}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    before = it_get(srv, "/api/v1/models/fraud/aliases/production", srv->admin_token);
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/aliases/production", stage_dep,
                "{\"version\":2}");
    it_expect_error(srv, r, 403, "forbidden");
    assert_non_null(strstr(r->body, "staging, dev-*"));
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/promotions", stage_dep,
                "{\"model\":\"fraud\",\"version\":2,\"alias\":\"production\"}");
    it_expect_error(srv, r, 403, "forbidden");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/models/fraud/aliases/production/rollback", stage_dep,
                "{\"reason\":\"x\"}");
    it_expect_error(srv, r, 403, "forbidden");
    it_resp_free(srv, &r);
    r = it_request(srv, "DELETE", "/api/v1/models/fraud/aliases/production", stage_dep, NULL, NULL,
                   0);
    it_expect_error(srv, r, 403, "forbidden");
    it_resp_free(srv, &r);
    after = it_get(srv, "/api/v1/models/fraud/aliases/production", srv->admin_token);
    assert_int_equal(it_jint(before->json, "generation"), it_jint(after->json, "generation"));
    it_resp_free(srv, &before);
    it_resp_free(srv, &after);
}

static const char *promotion_state(const char *id, char *detail, size_t cap)
{
    static char state[64];
    struct it_resp *r = it_promotion_get(srv, srv->admin_token, id);
    json_t *g;
    size_t i;

    snprintf(state, sizeof(state), "%s", it_jstr(r->json, "state"));
    detail[0] = '\0';
    json_array_foreach(it_jarr(r->json, "gates"), i, g)
    {
        if (strcmp(json_string_value(json_object_get(g, "kind")), "approval") == 0 &&
            json_is_string(json_object_get(g, "detail")))
            snprintf(detail, cap, "%s", json_string_value(json_object_get(g, "detail")));
    }
    it_resp_free(srv, &r);
    return state;
}

static void test_approval_groups(void **state)
{
    char id[64], path[160], detail[256];
    struct it_resp *r;

    (void)state;
    /* reviewers from ml and risk both work on fraud: owned by both */
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/owners", srv->admin_token,
                "{\"teams\":[\"risk\",\"ml\"]}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/policies/gold", srv->admin_token,
                "{\"approvals\":{\"required\":2,\"groups\":[{\"team\":\"risk\",\"min\":1}]}}");
    it_expect_status(srv, r, 200);
    assert_non_null(strstr(r->body, "\"groups\":[{\"team\":\"risk\",\"min\":1}]"));
    it_resp_free(srv, &r);
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/policies/gold", srv->admin_token,
                "{\"approvals\":{\"required\":1,\"groups\":[{\"team\":\"risk\",\"min\":2}]}}");
    it_expect_error_field(srv, r, 400, "invalid_argument", "approvals.groups");
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/promotions", risk_dep,
                "{\"model\":\"fraud\",\"version\":2,\"alias\":\"gold\"}");
    it_expect_status(srv, r, 201);
    snprintf(id, sizeof(id), "%s", it_jstr(r->json, "id"));
    it_resp_free(srv, &r);
    for (int64_t d = it_deadline(10000);
         strcmp(promotion_state(id, detail, sizeof(detail)), "awaiting_approval") != 0;
         it_pause_ms(20))
        if (it_now_ms() > d)
            fail_msg("never awaited approval");
    snprintf(path, sizeof(path), "/api/v1/promotions/%s/approvals", id);
    post_ok(path, ml1, "{\"decision\":\"approve\",\"comment\":\"ok\"}", 200);
    post_ok(path, ml2, "{\"decision\":\"approve\",\"comment\":\"ok\"}", 200);
    assert_string_equal(promotion_state(id, detail, sizeof(detail)), "awaiting_approval");
    assert_non_null(strstr(detail, "risk: 0 of 1"));
    post_ok(path, risk_rev, "{\"decision\":\"approve\",\"comment\":\"risk ok\"}", 200);
    assert_string_not_equal(promotion_state(id, detail, sizeof(detail)), "awaiting_approval");
}

/* A model's owners are read once per model epoch (store/models.c): a change of owners
 * applies to the very next request, also for a token whose last request read the old ones. */
static void test_owners_change_applies_at_once(void **state)
{
    const char *v1 = "/api/v1/models/fraud/versions/1", *own = "/api/v1/models/fraud/owners";
    const char *patch = "{\"description\":\"owned\"}";

    (void)state;
    for (int round = 0; round < 3; round++) {
        expect("GET", v1, risk_pub, NULL, 200); /* reads the owners: risk */
        expect("GET", v1, risk_pub, NULL, 200);
        expect("PUT", own, srv->admin_token, "{\"teams\":[\"ads\"]}", 200);
        expect("PATCH", v1, risk_pub, patch, 403);
        expect("GET", v1, ads_ci, NULL, 200); /* reads the owners: ads */
        expect("PATCH", v1, ads_ci, patch, 200);
        expect("GET", v1, ads_ci, NULL, 200);
        expect("PUT", own, srv->admin_token, "{\"teams\":[\"risk\"]}", 200);
        expect("PATCH", v1, ads_ci, patch, 403);
        expect("PATCH", v1, risk_pub, patch, 200);
    }
}

static void test_read_scope_team(void **state)
{
    struct mg_server *t = it_server_start((const char *const[]){"--read-scope", "team", NULL});
    char *risk, *ads;
    struct it_resp *r;

    (void)state;
    r = it_jreq(t, "POST", "/api/v1/teams", t->admin_token, "{\"name\":\"risk\"}");
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/teams", t->admin_token, "{\"name\":\"ads\"}");
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/tokens", t->admin_token,
                "{\"name\":\"r\",\"roles\":[\"publisher\"],\"teams\":[\"risk\"]}");
    risk = strdup(it_jstr(r->json, "token"));
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/tokens", t->admin_token,
                "{\"name\":\"a\",\"roles\":[\"reader\"],\"teams\":[\"ads\"]}");
    ads = strdup(it_jstr(r->json, "token"));
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/models", risk, "{\"name\":\"fraud\"}");
    it_expect_status(t, r, 201);
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/models", t->admin_token, "{\"name\":\"public\"}");
    it_resp_free(t, &r);
    r = it_jreq(t, "PUT", "/api/v1/models/public/owners", t->admin_token, "{\"teams\":[\"ads\"]}");
    it_resp_free(t, &r);

    r = it_get(t, "/api/v1/models/fraud", ads);
    it_expect_error(t, r, 404, "not_found");
    it_resp_free(t, &r);
    r = it_get(t, "/api/v1/models/fraud/versions", ads);
    it_expect_error(t, r, 404, "not_found");
    it_resp_free(t, &r);
    r = it_get(t, "/api/v1/models", ads);
    it_expect_status(t, r, 200);
    assert_null(strstr(r->body, "\"fraud\""));
    assert_non_null(strstr(r->body, "\"public\""));
    it_resp_free(t, &r);
    r = it_get(t, "/api/v1/models/fraud", risk);
    it_expect_status(t, r, 200);
    it_resp_free(t, &r);
    r = it_get(t, "/api/v1/models", t->admin_token);
    assert_non_null(strstr(r->body, "\"fraud\""));
    it_resp_free(t, &r);
    free(risk);
    free(ads);
    it_server_free(&t);
}

/* Migration 006 on a database made before teams: old tokens keep working and are global. */
static void test_migration_keeps_old_tokens_global(void **state)
{
    struct mg_server *t;
    char *old, body[200], a[IT_DIGEST_LEN + 1];
    struct it_resp *r;

    (void)state;
    it_sqlite_only(); /* PostgreSQL databases start at the second release's schema */
    t = it_server_start(NULL);
    old = it_token_create(t, "old-pub", "publisher", NULL);
    r = it_upload(t, "old bytes", 9, a);
    it_resp_free(t, &r);
    it_server_stop(t);
    /* back to schema 5: what a database of the previous release looks like */
    assert_true(it_schema_back(t, 14) >= 1);
    assert_int_equal(it_sql_exec(t, "DROP TABLE teams; "
                                    "ALTER TABLE tokens DROP COLUMN teams; "
                                    "ALTER TABLE tokens DROP COLUMN aliases; "
                                    "ALTER TABLE models DROP COLUMN owners; "
                                    "ALTER TABLE promotion_approvals DROP COLUMN teams; "
                                    "DROP TABLE gateway_names; "
                                    "DROP TABLE replicas; DROP TABLE model_epochs; "
                                    "DROP TABLE signing_keys; "
                                    "DROP TABLE oci_manifests; DROP INDEX blob_files_sha256; "
                                    "ALTER TABLE outbox DROP COLUMN lease_owner; "
                                    "ALTER TABLE outbox DROP COLUMN lease_token; "
                                    "ALTER TABLE smoke_tests DROP COLUMN owner; "
                                    "ALTER TABLE smoke_tests DROP COLUMN lease_until; "
                                    "DROP TABLE blob_pins; DROP TABLE retention; "
                                    "DROP TABLE jobs; DROP INDEX versions_artifact; "
                                    "ALTER TABLE versions DROP COLUMN status; "
                                    "ALTER TABLE versions DROP COLUMN archived_at; "
                                    "ALTER TABLE versions DROP COLUMN archived_by; "
                                    "ALTER TABLE versions DROP COLUMN deleted_at; "
                                    "ALTER TABLE versions DROP COLUMN deleted_by; "
                                    "ALTER TABLE versions DROP COLUMN deletion_reason; "
                                    "ALTER TABLE blobs DROP COLUMN state; "
                                    "ALTER TABLE blobs DROP COLUMN last_used_ms; "
                                    "ALTER TABLE blobs DROP COLUMN gc_owner; "
                                    "ALTER TABLE blobs DROP COLUMN gc_at_ms; "
                                    "DROP TABLE dataset_parents; DROP TABLE datasets; "
                                    "CREATE TABLE datasets (digest TEXT PRIMARY KEY, "
                                    "name TEXT NOT NULL, uri TEXT, description TEXT, "
                                    "created_at TEXT NOT NULL, created_by TEXT NOT NULL) "
                                    "WITHOUT ROWID; "
                                    "CREATE TABLE dataset_parents (child TEXT NOT NULL "
                                    "REFERENCES datasets(digest), parent TEXT NOT NULL "
                                    "REFERENCES datasets(digest), PRIMARY KEY (child, parent)) "
                                    "WITHOUT ROWID; "
                                    "CREATE INDEX dataset_parents_parent ON "
                                    "dataset_parents(parent); "
                                    "ALTER TABLE blobs DROP COLUMN formats; "
                                    "ALTER TABLE blobs DROP COLUMN introspection; "
                                    "ALTER TABLE versions DROP COLUMN introspection; "
                                    "ALTER TABLE versions DROP COLUMN io_schema; "
                                    "ALTER TABLE aliases DROP COLUMN match_rules; "
                                    "ALTER TABLE aliases DROP COLUMN shadow; "
                                    "ALTER TABLE alias_history DROP COLUMN match_rules; "
                                    "ALTER TABLE alias_history DROP COLUMN shadow; "
                                    "ALTER TABLE promotions DROP COLUMN phase; "
                                    "DROP TABLE blob_uploads; "
                                    "DELETE FROM schema_migrations WHERE version >= 6;"),
                     9); /* migrations 6 to 14 (a database of the previous release) */
    it_server_restart(t);
    r = it_get(t, "/api/v1/whoami", old);
    it_expect_status(t, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "teams")), 0);
    it_resp_free(t, &r);
    /* a team and a model it owns: the old, global token still publishes there */
    r = it_jreq(t, "POST", "/api/v1/teams", t->admin_token, "{\"name\":\"risk\"}");
    it_expect_status(t, r, 201);
    it_resp_free(t, &r);
    r = it_jreq(t, "POST", "/api/v1/models", old, "{\"name\":\"legacy\"}");
    it_expect_status(t, r, 201);
    it_resp_free(t, &r);
    r = it_jreq(t, "PUT", "/api/v1/models/legacy/owners", t->admin_token, "{\"teams\":[\"risk\"]}");
    it_expect_status(t, r, 200);
    it_resp_free(t, &r);
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", a);
    r = it_jreq(t, "POST", "/api/v1/models/legacy/versions", old, body);
    it_expect_status(t, r, 201);
    it_resp_free(t, &r);
    r = it_get(t, "/api/v1/audit/verify", t->admin_token);
    assert_true(json_is_true(json_object_get(r->json, "ok")));
    it_resp_free(t, &r);
    free(old);
    it_server_free(&t);
}

/* Audit entries of a team token name its teams. */
static void test_audit_names_the_team(void **state)
{
    struct it_resp *r = it_get(srv, "/api/v1/audit?limit=1000", srv->admin_token);
    json_t *e;
    size_t i, seen = 0;

    (void)state;
    it_expect_status(srv, r, 200);
    json_array_foreach(it_jarr(r->json, "items"), i, e)
    {
        const char *actor = json_string_value(json_object_get(e, "actor"));
        json_t *teams = json_object_get(json_object_get(e, "detail"), "actor_teams");

        if (actor && strcmp(actor, "risk-pub") == 0) {
            assert_true(json_is_array(teams));
            assert_string_equal(json_string_value(json_array_get(teams, 0)), "risk");
            seen++;
        }
        if (actor && strcmp(actor, "global-pub") == 0)
            assert_null(teams);
    }
    assert_true(seen >= 2);
    it_resp_free(srv, &r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_owned_by_creating_team),
        cmocka_unit_test(test_bola_sweep),
        cmocka_unit_test(test_own_team_and_global_tokens_act),
        cmocka_unit_test(test_owners_and_token_validation),
        cmocka_unit_test(test_alias_scoped_deployer),
        cmocka_unit_test(test_approval_groups),
        cmocka_unit_test(test_owners_change_applies_at_once),
        cmocka_unit_test(test_read_scope_team),
        cmocka_unit_test(test_migration_keeps_old_tokens_global),
        cmocka_unit_test(test_audit_names_the_team),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
