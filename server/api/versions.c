/*
 * versions.c - /api/v1/models/{model}/versions: create, list with filters,
 * get, patch, append metrics, artifact bytes and the file manifest.
 */
#include "api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../gates/vram.h"
#include "../cache.h"
#include "../release.h"

static const char *const dataset_roles[] = {"train", "validation", "test", "eval", NULL};

static bool one_of(const char *s, const char *const *set)
{
    size_t i;

    for (i = 0; s && set[i]; i++) {
        if (strcmp(s, set[i]) == 0)
            return true;
    }
    return false;
}

static bool check_source(struct srv_req *r, const json_t *v)
{
    static const char *const allowed[] = {"repo", "commit", NULL};
    const char *s;

    if (!json_is_object(v)) {
        srv_fail(r, MG_EINVAL, "source", "'source' must be an object {\"repo\",\"commit\"}");
        return false;
    }
    return api_object(r, v, allowed) && api_string(r, v, "repo", "source.repo", false, 2048, &s) &&
           api_string(r, v, "commit", "source.commit", false, 128, &s);
}

static bool check_datasets(struct srv_req *r, const json_t *v)
{
    static const char *const allowed[] = {"digest", "name", "uri", "role", NULL};
    char field[64];
    const char *s;
    json_t *d;
    size_t i;

    if (!json_is_array(v) || json_array_size(v) > 256) {
        srv_fail(r, MG_EINVAL, "datasets", "'datasets' must be an array of at most 256 objects");
        return false;
    }
    json_array_foreach(v, i, d)
    {
        snprintf(field, sizeof(field), "datasets[%zu]", i);
        if (!json_is_object(d)) {
            srv_fail(r, MG_EINVAL, field, "%s must be an object", field);
            return false;
        }
        if (!api_object(r, d, allowed))
            return false;
        snprintf(field, sizeof(field), "datasets[%zu].digest", i);
        if (!api_string(r, d, "digest", field, true, 71, &s))
            return false;
        if (!mg_valid_digest(s, strlen(s))) {
            srv_fail(r, MG_EINVAL, field, "%s must be sha256: followed by 64 lowercase hex", field);
            return false;
        }
        snprintf(field, sizeof(field), "datasets[%zu].name", i);
        if (!api_string(r, d, "name", field, false, 256, &s))
            return false;
        snprintf(field, sizeof(field), "datasets[%zu].uri", i);
        if (!api_string(r, d, "uri", field, false, 2048, &s))
            return false;
        snprintf(field, sizeof(field), "datasets[%zu].role", i);
        if (!api_string(r, d, "role", field, true, 16, &s))
            return false;
        if (!one_of(s, dataset_roles)) {
            srv_fail(r, MG_EINVAL, field, "%s must be train, validation, test or eval", field);
            return false;
        }
    }
    return true;
}

static bool check_smoke(struct srv_req *r, const json_t *v)
{
    static const char *const allowed[] = {"profile", "max_p95_ms", NULL};
    const char *profile;
    json_t *p95;

    if (!json_is_object(v)) {
        srv_fail(r, MG_EINVAL, "smoke", "'smoke' must be an object {\"profile\",\"max_p95_ms\"}");
        return false;
    }
    if (!api_object(r, v, allowed) ||
        !api_string(r, v, "profile", "smoke.profile", false, 64, &profile))
        return false;
    if (profile && !mg_valid_gateway_name(profile, strlen(profile))) {
        srv_fail(r, MG_EINVAL, "smoke.profile",
                 "smoke.profile names a profile: ^[a-z0-9][a-z0-9_-]{0,62}$");
        return false;
    }
    p95 = json_object_get(v, "max_p95_ms");
    if (p95 && (!json_is_number(p95) || !isfinite(json_number_value(p95)) ||
                json_number_value(p95) <= 0)) {
        srv_fail(r, MG_EINVAL, "smoke.max_p95_ms", "smoke.max_p95_ms must be a positive number");
        return false;
    }
    return true;
}

