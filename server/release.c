/*
 * release.c - see release.h. Facts come from store/, decisions from gates/,
 * and each decision is committed only if the state it was made on still
 * holds (MG_ECONFLICT from the store → read again, decide again).
 */
#include "release.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/util.h"
#include "../gates/policy.h"
#include "../gates/rollout.h"
#include "../gates/vram.h"
#include "../store/sign.h"
#include "push/push.h"
#include "runner/runner.h"

/* Attempts at a decision when others keep changing the same alias/promotion. */
#define RETRIES 5

/* ---- facts → gates inputs --------------------------------------------- */

/* History (facts JSON, newest first) as lkg entries; routes live in *rbuf. */
struct lkg_view {
    struct lkg_entry *e;
    struct promo_route *r;
    size_t n;
    struct lkg_bad *bad;
    size_t nbad;
};

static void lkg_view_release(struct lkg_view *v)
{
    free(v->e);
    free(v->r);
    free(v->bad);
    memset(v, 0, sizeof(*v));
}

static enum lkg_kind kind_of(const char *k)
{
    if (k == NULL)
        return LKG_SET;
    if (strcmp(k, "step") == 0)
        return LKG_STEP;
    if (strcmp(k, "promoted") == 0)
        return LKG_PROMOTED;
    if (strcmp(k, "rollback") == 0)
        return LKG_ROLLBACK;
    if (strcmp(k, "abort") == 0)
        return LKG_ABORT;
    if (strcmp(k, "delete") == 0)
        return LKG_DELETE;
    return LKG_SET;
}

static bool lkg_view_init(struct lkg_view *v, const json_t *facts)
{
    json_t *hist = json_object_get(facts, "history"), *bad = json_object_get(facts, "bad"), *h;
    size_t i, j, nr = 0, k = 0;

    memset(v, 0, sizeof(*v));
    json_array_foreach(hist, i, h) nr += json_array_size(json_object_get(h, "routes"));
    v->n = json_array_size(hist);
    v->e = calloc(v->n + 1, sizeof(*v->e));
    v->r = calloc(nr + 1, sizeof(*v->r));
    v->nbad = json_array_size(bad);
    v->bad = calloc(v->nbad + 1, sizeof(*v->bad));
    if (!v->e || !v->r || !v->bad) {
        lkg_view_release(v);
        return false;
    }
    json_array_foreach(hist, i, h)
    {
        json_t *routes = json_object_get(h, "routes"), *r;
        v->e[i].generation = json_integer_value(json_object_get(h, "generation"));
        v->e[i].kind = kind_of(json_string_value(json_object_get(h, "kind")));
        v->e[i].routes = &v->r[k];
        v->e[i].nroutes = json_array_size(routes);
        json_array_foreach(routes, j, r)
        {
            v->r[k].version = json_integer_value(json_object_get(r, "version"));
            v->r[k].weight = (int)json_integer_value(json_object_get(r, "weight"));
            k++;
        }
    }
    for (i = 0; i < v->nbad; i++) {
        json_t *b = json_array_get(bad, i);
        v->bad[i].version = json_integer_value(json_object_get(b, "version"));
        v->bad[i].generation = json_integer_value(json_object_get(b, "generation"));
    }
    return true;
}

/* The alias's LKG (excluding `exclude`); *entry gets its history entry. */
static int64_t facts_lkg(const json_t *facts, int64_t exclude, json_t **entry)
{
    struct lkg_view v;
    size_t idx = 0;
    int64_t ver;

    if (!lkg_view_init(&v, facts))
        return 0;
    ver = lkg_select(v.e, v.n, v.bad, v.nbad, exclude, &idx);
    if (ver && entry)
        *entry = json_array_get(json_object_get(facts, "history"), idx);
    lkg_view_release(&v);
    return ver;
}

static int64_t facts_newest_routed(const json_t *facts)
{
    struct lkg_view v;
    int64_t ver;

    if (!lkg_view_init(&v, facts))
        return 0;
    ver = lkg_newest_routed(v.e, v.n);
    lkg_view_release(&v);
    return ver;
}

/* The policy of (model, alias), or the empty one. */
static enum mg_code load_policy(struct srv *srv, const char *model, const char *alias,
                                struct gate_policy *pol, json_t **snapshot, struct mg_error *err)
{
    json_t *j = NULL;
    enum mg_code rc = store_policy_get(srv->store, model, alias, &j, err);

    if (rc == MG_ENOTFOUND) {
        gate_policy_empty(pol);
        mg_error_clear(err);
    } else if (rc != MG_OK) {
        return rc;
    } else if ((rc = gate_policy_parse(j, pol, err)) != MG_OK) {
        json_decref(j);
        return rc;
    }
    json_decref(j);
    if (snapshot)
        *snapshot = gate_policy_to_json(pol);
    return MG_OK;
}

