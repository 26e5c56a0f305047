/*
 * release.c - see release.h. Facts come from store/, decisions from gates/,
 * and each decision is committed only if the state it was made on still
 * holds (MG_ECONFLICT from the store → read again, decide again). This file turns facts
 * into gate inputs and commits a change; aliases, promotions and the clock have files of
 * their own (release_aliases.c, release_promotions.c, release_timer.c).
 */
#include "release.h"
#include "release_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/util.h"
#include "../gates/policy.h"
#include "../gates/rollout.h"
#include "../gates/schema.h"
#include "../gates/vram.h"
#include "../artifact/sign.h"

/* ---- facts → gates inputs --------------------------------------------- */

/* History (facts JSON, newest first) as lkg entries; routes live in r, pinned versions in p. */
struct lkg_view {
    struct lkg_entry *e;
    struct promo_route *r;
    int64_t *p;
    size_t n;
    struct lkg_bad *bad;
    size_t nbad;
};

static void lkg_view_release(struct lkg_view *v)
{
    free(v->e);
    free(v->r);
    free(v->p);
    free(v->bad);
    memset(v, 0, sizeof(*v));
}

static bool lkg_view_init(struct lkg_view *v, const json_t *facts)
{
    json_t *hist = json_object_get(facts, "history"), *bad = json_object_get(facts, "bad"), *h;
    json_t *gone = json_object_get(facts, "unavailable");
    size_t i, nr = 0, np = 0, k = 0, q = 0, nbad = json_array_size(bad);

    memset(v, 0, sizeof(*v));
    json_array_foreach(hist, i, h)
    {
        nr += json_array_size(json_object_get(h, "routes"));
        np += json_array_size(json_object_get(h, "match"));
    }
    v->n = json_array_size(hist);
    v->e = calloc(v->n + 1, sizeof(*v->e));
    v->r = calloc(nr + 1, sizeof(*v->r));
    v->p = calloc(np + 1, sizeof(*v->p));
    /* An archived or deleted version counts as rolled back forever: it is never the LKG. */
    v->nbad = nbad + json_array_size(gone);
    v->bad = calloc(v->nbad + 1, sizeof(*v->bad));
    if (!v->e || !v->r || !v->p || !v->bad) {
        lkg_view_release(v);
        return false;
    }
    json_array_foreach(hist, i, h)
    {
        json_t *routes = json_object_get(h, "routes"), *match = json_object_get(h, "match");

        v->e[i].generation = json_integer_value(json_object_get(h, "generation"));
        v->e[i].kind = mg_lkg_kind(json_string_value(json_object_get(h, "kind")));
        mg_lkg_entry_routes(&v->e[i], routes, match, json_object_get(h, "shadow"), &v->r[k],
                            json_array_size(routes), &v->p[q], json_array_size(match));
        k += v->e[i].nroutes;
        q += v->e[i].npinned;
    }
    for (i = 0; i < nbad; i++) {
        json_t *b = json_array_get(bad, i);
        v->bad[i].version = json_integer_value(json_object_get(b, "version"));
        v->bad[i].generation = json_integer_value(json_object_get(b, "generation"));
    }
    for (i = nbad; i < v->nbad; i++) {
        v->bad[i].version = json_integer_value(json_array_get(gone, i - nbad));
        v->bad[i].generation = INT64_MAX;
    }
    return true;
}

/* The alias's LKG (excluding `exclude`); *entry gets its history entry. */
int64_t rel_facts_lkg(const json_t *facts, int64_t exclude, json_t **entry)
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

int64_t rel_facts_newest_routed(const json_t *facts)
{
    struct lkg_view v;
    int64_t ver;

    if (!lkg_view_init(&v, facts))
        return 0;
    ver = lkg_newest_routed(v.e, v.n);
    lkg_view_release(&v);
    return ver;
}

/* store_alias_facts_until's test: do the history entries read so far decide the alias's LKG,
 * its newest routed version and the LKG before that (gates/rollout.h lkg_history_decides)? */
static bool facts_decide(const json_t *facts, void *arg)
{
    struct lkg_view v;
    bool yes;

    (void)arg;
    if (!lkg_view_init(&v, facts))
        return false; /* out of memory: read on; the whole history decides */
    yes = lkg_history_decides(v.e, v.n, v.bad, v.nbad);
    lkg_view_release(&v);
    return yes;
}

enum mg_code rel_alias_facts(struct ctl *ctl, const char *model, const char *alias, json_t **out,
                             struct mg_error *err)
{
    return store_alias_facts_until(ctl->store, model, alias, facts_decide, NULL, out, err);
}