static bool check_resources(struct srv_req *r, const json_t *v)
{
    static const char *const allowed[] = {"parameters", "precision", NULL};
    const char *prec;
    json_t *params;
    double b;

    if (!json_is_object(v)) {
        srv_fail(r, MG_EINVAL, "resources",
                 "'resources' must be an object {\"parameters\",\"precision\"}");
        return false;
    }
    if (!api_object(r, v, allowed) ||
        !api_string(r, v, "precision", "resources.precision", false, 8, &prec))
        return false;
    params = json_object_get(v, "parameters");
    if (params && (!json_is_integer(params) || json_integer_value(params) <= 0)) {
        srv_fail(r, MG_EINVAL, "resources.parameters",
                 "resources.parameters must be a positive integer");
        return false;
    }
    if (prec && !gate_precision_bytes(prec, &b)) {
        srv_fail(r, MG_EINVAL, "resources.precision",
                 "resources.precision must be fp32, fp16, bf16, int8 or int4");
        return false;
    }
    return true;
}

/* Validate a VersionCreate body. */
static bool check_create(struct srv_req *r, const json_t *b)
{
    static const char *const allowed[] = {"artifact", "image",     "run_id",      "source",
                                          "datasets", "metrics",   "params",      "tags",
                                          "smoke",    "resources", "description", NULL};
    const char *s;
    json_t *v;

    if (!api_object(r, b, allowed) || !api_string(r, b, "artifact", "artifact", true, 71, &s))
        return false;
    if (!mg_valid_digest(s, strlen(s))) {
        srv_fail(r, MG_EINVAL, "artifact", "artifact must be sha256: followed by 64 lowercase hex");
        return false;
    }
    if (!api_string(r, b, "image", "image", false, 512, &s))
        return false;
    if (s && !mg_valid_image_ref(s, strlen(s))) {
        srv_fail(r, MG_EINVAL, "image",
                 "image must be pinned by digest: <repository>[:tag]@sha256:<64 hex>");
        return false;
    }
    if (!api_string(r, b, "run_id", "run_id", false, 256, &s) ||
        !api_string(r, b, "description", "description", false, 16384, &s))
        return false;
    if ((v = json_object_get(b, "source")) && !json_is_null(v) && !check_source(r, v))
        return false;
    if ((v = json_object_get(b, "datasets")) && !check_datasets(r, v))
        return false;
    if ((v = json_object_get(b, "metrics")) && !api_metrics(r, v, "metrics"))
        return false;
    if ((v = json_object_get(b, "params")) && !json_is_object(v)) {
        srv_fail(r, MG_EINVAL, "params", "'params' must be an object");
        return false;
    }
    if ((v = json_object_get(b, "tags")) && !api_tags(r, v, "tags"))
        return false;
    if ((v = json_object_get(b, "smoke")) && !json_is_null(v) && !check_smoke(r, v))
        return false;
    if ((v = json_object_get(b, "resources")) && !json_is_null(v) && !check_resources(r, v))
        return false;
    return true;
}

/* Add derived fields: estimated_vram_gib when resources are given. */
static void decorate(json_t *v)
{
    json_t *res = json_object_get(v, "resources");
    json_t *p = json_object_get(res, "parameters");
    const char *prec = json_string_value(json_object_get(res, "precision"));
    double gib;

    if (json_is_integer(p) && gate_estimated_vram_gib(json_integer_value(p), prec, &gib))
        json_object_set_new(v, "estimated_vram_gib", json_real(round(gib * 1000.0) / 1000.0));
}

static void reply_version(struct srv_req *r, enum mg_code rc, unsigned status, json_t *v,
                          const struct mg_error *err)
{
    if (rc == MG_OK)
        decorate(v);
    api_reply_result(r, rc, status, v, err);
}

static void create(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!check_create(r, r->body))
        return;
    rc = store_version_create(r->srv->store, r->who.name, srv_param(r, "model"), r->body, &out,
                              &err);
    reply_version(r, rc, 201, out, &err);
}