/* Verify a version's stored bundle against its published key and manifest. */
static enum gate_sig check_signature(struct srv *srv, const char *model, const json_t *ver,
                                     char *detail, size_t dlen)
{
    int64_t n = json_integer_value(json_object_get(ver, "version"));
    json_t *files = NULL, *f, *bundle_json = NULL;
    const char *hint;
    const struct sign_key *key;
    struct sign_resource *res = NULL;
    char *bundle = NULL;
    size_t len = 0, nres = 0, i;
    struct mg_error err;
    enum gate_sig out = GATE_SIG_INVALID;

    if (store_version_signature(srv->store, model, n, &bundle, &len, &err) != MG_OK)
        return GATE_SIG_MISSING;
    bundle_json = json_loadb(bundle, len, 0, NULL);
    hint = json_string_value(json_object_get(
        json_object_get(json_object_get(bundle_json, "verificationMaterial"), "publicKey"),
        "hint"));
    key = hint && srv->keys ? sign_keyring_by_hint(srv->keys, hint) : NULL;
    if (key == NULL) {
        snprintf(detail, dlen, "no published signing key matches the bundle's hint");
        goto out;
    }
    if (store_version_files(srv->store, model, n, &files, &err) != MG_OK) {
        snprintf(detail, dlen, "%s", err.message);
        goto out;
    }
    nres = json_array_size(json_object_get(files, "items"));
    res = calloc(nres ? nres : 1, sizeof(*res));
    if (res == NULL)
        goto out;
    if (nres == 0 && json_is_null(json_object_get(json_object_get(ver, "artifact"), "files"))) {
        const char *d =
            json_string_value(json_object_get(json_object_get(ver, "artifact"), "digest"));
        res[0].name = ".";
        mg_hex_decode(d + 7, 32, res[0].digest);
        nres = 1;
    } else {
        json_array_foreach(json_object_get(files, "items"), i, f)
        {
            res[i].name = json_string_value(json_object_get(f, "path"));
            mg_hex_decode(json_string_value(json_object_get(f, "digest")) + 7, 32, res[i].digest);
        }
    }
    if (sign_bundle_verify(bundle, len, key, res, nres, NULL, &err) == MG_OK)
        out = GATE_SIG_VALID;
    else
        snprintf(detail, dlen, "%s", err.message);
out:
    free(res);
    free(bundle);
    json_decref(files);
    json_decref(bundle_json);
    return out;
}

/* Approvals of a promotion (JSON) as gate_approvals, borrowing the strings. */
/* Each approval's teams, as pointers into the JSON list (BORROWED from it). */
struct approval_teams {
    const char *v[STORE_MAX_SCOPES];
};

static size_t approvals_of(const json_t *list, struct gate_approval *a,
                           struct approval_teams *teams, size_t max)
{
    json_t *x, *t;
    size_t i, k, n = 0;

    json_array_foreach(list, i, x)
    {
        if (n == max)
            break;
        a[n].by = json_string_value(json_object_get(x, "by"));
        a[n].approve = strcmp(json_string_value(json_object_get(x, "decision")), "approve") == 0;
        a[n].teams = teams[n].v;
        a[n].nteams = 0;
        json_array_foreach(json_object_get(x, "teams"), k, t)
        {
            if (a[n].nteams < STORE_MAX_SCOPES && json_is_string(t))
                teams[n].v[a[n].nteams++] = json_string_value(t);
        }
        n++;
    }
    return n;
}

/*
 * Evaluate the gates of `pol` for version `ver` of `model` against baseline
 * version `baseline` (0 for none). approvals (may be NULL) feed the approval
 * gate when include_approvals.
 */
/* The smoke gate's view of the newest test since since_ms. */
static enum gate_smoke smoke_state(struct srv *srv, const char *model, int64_t version,
                                   int64_t since_ms, bool need_gpu, char *detail, size_t dlen)
{
    json_t *t = NULL;
    struct mg_error err;
    const char *s, *reason;
    enum gate_smoke out = GATE_SMOKE_NONE;

    if (store_smoke_latest(srv->store, model, version, since_ms, &t, &err) != MG_OK)
        return GATE_SMOKE_NONE;
    s = json_string_value(json_object_get(t, "state"));
    reason = json_string_value(json_object_get(t, "reason"));
    if (s && strcmp(s, "queued") == 0)
        out = GATE_SMOKE_QUEUED;
    else if (s && strcmp(s, "running") == 0)
        out = GATE_SMOKE_RUNNING;
    else if (s && strcmp(s, "passed") == 0)
        out = GATE_SMOKE_PASSED;
    else
        out = GATE_SMOKE_FAILED; /* failed, or error (unknown profile, …) */
    if (out == GATE_SMOKE_PASSED && need_gpu && json_is_null(json_object_get(t, "gpu"))) {
        out = GATE_SMOKE_FAILED;
        reason = "it ran without a GPU and the policy requires one";
    }
    snprintf(detail, dlen, "test %s%s%s", json_string_value(json_object_get(t, "id")),
             reason ? ": " : "", reason ? reason : "");
    json_decref(t);
    return out;
}