/* The policy of (model, alias), or the empty one. */
enum mg_code rel_load_policy(struct ctl *ctl, const char *model, const char *alias,
                             struct gate_policy *pol, json_t **snapshot, struct mg_error *err)
{
    json_t *j = NULL;
    enum mg_code rc = store_policy_get(ctl->store, model, alias, &j, err);

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
static enum gate_sig check_signature(struct ctl *ctl, const char *model, const json_t *ver,
                                     char *detail, size_t dlen)
{
    int64_t n = json_integer_value(json_object_get(ver, "version"));
    json_t *files = NULL, *f, *bundle_json = NULL;
    const char *hint;
    const struct sign_keyring *keys;
    const struct sign_key *key;
    struct sign_key other = {0};
    struct sign_resource *res = NULL;
    char *bundle = NULL;
    size_t len = 0, nres = 0, i;
    struct mg_error err;
    enum gate_sig out = GATE_SIG_INVALID;

    if (store_version_signature(ctl->store, model, n, &bundle, &len, &err) != MG_OK)
        return GATE_SIG_MISSING;
    bundle_json = json_loadb(bundle, len, 0, NULL);
    hint = json_string_value(json_object_get(
        json_object_get(json_object_get(bundle_json, "verificationMaterial"), "publicKey"),
        "hint"));
    keys = ctl->keys;
    key = hint && keys ? sign_keyring_by_hint(keys, hint) : NULL;
    if (key == NULL && hint && ctl->cfg->database) {
        /* Signed by another replica's key: published in the database. */
        char *pem = NULL;

        if (store_signing_key_by_hint(ctl->store, hint, &pem, &err) == MG_OK &&
            sign_key_from_public_pem(pem, strlen(pem), &other, &err) == MG_OK)
            key = &other;
        free(pem);
    }
    if (key == NULL) {
        snprintf(detail, dlen, "no published signing key matches the bundle's hint");
        goto out;
    }
    if (store_version_files(ctl->store, model, n, &files, &err) != MG_OK) {
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
    sign_key_release(&other);
    free(res);
    free(bundle);
    json_decref(files);
    json_decref(bundle_json);
    return out;
}

/* Approvals of a promotion (JSON) as gate_approvals, borrowing the strings. */

size_t rel_approvals_of(const json_t *list, struct gate_approval *a,
                        struct rel_approval_teams *teams, size_t max)
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
static enum gate_smoke smoke_state(struct ctl *ctl, const char *model, int64_t version,
                                   int64_t since_ms, bool need_gpu, char *detail, size_t dlen)
{
    json_t *t = NULL;
    struct mg_error err;
    const char *s, *reason;
    enum gate_smoke out = GATE_SMOKE_NONE;

    if (store_smoke_latest(ctl->store, model, version, since_ms, &t, &err) != MG_OK)
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

/* Whether the policy has a threshold on what serving costs (docs/contract.md "Quotas and cost"). */
static bool wants_serving(const struct gate_policy *pol)
{
    size_t i;

    for (i = 0; i < pol->nthresholds; i++) {
        if (strcmp(pol->thresholds[i].metric, GATE_METRIC_THROUGHPUT) == 0 ||
            strcmp(pol->thresholds[i].metric, GATE_METRIC_COST) == 0)
            return true;
    }
    return false;
}

/* What a version's latest passed smoke test measured of serving it; without one, the state of
 * its newest test since since_ms. *keep (NEW, the caller's to free) holds sv's strings. */
static void serving_of(struct ctl *ctl, const char *model, int64_t version, int64_t since_ms,
                       struct gate_serving *sv, json_t **keep)
{
    char detail[MG_ERR_MSG_MAX] = "";
    struct mg_error err;
    enum gate_smoke newest;
    json_t *v;

    memset(sv, 0, sizeof(*sv));
    *keep = NULL;
    /* The newest test's state first: a test that passes between the two reads is then found
     * by the second, never taken for passed without its measurements. */
    newest = smoke_state(ctl, model, version, since_ms, false, detail, sizeof(detail));
    if (store_smoke_latest_passed(ctl->store, model, version, keep, &err) != MG_OK) {
        sv->smoke = newest == GATE_SMOKE_PASSED ? GATE_SMOKE_RUNNING : newest;
        return;
    }
    sv->smoke = GATE_SMOKE_PASSED;
    sv->profile = json_string_value(json_object_get(*keep, "profile"));
    if (json_is_number(v = json_object_get(*keep, "throughput_rps"))) {
        sv->has_rps = true;
        sv->rps = json_number_value(v);
    }
    if (json_is_number(v = json_object_get(*keep, "cost_per_1k_requests"))) {
        sv->has_cost = true;
        sv->cost_per_1k = json_number_value(v);
    }
}

enum mg_code rel_evaluate(struct ctl *ctl, const char *model, const json_t *ver, int64_t baseline,
                          const struct gate_policy *pol, const json_t *approvals,
                          bool include_approvals, int64_t since_ms, json_t **report,
                          struct mg_error *err)
{
    char smokedetail[MG_ERR_MSG_MAX] = "";
    struct gate_input in;
    struct gate_approval appr[64];
    struct rel_approval_teams appr_teams[64];
    json_t *base = NULL, *digests = json_array(), *first = NULL, *d;
    json_t *cand_schema = NULL, *base_schema = NULL, *cand_smoke = NULL, *base_smoke = NULL;
    struct gate_serving cand_sv, base_sv;
    char sigdetail[MG_ERR_MSG_MAX] = "";
    size_t i;
    enum mg_code rc = MG_OK;

    memset(&in, 0, sizeof(in));
    in.policy = pol;
    in.candidate_metrics = json_object_get(ver, "metrics");
    if (baseline > 0 && (rc = store_version_get(ctl->store, model, baseline, &base, err)) != MG_OK)
        goto out;
    in.baseline_metrics = base ? json_object_get(base, "metrics") : NULL;
    in.baseline_version = baseline;
    if (pol->require_signature) {
        in.signature = check_signature(ctl, model, ver, sigdetail, sizeof(sigdetail));
        in.signature_detail = sigdetail[0] ? sigdetail : NULL;
    }
    in.image = json_string_value(json_object_get(ver, "image"));
    in.image_pinned = in.image && mg_valid_image_ref(in.image, strlen(in.image));
    json_array_foreach(json_object_get(ver, "datasets"), i, d)
        json_array_append(digests, json_object_get(d, "digest"));
    in.datasets_total = json_array_size(digests);
    if (pol->require_registered_datasets &&
        (rc = store_datasets_unregistered(ctl->store, model, digests, &in.datasets_unregistered,
                                          &first, err)) != MG_OK)
        goto out;
    in.first_unregistered = first ? json_string_value(first) : NULL;
    in.datasets_withdrawn = json_array_size(json_object_get(ver, "withdrawn_datasets"));
    in.first_withdrawn =
        json_string_value(json_array_get(json_object_get(ver, "withdrawn_datasets"), 0));
    /* resources when declared, else the weights and KV cache read from the artifact */
    in.has_vram = gate_version_vram_gib(ver, &in.vram_gib);
    if (pol->schema_compatible) {
        cand_schema = gate_version_schema(ver);
        base_schema = base ? gate_version_schema(base) : NULL;
        in.candidate_schema = cand_schema;
        in.baseline_schema = base_schema;
    }
    in.largest_gpu_gib = ctl_runner_largest_gpu_gib(ctl);
    if (pol->smoke_required) {
        in.smoke =
            smoke_state(ctl, model, json_integer_value(json_object_get(ver, "version")), since_ms,
                        pol->gpu == GATE_GPU_REQUIRED, smokedetail, sizeof(smokedetail));
        in.smoke_detail = smokedetail[0] ? smokedetail : NULL;
    }
    if (wants_serving(pol)) {
        serving_of(ctl, model, json_integer_value(json_object_get(ver, "version")), since_ms,
                   &cand_sv, &cand_smoke);
        in.candidate_serving = &cand_sv;
        if (baseline > 0) {
            serving_of(ctl, model, baseline, 0, &base_sv, &base_smoke);
            in.baseline_serving = &base_sv;
        }
    }
    in.scan = json_object_get(ver, "scan");
    in.approvals = appr;
    in.napprovals = approvals ? rel_approvals_of(approvals, appr, appr_teams, 64) : 0;
    *report = gate_evaluate(&in, include_approvals);
    if (*report == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(cand_smoke);
    json_decref(base_smoke);
    json_decref(cand_schema);
    json_decref(base_schema);
    json_decref(base);
    json_decref(digests);
    json_decref(first);
    return rc;
}

enum mg_code rel_alias_names(struct ctl *ctl, const char *model, const char *alias,
                             const struct mg_routes *r, json_t **names, struct mg_error *err)
{
    json_t *routes = mg_routes_json(r), *match = mg_match_json(r), *shadow = mg_shadow_json(r);
    enum mg_code rc;

    *names = NULL;
    if (routes == NULL || match == NULL || shadow == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    else
        rc = ctl_alias_names(ctl, model, alias, routes, match, shadow, names, err);
    json_decref(routes);
    json_decref(match);
    json_decref(shadow);
    return rc;
}

/* Commit an alias change (a may be NULL) with the gateway object names it uses, which the
 * store claims for the alias in the same transaction (ctl_alias_names). */
enum mg_code rel_commit_change(struct ctl *ctl, const char *actor, struct store_alias_change *a,
                               const struct store_promotion_change *pc, json_t **alias_out,
                               struct mg_error *err)
{
    json_t *names = NULL;
    enum mg_code rc;

    if (a != NULL) {
        if ((rc = rel_alias_names(ctl, a->model, a->alias, a->routes, &names, err)) != MG_OK)
            return rc;
        a->names = names;
    }
    rc = store_release_commit(ctl->store, actor, a, pc, alias_out, err);
    if (a != NULL)
        a->names = NULL;
    json_decref(names);
    return rc;
}