/* ?metric=name<op>value */
static bool parse_metric_filter(struct srv_req *r, const char *q, struct store_version_filter *f,
                                char *name, size_t namesz)
{
    static const char *const ops[] = {">=", "<=", ">", "<", "=", NULL};
    size_t n = strcspn(q, "<>="), i;
    char *end;

    if (n == 0 || n >= namesz || !api_metric_name_ok(q, n))
        goto bad;
    memcpy(name, q, n);
    name[n] = '\0';
    for (i = 0; ops[i]; i++) {
        size_t ol = strlen(ops[i]);
        if (strncmp(q + n, ops[i], ol) == 0) {
            f->metric_op = ops[i];
            f->metric_value = strtod(q + n + ol, &end);
            if (end == q + n + ol || *end != '\0' || !isfinite(f->metric_value))
                goto bad;
            f->metric = name;
            return true;
        }
    }
bad:
    srv_fail(r, MG_EINVAL, "metric", "metric filters look like auc>=0.9 (operators >= > <= < =)");
    return false;
}

static void list(struct srv_req *r)
{
    struct store_version_filter f = {0};
    struct store_page page;
    const char *tag = srv_query(r, "tag"), *ds = srv_query(r, "dataset");
    const char *metric = srv_query(r, "metric"), *status = srv_query(r, "status");
    char tagkey[129], mname[129];
    json_t *out = NULL, *v;
    struct mg_error err;
    enum mg_code rc;
    size_t i;

    if (!srv_page(r, &page))
        return;
    if (tag) {
        const char *colon = strchr(tag, ':');
        size_t kl = colon ? (size_t)(colon - tag) : 0;
        if (colon == NULL || kl == 0 || kl >= sizeof(tagkey)) {
            srv_fail(r, MG_EINVAL, "tag", "tag filters look like team:risk (key:value)");
            return;
        }
        memcpy(tagkey, tag, kl);
        tagkey[kl] = '\0';
        f.tag_key = tagkey;
        f.tag_value = colon + 1;
    }
    if (ds) {
        if (!mg_valid_digest(ds, strlen(ds))) {
            srv_fail(r, MG_EINVAL, "dataset",
                     "dataset must be sha256: followed by 64 lowercase hex");
            return;
        }
        f.dataset = ds;
    }
    if (metric && !parse_metric_filter(r, metric, &f, mname, sizeof(mname)))
        return;
    /* API.md "Lifecycle": archived (and deleted) versions are listed only when asked for. */
    f.status = status ? status : "ready";
    if (strcmp(f.status, "all") == 0) {
        f.status = NULL;
    } else if (strcmp(f.status, "ready") != 0 && strcmp(f.status, "archived") != 0 &&
               strcmp(f.status, "deleted") != 0) {
        srv_fail(r, MG_EINVAL, "status", "status is ready, archived, deleted or all");
        return;
    }
    rc = store_version_list(r->srv->store, srv_param(r, "model"), &f, &page, &out, &err);
    if (rc == MG_OK) {
        json_array_foreach(json_object_get(out, "items"), i, v) decorate(v);
    }
    api_reply_result(r, rc, 200, out, &err);
}

/* Versions are read far more than written: answered from the response cache
 * while nothing has been written since (metrics, tags and the description can
 * change; every change is a write). */
static void get(struct srv_req *r)
{
    const char *model = srv_param(r, "model");
    int64_t n = srv_param_version(r);
    char key[SRV_CACHE_KEY_MAX];
    json_t *out = NULL;
    struct mg_error err;
    uint64_t epoch;
    enum mg_code rc;

    snprintf(key, sizeof(key), "version\n%s\n%lld", model, (long long)n);
    if (srv_reply_cached(r, model, key, &epoch))
        return;
    rc = store_version_get(r->srv->store, model, n, &out, &err);
    if (rc != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    decorate(out);
    srv_reply_json_keep(r, out, key, epoch);
}

static void patch(struct srv_req *r)
{
    static const char *const allowed[] = {"description", "tags", NULL};
    json_t *tags, *out = NULL, *v;
    const char *d, *key;
    struct mg_error err;
    enum mg_code rc;

    /* Say plainly why anything else is refused: versions are immutable. */
    json_object_foreach(json_is_object(r->body) ? r->body : NULL, key, v)
    {
        if (strcmp(key, "description") != 0 && strcmp(key, "tags") != 0) {
            srv_fail(r, MG_EINVAL, key,
                     "versions are immutable: only description and tags can change ('%.64s' "
                     "cannot)",
                     key);
            return;
        }
    }
    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "description", "description", false, 16384, &d))
        return;
    tags = json_object_get(r->body, "tags");
    if (tags && !api_tags(r, tags, "tags"))
        return;
    rc = store_version_patch(r->srv->store, r->who.name, srv_param(r, "model"),
                             srv_param_version(r), r->body, &out, &err);
    reply_version(r, rc, 200, out, &err);
}