static enum mg_code evaluate(struct srv *srv, const char *model, const json_t *ver,
                             int64_t baseline, const struct gate_policy *pol,
                             const json_t *approvals, bool include_approvals, int64_t since_ms,
                             json_t **report, struct mg_error *err)
{
    char smokedetail[MG_ERR_MSG_MAX] = "";
    struct gate_input in;
    struct gate_approval appr[64];
    struct approval_teams appr_teams[64];
    json_t *base = NULL, *digests = json_array(), *first = NULL, *d;
    json_t *res = json_object_get(ver, "resources");
    char sigdetail[MG_ERR_MSG_MAX] = "";
    size_t i;
    enum mg_code rc = MG_OK;

    memset(&in, 0, sizeof(in));
    in.policy = pol;
    in.candidate_metrics = json_object_get(ver, "metrics");
    if (baseline > 0 && (rc = store_version_get(srv->store, model, baseline, &base, err)) != MG_OK)
        goto out;
    in.baseline_metrics = base ? json_object_get(base, "metrics") : NULL;
    in.baseline_version = baseline;
    if (pol->require_signature) {
        in.signature = check_signature(srv, model, ver, sigdetail, sizeof(sigdetail));
        in.signature_detail = sigdetail[0] ? sigdetail : NULL;
    }
    in.image = json_string_value(json_object_get(ver, "image"));
    in.image_pinned = in.image && mg_valid_image_ref(in.image, strlen(in.image));
    json_array_foreach(json_object_get(ver, "datasets"), i, d)
        json_array_append(digests, json_object_get(d, "digest"));
    in.datasets_total = json_array_size(digests);
    if (pol->require_registered_datasets &&
        (rc = store_datasets_unregistered(srv->store, digests, &in.datasets_unregistered, &first,
                                          err)) != MG_OK)
        goto out;
    in.first_unregistered = first ? json_string_value(first) : NULL;
    in.has_vram = gate_estimated_vram_gib(json_integer_value(json_object_get(res, "parameters")),
                                          json_string_value(json_object_get(res, "precision")),
                                          &in.vram_gib) &&
                  json_is_integer(json_object_get(res, "parameters"));
    in.largest_gpu_gib = runner_largest_gpu_gib(srv);
    if (pol->smoke_required) {
        in.smoke =
            smoke_state(srv, model, json_integer_value(json_object_get(ver, "version")), since_ms,
                        pol->gpu == GATE_GPU_REQUIRED, smokedetail, sizeof(smokedetail));
        in.smoke_detail = smokedetail[0] ? smokedetail : NULL;
    }
    in.approvals = appr;
    in.napprovals = approvals ? approvals_of(approvals, appr, appr_teams, 64) : 0;
    *report = gate_evaluate(&in, include_approvals);
    if (*report == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(base);
    json_decref(digests);
    json_decref(first);
    return rc;
}

/* ---- aliases ---------------------------------------------------------- */

static void add_lkg(json_t *alias, const json_t *facts)
{
    json_t *entry = NULL;
    int64_t v = facts_lkg(facts, 0, &entry);

    if (v)
        json_object_set_new(alias, "last_known_good",
                            json_pack("{s:I, s:O}", "version", (json_int_t)v, "since",
                                      json_object_get(entry, "at")));
}

/* API.md "Routing strategies": the alias shows each gateway's names for it,
 * {"gateway_names":{"<gateway>":[…]}} (what push_alias_names lists and the store claims). */
static void add_gateway_names(struct srv *srv, const char *model, const char *alias, json_t *a)
{
    json_t *names = NULL, *by = json_object(), *n, *list;
    struct mg_error err;
    size_t i;

    if (by == NULL)
        return;
    if (push_alias_names(srv, model, alias, json_object_get(a, "routes"), &names, &err) == MG_OK) {
        json_array_foreach(names, i, n)
        {
            const char *gw = json_string_value(json_object_get(n, "gateway"));

            if (gw == NULL)
                continue;
            if ((list = json_object_get(by, gw)) == NULL) {
                list = json_array();
                json_object_set_new(by, gw, list);
            }
            json_array_append(list, json_object_get(n, "name"));
        }
    }
    json_decref(names);
    json_object_set_new(a, "gateway_names", by);
}

enum mg_code rel_alias_get(struct srv *srv, const char *model, const char *alias, json_t **out,
                           struct mg_error *err)
{
    json_t *a = NULL, *facts = NULL;

    if (store_alias_get(srv->store, model, alias, &a, err) != MG_OK)
        return err->code;
    if (store_alias_facts(srv->store, model, alias, &facts, err) != MG_OK) {
        json_decref(a);
        return err->code;
    }
    add_lkg(a, facts);
    json_decref(facts);
    add_gateway_names(srv, model, alias, a);
    *out = a;
    return MG_OK;
}

enum mg_code rel_alias_list(struct srv *srv, const char *model, json_t **out, struct mg_error *err)
{
    json_t *list = NULL, *a;
    size_t i;

    if (store_alias_list(srv->store, model, &list, err) != MG_OK)
        return err->code;
    json_array_foreach(json_object_get(list, "items"), i, a)
    {
        json_t *facts = NULL;
        if (store_alias_facts(srv->store, model, json_string_value(json_object_get(a, "alias")),
                              &facts, err) == MG_OK)
            add_lkg(a, facts);
        json_decref(facts);
    }
    *out = list;
    return MG_OK;
}

/* Commit an alias change (a may be NULL) with the gateway object names it uses, which the
 * store claims for the alias in the same transaction (push_alias_names). */
static enum mg_code commit_change(struct srv *srv, const char *actor, struct store_alias_change *a,
                                  const struct store_promotion_change *pc, struct mg_error *err)
{
    json_t *names = NULL;
    enum mg_code rc;

    if (a != NULL) {
        if ((rc = push_alias_names(srv, a->model, a->alias, a->routes, &names, err)) != MG_OK)
            return rc;
        a->names = names;
    }
    rc = store_release_commit(srv->store, actor, a, pc, NULL, err);
    if (a != NULL)
        a->names = NULL;
    json_decref(names);
    return rc;
}

/* Read facts, commit a direct change; again when the alias changed meanwhile. */
static enum mg_code alias_change(struct srv *srv, const char *actor, const char *model,
                                 const char *alias, const char *kind, const json_t *routes,
                                 json_t **out, struct mg_error *err)
{
    struct store_alias_change a;
    json_t *facts = NULL;
    enum mg_code rc = MG_ESTALE;
    int attempt;

    for (attempt = 0; attempt < RETRIES && rc == MG_ESTALE; attempt++) {
        json_decref(facts);
        facts = NULL;
        if ((rc = store_alias_facts(srv->store, model, alias, &facts, err)) != MG_OK)
            break;
        if (strcmp(kind, "delete") == 0 && !json_is_true(json_object_get(facts, "exists"))) {
            rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has no alias '%s'", model, alias);
            break;
        }
        memset(&a, 0, sizeof(a));
        a.model = model;
        a.alias = alias;
        a.expected_generation = json_integer_value(json_object_get(facts, "generation"));
        a.routes = routes;
        a.kind = kind;
        a.require_unprotected = true;
        rc = commit_change(srv, actor, &a, NULL, err);
    }
    if (rc == MG_OK)
        push_kick(srv);
    if (rc == MG_OK && out)
        rc = rel_alias_get(srv, model, alias, out, err);
    json_decref(facts);
    return rc;
}

enum mg_code rel_alias_set(struct srv *srv, const char *actor, const char *model, const char *alias,
                           const json_t *routes, json_t **out, struct mg_error *err)
{
    return alias_change(srv, actor, model, alias, "set", routes, out, err);
}

enum mg_code rel_alias_delete(struct srv *srv, const char *actor, const char *model,
                              const char *alias, struct mg_error *err)
{
    json_t *empty = json_array();
    enum mg_code rc = alias_change(srv, actor, model, alias, "delete", empty, NULL, err);

    json_decref(empty);
    return rc;
}

enum mg_code rel_lkg(struct srv *srv, const char *model, const char *alias, json_t **out,
                     struct mg_error *err)
{
    json_t *facts = NULL, *entry = NULL, *ver = NULL;
    int64_t v;
    char url[256];
    enum mg_code rc;

    if ((rc = store_alias_facts(srv->store, model, alias, &facts, err)) != MG_OK)
        return rc;
    v = facts_lkg(facts, 0, &entry);
    if (v == 0) {
        rc = mg_fail(err, MG_ENOLKG, NULL,
                     "alias '%s' of model '%s' has no last-known-good version yet", alias, model);
        goto out;
    }
    if ((rc = store_version_brief(srv->store, model, v, &ver, err)) != MG_OK)
        goto out;
    snprintf(url, sizeof(url), "/api/v1/models/%s/versions/%lld/signature", model, (long long)v);
    *out =
        json_pack("{s:s, s:s, s:I, s:O, s:O, s:s, s:O, s:O}", "model", model, "alias", alias,
                  "version", (json_int_t)v, "artifact", json_object_get(ver, "artifact"), "image",
                  json_object_get(ver, "image"), "signature_url", url, "since",
                  json_object_get(entry, "at"), "generation", json_object_get(entry, "generation"));
    if (*out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(ver);
    json_decref(facts);
    return rc;
}

/* ---- promotions ------------------------------------------------------- */

/* The promo struct of a stored promotion. */
static enum mg_code promo_of(const json_t *p, struct promo *out, struct gate_policy *pol,
                             struct mg_error *err)
{
    json_t *ro = json_object_get(p, "rollout"), *b = json_object_get(p, "baseline_version");

    if (gate_policy_parse(json_object_get(p, "policy"), pol, err) != MG_OK) {
        char why[MG_ERR_MSG_MAX]; /* mg_fail writes err: never format it into itself */
        snprintf(why, sizeof(why), "%s", err->message);
        return mg_fail(err, MG_EDB, NULL, "stored policy snapshot is invalid: %s", why);
    }
    promo_init(out, pol, json_integer_value(json_object_get(p, "version")),
               json_is_integer(b) ? json_integer_value(b) : 0);
    if (!promo_state_parse(json_string_value(json_object_get(p, "state")), &out->state))
        return mg_fail(err, MG_EDB, NULL, "stored promotion state is invalid");
    out->step_index = (int)json_integer_value(json_object_get(ro, "step_index"));
    out->weight = (int)json_integer_value(json_object_get(ro, "weight"));
    out->next_step_at = json_integer_value(json_object_get(p, "_next_step_at_ms"));
    return MG_OK;
}

static json_t *routes_json(const struct promo_actions *a)
{
    json_t *r = json_array();
    size_t i;

    for (i = 0; r && i < a->nroutes; i++)
        json_array_append_new(r,
                              json_pack("{s:I, s:i}", "version", (json_int_t)a->routes[i].version,
                                        "weight", a->routes[i].weight));
    return r;
}

static const char *alias_kind(const struct promo *next, const struct promo_actions *a)
{
    if (a->restore)
        return next->state == PROMO_ROLLED_BACK ? "rollback" : "abort";
    return next->state == PROMO_SUCCEEDED ? "promoted" : "step";
}

static void strip_internal(json_t *p)
{
    json_object_del(p, "_rev");
    json_object_del(p, "_next_step_at_ms");
}

static void new_id(char out[24])
{
    uint8_t rnd[8];

    mg_random_bytes(rnd, sizeof(rnd));
    memcpy(out, "prm_", 4);
    mg_hex_encode(rnd, sizeof(rnd), out + 4);
}

enum mg_code rel_promotion_create(struct srv *srv, const char *actor, const char *model,
                                  int64_t version, const char *alias, const char *reason,
                                  json_t **out, struct mg_error *err)
{
    struct gate_policy pol;
    struct promo cur, next;
    struct promo_actions acts;
    struct promo_event ev = {0};
    struct store_alias_change a;
    json_t *ver = NULL, *facts = NULL, *snapshot = NULL, *report = NULL, *rec = NULL;
    json_t *routes = NULL, *names = NULL;
    int64_t baseline;
    char id[24];
    enum mg_code rc;

    if ((rc = store_version_get(srv->store, model, version, &ver, err)) != MG_OK)
        goto out;
    if ((rc = store_alias_facts(srv->store, model, alias, &facts, err)) != MG_OK)
        goto out;
    if (!json_is_null(json_object_get(facts, "promotion"))) {
        rc = mg_fail(err, MG_EINPROGRESS, NULL,
                     "alias '%s' already has promotion %s in progress; wait for it or abort it",
                     alias, json_string_value(json_object_get(facts, "promotion")));
        goto out;
    }
    baseline = facts_lkg(facts, 0, NULL);
    if (baseline == version) {
        rc = mg_fail(err, MG_ECONFLICT, "version",
                     "version %lld is already the last-known-good of alias '%s'",
                     (long long)version, alias);
        goto out;
    }
    if ((rc = load_policy(srv, model, alias, &pol, &snapshot, err)) != MG_OK)
        goto out;
    if ((rc = evaluate(srv, model, ver, baseline, &pol, NULL, false, mg_now_ms(), &report, err)) !=
        MG_OK)
        goto out;
    promo_init(&cur, &pol, version, baseline);
    ev.kind = PROMO_EV_GATES;
    ev.gates_pending = json_is_true(json_object_get(report, "pending"));
    ev.gates_failed = !ev.gates_pending && !json_is_true(json_object_get(report, "passed"));
    if ((rc = promo_step(&cur, &ev, mg_now_ms(), &next, &acts, err)) != MG_OK)
        goto out;
    new_id(id);
    rec = json_pack("{s:s, s:s, s:s, s:I, s:o, s:s, s:s?, s:O, s:O, s:i, s:i, s:I}", "id", id,
                    "model", model, "alias", alias, "version", (json_int_t)version,
                    "baseline_version", baseline ? json_integer(baseline) : json_null(), "state",
                    promo_state_name(next.state), "reason", reason, "policy", snapshot, "gates",
                    json_object_get(report, "gates"), "step_index", next.step_index, "weight",
                    next.weight, "next_step_at_ms", (json_int_t)next.next_step_at);
    if (rec == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* The runner tests every candidate before its first step; the test is queued in the
     * promotion's own transaction. */
    if (pol.smoke_required || json_object_get(json_object_get(ver, "smoke"), "profile"))
        json_object_set_new(rec, "_smoke_gpu",
                            json_string(pol.gpu == GATE_GPU_REQUIRED    ? "required"
                                        : pol.gpu == GATE_GPU_PREFERRED ? "preferred"
                                                                        : "none"));
    if (acts.set_routes) {
        routes = routes_json(&acts);
        memset(&a, 0, sizeof(a));
        a.model = model;
        a.alias = alias;
        a.expected_generation = json_integer_value(json_object_get(facts, "generation"));
        a.routes = routes;
        a.kind = alias_kind(&next, &acts);
        a.reason = reason;
        a.promotion = id;
    }
    if (acts.set_routes &&
        (rc = push_alias_names(srv, model, alias, a.routes, &names, err)) != MG_OK)
        goto out;
    a.names = names;
    rc = store_promotion_create(srv->store, actor, rec, acts.event[0] ? acts.event : "created",
                                acts.detail, acts.set_routes ? &a : NULL, out, err);
    if (rc == MG_OK) {
        srv_crash_point(srv, "promotion-created");
        strip_internal(*out);
        rel_timer_kick(srv);
        push_kick(srv);
        runner_kick(srv);
    }
out:
    json_decref(ver);
    json_decref(facts);
    json_decref(snapshot);
    json_decref(report);
    json_decref(rec);
    json_decref(routes);
    json_decref(names);
    return rc;
}

/*
 * Apply one event to a stored promotion: read it, decide, commit — again if
 * the promotion or its alias changed meanwhile. `decide` fills the event
 * (and may refuse); approval_* are recorded with the change.
 */
struct decision {
    struct promo_event ev;
    const char *approval_by, *approval_decision, *approval_comment;
    json_t *approval_teams;          /* the decider's teams (approval groups), BORROWED, or NULL */
    const char *approval_teams_text; /* the same as JSON text, for the store */
    bool refresh_gates;              /* re-evaluate the gates for the stored report */
};

/* d's reviewer decision against promotion p as stored now (version ver):
 * separation of duties, then the tally with this decision added. Done on
 * every attempt, so a decision that lost a race is counted against the
 * approvals that won it. */
static enum mg_code tally_decision(const json_t *p, const json_t *ver,
                                   const struct gate_policy *pol, struct decision *d,
                                   struct mg_error *err)
{
    struct gate_approval all[65];
    struct approval_teams all_teams[65];
    size_t n = approvals_of(json_object_get(p, "approvals"), all, all_teams, 64), i, ncontrib;
    const json_t *history = json_object_get(ver, "metrics_history"); /* BORROWED */
    const char **contrib;
    int approved;
    enum mg_code rc;

    /* Whoever appended a metric could have made the version pass: no approving it. */
    ncontrib = json_array_size(history);
    contrib = calloc(ncontrib ? ncontrib : 1, sizeof(*contrib));
    if (contrib == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    for (i = 0; i < ncontrib; i++)
        contrib[i] = json_string_value(json_object_get(json_array_get(history, i), "by"));
    rc = gate_approval_check(d->approval_by, json_string_value(json_object_get(ver, "created_by")),
                             contrib, ncontrib, json_string_value(json_object_get(p, "created_by")),
                             all, n, err);
    free(contrib);
    if (rc != MG_OK)
        return rc;
    all[n].by = d->approval_by;
    all[n].approve = strcmp(d->approval_decision, "approve") == 0;
    all[n].teams = all_teams[n].v;
    all[n].nteams = 0;
    for (i = 0; i < json_array_size(d->approval_teams) && i < STORE_MAX_SCOPES; i++)
        all_teams[n].v[all[n].nteams++] = json_string_value(json_array_get(d->approval_teams, i));
    gate_approval_tally(pol, all, n + 1, &d->ev.rejected, &d->ev.satisfied, &approved);
    return MG_OK;
}

static enum mg_code apply_event(struct srv *srv, const char *actor, const char *id,
                                struct decision *d, json_t **out, struct mg_error *err)
{
    enum mg_code rc = MG_ESTALE;
    int attempt;

    for (attempt = 0; attempt < RETRIES && rc == MG_ESTALE; attempt++) {
        struct gate_policy pol;
        struct promo cur, next;
        struct promo_actions acts;
        struct store_promotion_change pc;
        struct store_alias_change a;
        json_t *p = NULL, *facts = NULL, *routes = NULL, *report = NULL, *ver = NULL;
        const char *model, *alias;

        if ((rc = store_promotion_get(srv->store, id, &p, err)) != MG_OK)
            return rc;
        model = json_string_value(json_object_get(p, "model"));
        alias = json_string_value(json_object_get(p, "alias"));
        if ((rc = promo_of(p, &cur, &pol, err)) != MG_OK)
            goto next;
        if (d->refresh_gates) {
            json_t *appr = json_deep_copy(json_object_get(p, "approvals"));
            int64_t since = 0;
            mg_time_parse(json_string_value(json_object_get(p, "created_at")), &since);
            if (d->approval_by)
                json_array_append_new(
                    appr,
                    json_pack("{s:s, s:s, s:o}", "by", d->approval_by, "decision",
                              d->approval_decision, "teams",
                              d->approval_teams ? json_incref(d->approval_teams) : json_array()));
            rc = store_version_get(srv->store, model, cur.candidate, &ver, err);
            if (rc == MG_OK && d->approval_by)
                rc = tally_decision(p, ver, &pol, d, err);
            if (rc == MG_OK)
                rc = evaluate(srv, model, ver, cur.baseline, &pol, appr,
                              cur.state != PROMO_EVALUATING, since, &report, err);
            json_decref(appr);
            if (rc != MG_OK)
                goto next;
            if (d->ev.kind == PROMO_EV_GATES) {
                d->ev.gates_pending = json_is_true(json_object_get(report, "pending"));
                d->ev.gates_failed =
                    !d->ev.gates_pending && !json_is_true(json_object_get(report, "passed"));
            }
        }
        if ((rc = promo_step(&cur, &d->ev, mg_now_ms(), &next, &acts, err)) != MG_OK)
            goto next;
        if ((d->ev.kind == PROMO_EV_TICK && !acts.set_routes && !acts.event[0]) ||
            (d->ev.kind == PROMO_EV_GATES && next.state == cur.state)) {
            rc = MG_OK; /* nothing due, or still waiting: no event to record */
            goto next;
        }
        memset(&pc, 0, sizeof(pc));
        pc.id = id;
        pc.expected_rev = json_integer_value(json_object_get(p, "_rev"));
        pc.state = promo_state_name(next.state);
        pc.step_index = next.step_index;
        pc.weight = next.weight;
        pc.next_step_at = next.next_step_at;
        pc.gates = report ? json_object_get(report, "gates") : NULL;
        pc.event_type = acts.event[0] ? acts.event : NULL;
        pc.event_detail = acts.detail;
        if (pc.event_type == NULL && d->approval_by) {
            /* An approval that does not yet move the promotion is still news. */
            snprintf(acts.detail, sizeof(acts.detail), "%s %s%s%s", d->approval_by,
                     strcmp(d->approval_decision, "approve") == 0 ? "approved" : "rejected",
                     d->approval_comment ? ": " : "",
                     d->approval_comment ? d->approval_comment : "");
            pc.event_type = "approval";
        }
        pc.approval_by = d->approval_by;
        pc.approval_decision = d->approval_decision;
        pc.approval_comment = d->approval_comment;
        pc.approval_teams = d->approval_teams_text;
        if (acts.set_routes) {
            if ((rc = store_alias_facts(srv->store, model, alias, &facts, err)) != MG_OK)
                goto next;
            routes = routes_json(&acts);
            memset(&a, 0, sizeof(a));
            a.model = model;
            a.alias = alias;
            a.expected_generation = json_integer_value(json_object_get(facts, "generation"));
            a.routes = routes;
            a.kind = alias_kind(&next, &acts);
            a.reason = d->ev.reason;
            a.promotion = id;
            /* Restoring to nothing (no baseline): the alias goes back to empty. */
        }
        rc = commit_change(srv, actor, acts.set_routes ? &a : NULL, &pc, err);
    next:
        json_decref(p);
        json_decref(facts);
        json_decref(routes);
        json_decref(report);
        json_decref(ver);
    }
    if (rc == MG_OK && out) {
        rc = store_promotion_get(srv->store, id, out, err);
        if (rc == MG_OK)
            strip_internal(*out);
    }
    if (rc == MG_OK) {
        rel_timer_kick(srv);
        push_kick(srv);
    }
    return rc;
}

enum mg_code rel_promotion_decide(struct srv *srv, const struct store_principal *who,
                                  const char *id, bool approve, const char *comment, json_t **out,
                                  struct mg_error *err)
{
    struct decision d;
    json_t *teams = json_array();
    char *text = NULL;
    enum mg_code rc;
    size_t i;

    for (i = 0; teams != NULL && i < who->nteams; i++)
        json_array_append_new(teams, json_string(who->teams[i]));
    if (teams == NULL || (text = json_dumps(teams, JSON_COMPACT)) == NULL) {
        json_decref(teams);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    /* Separation of duties, the tally and the state are all checked against
     * the promotion as apply_event reads it, on every attempt. */
    memset(&d, 0, sizeof(d));
    d.ev.kind = PROMO_EV_APPROVALS;
    d.ev.reason = comment;
    d.approval_by = who->name;
    d.approval_decision = approve ? "approve" : "reject";
    d.approval_comment = comment;
    d.approval_teams = teams;
    d.approval_teams_text = text;
    d.refresh_gates = true;
    rc = apply_event(srv, who->name, id, &d, out, err);
    json_decref(teams);
    free(text);
    return rc;
}

enum mg_code rel_promotion_advance(struct srv *srv, const char *actor, const char *id, json_t **out,
                                   struct mg_error *err)
{
    struct decision d;

    memset(&d, 0, sizeof(d));
    d.ev.kind = PROMO_EV_ADVANCE;
    d.ev.reason = "advanced by a deployer";
    return apply_event(srv, actor, id, &d, out, err);
}

enum mg_code rel_promotion_abort(struct srv *srv, const char *actor, const char *id,
                                 const char *reason, json_t **out, struct mg_error *err)
{
    struct decision d;

    memset(&d, 0, sizeof(d));
    d.ev.kind = PROMO_EV_ABORT;
    d.ev.reason = reason;
    return apply_event(srv, actor, id, &d, out, err);
}

enum mg_code rel_promotion_get(struct srv *srv, const char *id, json_t **out, struct mg_error *err)
{
    enum mg_code rc = store_promotion_get(srv->store, id, out, err);

    if (rc == MG_OK)
        strip_internal(*out);
    return rc;
}

enum mg_code rel_rollback(struct srv *srv, const char *actor, const char *model, const char *alias,
                          const char *reason, json_t **out, struct mg_error *err)
{
    enum mg_code rc = MG_ESTALE;
    int attempt;

    for (attempt = 0; attempt < RETRIES && rc == MG_ESTALE; attempt++) {
        struct store_alias_change a;
        struct store_promotion_change pc;
        json_t *facts = NULL, *routes = NULL, *p = NULL;
        int64_t newest, target;
        bool has_promo = false;

        if ((rc = store_alias_facts(srv->store, model, alias, &facts, err)) != MG_OK)
            return rc;
        newest = facts_newest_routed(facts);
        target = facts_lkg(facts, newest, NULL);
        if (target == 0) {
            rc = mg_fail(err, MG_ENOKNOWNGOOD, NULL,
                         "alias '%s' has no known-good version other than v%lld to roll back to",
                         alias, (long long)newest);
            json_decref(facts);
            return rc;
        }
        routes = json_pack("[{s:I, s:i}]", "version", (json_int_t)target, "weight", 100);
        memset(&a, 0, sizeof(a));
        a.model = model;
        a.alias = alias;
        a.expected_generation = json_integer_value(json_object_get(facts, "generation"));
        a.routes = routes;
        a.kind = "rollback";
        a.reason = reason;
        a.mark_bad = newest;
        memset(&pc, 0, sizeof(pc));
        if (!json_is_null(json_object_get(facts, "promotion")) &&
            store_promotion_get(srv->store, json_string_value(json_object_get(facts, "promotion")),
                                &p, err) == MG_OK) {
            has_promo = true;
            a.promotion = json_string_value(json_object_get(p, "id"));
            pc.id = a.promotion;
            pc.expected_rev = json_integer_value(json_object_get(p, "_rev"));
            pc.state = "rolled_back";
            pc.step_index = (int)json_integer_value(
                json_object_get(json_object_get(p, "rollout"), "step_index"));
            pc.weight = 0;
            pc.next_step_at = 0;
            pc.event_type = "rolled_back";
            pc.event_detail = reason;
        }
        rc = commit_change(srv, actor, &a, has_promo ? &pc : NULL, err);
        json_decref(facts);
        json_decref(routes);
        json_decref(p);
    }
    if (rc == MG_OK) {
        rel_timer_kick(srv);
        push_kick(srv);
        rc = rel_alias_get(srv, model, alias, out, err);
    }
    return rc;
}

enum mg_code rel_gates_dry_run(struct srv *srv, const char *model, int64_t version,
                               const char *alias, json_t **out, struct mg_error *err)
{
    struct gate_policy pol;
    json_t *ver = NULL, *facts = NULL;
    enum mg_code rc;

    if ((rc = store_version_get(srv->store, model, version, &ver, err)) != MG_OK ||
        (rc = store_alias_facts(srv->store, model, alias, &facts, err)) != MG_OK ||
        (rc = load_policy(srv, model, alias, &pol, NULL, err)) != MG_OK)
        goto out;
    rc = evaluate(srv, model, ver, facts_lkg(facts, 0, NULL), &pol, NULL, true, 0, out, err);
out:
    json_decref(ver);
    json_decref(facts);
    return rc;
}

void rel_smoke_finished(struct srv *srv, const char *model, int64_t version, const char *state,
                        const char *reason)
{
    struct store_page page = {100, NULL};
    json_t *list = NULL, *p;
    struct mg_error err;
    size_t i;

    rel_timer_kick(srv); /* evaluating promotions look at the result */
    if (state == NULL || strcmp(state, "failed") != 0)
        return;
    if (store_promotion_list(srv->store, "rolling_out", model, NULL, &page, &list, &err) != MG_OK)
        return;
    json_array_foreach(json_object_get(list, "items"), i, p)
    {
        struct decision d;
        char why[MG_ERR_MSG_MAX];
        if (json_integer_value(json_object_get(p, "version")) != version)
            continue;
        snprintf(why, sizeof(why), "smoke test of v%lld failed: %s", (long long)version,
                 reason ? reason : "no reason given");
        memset(&d, 0, sizeof(d));
        d.ev.kind = PROMO_EV_SMOKE_FAILED;
        d.ev.reason = why;
        if (apply_event(srv, "modelgated", json_string_value(json_object_get(p, "id")), &d, NULL,
                        &err) != MG_OK)
            fprintf(stderr, "modelgated: automatic rollback of %s failed: %s\n",
                    json_string_value(json_object_get(p, "id")), err.message);
    }
    json_decref(list);
}

void rel_delivery_failed(struct srv *srv, const char *id, const char *gateway, const char *error)
{
    struct decision d;
    struct mg_error err;
    char why[MG_ERR_MSG_MAX];

    snprintf(why, sizeof(why), "gateway %s cannot apply the step: %.300s", gateway,
             error ? error : "delivery failed");
    memset(&d, 0, sizeof(d));
    d.ev.kind = PROMO_EV_DELIVERY_FAILED;
    d.ev.reason = why;
    /* Only a rolling-out promotion reacts; anything else is left alone. */
    {
        json_t *p = NULL;
        if (store_promotion_get(srv->store, id, &p, &err) != MG_OK)
            return;
        if (strcmp(json_string_value(json_object_get(p, "state")), "rolling_out") != 0) {
            json_decref(p);
            return;
        }
        json_decref(p);
    }
    if (apply_event(srv, "modelgated", id, &d, NULL, &err) != MG_OK)
        fprintf(stderr, "modelgated: automatic rollback of %s failed: %s\n", id, err.message);
}

/* ---- the clock -------------------------------------------------------- */

int64_t rel_tick(struct srv *srv, int64_t now_ms)
{
    json_t *pending = NULL, *id;
    struct mg_error err;
    struct decision d;
    size_t i;
    int64_t next;

    if (store_promotion_pending(srv->store, now_ms, &pending, &err) != MG_OK)
        return 0;
    json_array_foreach(json_object_get(pending, "due"), i, id)
    {
        memset(&d, 0, sizeof(d));
        d.ev.kind = PROMO_EV_TICK;
        d.ev.reason = "bake time elapsed";
        if (apply_event(srv, "modelgated", json_string_value(id), &d, NULL, &err) != MG_OK)
            fprintf(stderr, "modelgated: promotion %s: %s\n", json_string_value(id), err.message);
    }
    /* Evaluating promotions wait on gates (the smoke test): look again. */
    json_array_foreach(json_object_get(pending, "evaluating"), i, id)
    {
        memset(&d, 0, sizeof(d));
        d.ev.kind = PROMO_EV_GATES;
        d.ev.reason = "smoke test";
        d.refresh_gates = true;
        if (apply_event(srv, "modelgated", json_string_value(id), &d, NULL, &err) != MG_OK &&
            err.code != MG_ECONFLICT)
            fprintf(stderr, "modelgated: promotion %s: %s\n", json_string_value(id), err.message);
    }
    next = json_integer_value(json_object_get(pending, "next_at_ms"));
    json_decref(pending);
    return next;
}

struct rel_timer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    bool kicked;
};

static void *timer_main(void *arg)
{
    struct srv *srv = arg;
    struct rel_timer *t = srv->timer;

    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        int64_t now, next, wait_ms;
        struct timespec ts;

        t->kicked = false;
        pthread_mutex_unlock(&t->lock);
        now = mg_now_ms();
        next = rel_tick(srv, now);
        pthread_mutex_lock(&t->lock);
        if (t->stop || t->kicked)
            continue;
        /* Sleep until the next step is due, but at least once a second look
         * again (other replicas may have scheduled steps). */
        wait_ms = next > now ? next - now : 1000;
        if (wait_ms > 1000)
            wait_ms = 1000;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += wait_ms / 1000;
        ts.tv_nsec += (wait_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        while (!t->stop && !t->kicked &&
               pthread_cond_timedwait(&t->cond, &t->lock, &ts) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

enum mg_code rel_timer_start(struct srv *srv, struct mg_error *err)
{
    struct rel_timer *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    srv->timer = t;
    if (pthread_create(&t->thread, NULL, timer_main, srv) != 0) {
        srv->timer = NULL;
        pthread_mutex_destroy(&t->lock);
        pthread_cond_destroy(&t->cond);
        free(t);
        return mg_fail(err, MG_EIO, NULL, "cannot start the timer thread");
    }
    return MG_OK;
}

void rel_timer_kick(struct srv *srv)
{
    struct rel_timer *t = srv->timer;

    if (t == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    t->kicked = true;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

void rel_timer_stop(struct srv *srv)
{
    struct rel_timer *t = srv->timer;

    if (t == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    t->stop = true;
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
    free(t);
    srv->timer = NULL;
}