static void add_metrics(struct srv_req *r)
{
    static const char *const allowed[] = {"metrics", NULL};
    json_t *m, *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!api_object(r, r->body, allowed))
        return;
    m = json_object_get(r->body, "metrics");
    if (m == NULL) {
        srv_fail(r, MG_EINVAL, "metrics", "'metrics' is required");
        return;
    }
    if (!api_metrics(r, m, "metrics"))
        return;
    rc = store_version_add_metrics(r->srv->store, r->who.name, srv_param(r, "model"),
                                   srv_param_version(r), m, &out, &err);
    reply_version(r, rc, 200, out, &err);
}

static void artifact(struct srv_req *r)
{
    json_t *v = NULL;
    struct mg_error err;

    if (store_version_get(r->srv->store, srv_param(r, "model"), srv_param_version(r), &v, &err) !=
        MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    if (strcmp(json_string_value(json_object_get(v, "status")), "deleted") == 0)
        srv_fail(r, MG_EGONE, NULL,
                 "version %lld of model '%s' was deleted (%s); its record and signature stay, "
                 "its artifact is gone",
                 (long long)srv_param_version(r), srv_param(r, "model"),
                 json_string_value(json_object_get(v, "deletion_reason"))
                     ? json_string_value(json_object_get(v, "deletion_reason"))
                     : "no reason given");
    else
        api_serve_blob(
            r, json_string_value(json_object_get(json_object_get(v, "artifact"), "digest")));
    json_decref(v);
}

static void files(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc =
        store_version_files(r->srv->store, srv_param(r, "model"), srv_param_version(r), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void signature(struct srv_req *r)
{
    char *bundle = NULL;
    size_t len = 0;
    struct mg_error err;

    if (store_version_signature(r->srv->store, srv_param(r, "model"), srv_param_version(r), &bundle,
                                &len, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_bytes(r, 200, "application/json", bundle, len);
    free(bundle);
}

static void gates(struct srv_req *r)
{
    const char *alias = srv_query(r, "alias");
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (alias == NULL || !mg_valid_alias_name(alias, strlen(alias))) {
        srv_fail(r, MG_EINVAL, "alias", "give ?alias=NAME (^[a-z][a-z0-9-]{0,31}$)");
        return;
    }
    rc = rel_gates_dry_run(r->srv, srv_param(r, "model"), srv_param_version(r), alias, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

#define V "/api/v1/models/{model}/versions"
const struct srv_route srv_routes_versions[] = {
    {"POST", V, STORE_ROLE_PUBLISHER, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", V, STORE_ROLE_READER, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", V "/{n}", STORE_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"PATCH", V "/{n}", STORE_ROLE_PUBLISHER, SRV_BODY_JSON, patch, NULL, NULL, NULL},
    {"POST", V "/{n}/metrics", STORE_ROLE_PUBLISHER, SRV_BODY_JSON, add_metrics, NULL, NULL, NULL},
    {"GET", V "/{n}/artifact", STORE_ROLE_READER, SRV_BODY_NONE, artifact, NULL, NULL, NULL},
    {"GET", V "/{n}/files", STORE_ROLE_READER, SRV_BODY_NONE, files, NULL, NULL, NULL},
    {"GET", V "/{n}/gates", STORE_ROLE_READER, SRV_BODY_NONE, gates, NULL, NULL, NULL},
    {"GET", V "/{n}/signature", STORE_ROLE_READER, SRV_BODY_NONE, signature, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
