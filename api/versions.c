/*
 * versions.c - /api/v1/models/{model}/versions: create, list with filters,
 * get, patch, append metrics, artifact bytes and the file manifest.
 */
#include "api.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/json.h"
#include "../base/util.h"
#include "../artifact/introspect.h"
#include "../gates/schema.h"
#include "../gates/vram.h"
#include "../http/cache.h"
#include "../control/release.h"
#include "../model/version.h"

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

#define IO_MAX 1024    /* inputs or outputs declared */
#define IO_DIMS_MAX 64 /* dimensions of one shape */

/* A shape: null, or up to IO_DIMS_MAX integers >= -1 and names (null dims become -1). */
static bool io_shape(struct srv_req *r, const json_t *shape, const char *field, json_t **out)
{
    json_t *d;
    size_t i;

    *out = NULL;
    if (shape == NULL || json_is_null(shape)) {
        *out = json_null();
        return true;
    }
    if (!json_is_array(shape) || json_array_size(shape) > IO_DIMS_MAX) {
        srv_fail(r, MG_EINVAL, field,
                 "%s must be null or an array of at most %d dimensions (sizes, -1 or names)", field,
                 IO_DIMS_MAX);
        return false;
    }
    *out = json_array();
    json_array_foreach(shape, i, d)
    {
        if (json_is_null(d))
            json_array_append_new(*out, json_integer(-1));
        else if ((json_is_integer(d) && json_integer_value(d) >= -1) ||
                 (json_is_string(d) && json_string_length(d) >= 1 && json_string_length(d) <= 128))
            json_array_append(*out, d);
        else {
            json_decref(*out);
            *out = NULL;
            srv_fail(r, MG_EINVAL, field,
                     "%s[%zu] must be a size (an integer >= 0, or -1 for any) or a name of 1 to "
                     "128 characters",
                     field, i);
            return false;
        }
    }
    return true;
}

/* One of io_schema's lists, normalised into *out (NEW): dtypes canonical, null dims -1. */
static bool io_list(struct srv_req *r, const json_t *list, const char *key, json_t **out)
{
    static const char *const allowed_in[] = {"name", "dtype", "shape", "optional", NULL};
    static const char *const allowed_out[] = {"name", "dtype", "shape", NULL};
    bool inputs = strcmp(key, "inputs") == 0;
    char field[64], dtype[96];
    const char *name, *dt;
    json_t *e, *shape, *opt, *n;
    size_t i, k;

    *out = json_array();
    if (list == NULL)
        return true;
    if (!json_is_array(list) || json_array_size(list) > IO_MAX) {
        srv_fail(r, MG_EINVAL, "io_schema", "io_schema.%s must be an array of at most %d objects",
                 key, IO_MAX);
        goto bad;
    }
    json_array_foreach(list, i, e)
    {
        snprintf(field, sizeof(field), "io_schema.%s[%zu]", key, i);
        if (!json_is_object(e)) {
            srv_fail(r, MG_EINVAL, field, "%s must be an object {\"name\",\"dtype\",\"shape\"}",
                     field);
            goto bad;
        }
        if (!api_object(r, e, inputs ? allowed_in : allowed_out) ||
            !api_string(r, e, "name", field, true, 256, &name) ||
            !api_string(r, e, "dtype", field, true, 64, &dt))
            goto bad;
        if (name[0] == '\0') {
            srv_fail(r, MG_EINVAL, field, "%s.name must not be empty", field);
            goto bad;
        }
        if (!art_dtype_canonical(dt, dtype, sizeof(dtype))) {
            srv_fail(r, MG_EINVAL, field,
                     "%s.dtype '%.64s' is not a known element type: use F32, F16, BF16, F64, "
                     "I8..I64, U8..U64, BOOL, STRING (or ONNX/numpy names), seq(T), map(K,V), "
                     "optional(T)",
                     field, dt);
            goto bad;
        }
        for (k = 0; k < i; k++) {
            if (strcmp(json_string_value(json_object_get(json_array_get(*out, k), "name")), name) ==
                0) {
                srv_fail(r, MG_EINVAL, field, "%s names '%.64s' a second time", field, name);
                goto bad;
            }
        }
        opt = json_object_get(e, "optional");
        if (opt && !json_is_boolean(opt)) {
            srv_fail(r, MG_EINVAL, field, "%s.optional must be true or false", field);
            goto bad;
        }
        snprintf(field, sizeof(field), "io_schema.%s[%zu].shape", key, i);
        if (!io_shape(r, json_object_get(e, "shape"), field, &shape))
            goto bad;
        n = json_pack("{s:s, s:s, s:o}", "name", name, "dtype", dtype, "shape", shape);
        if (n && json_is_true(opt))
            json_object_set_new(n, "optional", json_true());
        json_array_append_new(*out, n);
    }
    return true;
bad:
    json_decref(*out);
    *out = NULL;
    return false;
}

/* VersionCreate's io_schema {"inputs":[…],"outputs":[…]}, normalised into *out (NEW). */
static bool check_io_schema(struct srv_req *r, const json_t *v, json_t **out)
{
    static const char *const allowed[] = {"inputs", "outputs", NULL};
    json_t *in = NULL, *outl = NULL;

    *out = NULL;
    if (!json_is_object(v)) {
        srv_fail(r, MG_EINVAL, "io_schema",
                 "'io_schema' must be an object {\"inputs\":[…],\"outputs\":[…]}");
        return false;
    }
    if (!api_object(r, v, allowed) || !io_list(r, json_object_get(v, "inputs"), "inputs", &in) ||
        !io_list(r, json_object_get(v, "outputs"), "outputs", &outl)) {
        json_decref(in);
        return false;
    }
    *out = json_pack("{s:o, s:o}", "inputs", in, "outputs", outl);
    return *out != NULL;
}

/* Validate a VersionCreate body. */
static bool check_create(struct srv_req *r, const json_t *b)
{
    static const char *const allowed[] = {
        "artifact", "image", "run_id",    "source",      "datasets",  "metrics", "params",
        "tags",     "smoke", "resources", "description", "io_schema", NULL};
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

void api_version_decorate(json_t *v)
{
    json_t *e =
        gate_vram_estimate(json_object_get(v, "resources"), json_object_get(v, "introspection"));
    double gib;

    if (e == NULL)
        return;
    gib = json_number_value(json_object_get(e, "gib"));
    json_object_set_new(e, "gib", json_real(round(gib * 1000.0) / 1000.0));
    json_object_set_new(v, "estimated_vram_gib", json_real(round(gib * 1000.0) / 1000.0));
    json_object_set_new(v, "vram_estimate", e);
}

/* The estimate from resources (res) as the object gate_vram_estimate builds (gates/vram.c
 * from_resources), with the reply's rounded gib, written without building it. */
static void put_resources_estimate(struct mg_jw *w, const struct gate_vram_resources *res,
                                   double gib)
{
    static const char source[] = "resources";

    mg_jw_obj(w);
    mg_jw_key(w, "source");
    mg_jw_str(w, source, sizeof(source) - 1);
    mg_jw_key(w, "formula");
    mg_jw_str(w, gate_vram_resources_formula, strlen(gate_vram_resources_formula));
    mg_jw_key(w, "parameters");
    mg_jw_int(w, res->parameters);
    mg_jw_key(w, "precision");
    mg_jw_str(w, res->precision, strlen(res->precision));
    mg_jw_key(w, "bytes_per_parameter");
    mg_jw_real(w, res->bytes_per_parameter);
    mg_jw_key(w, "overhead");
    mg_jw_real(w, res->overhead);
    mg_jw_key(w, "gib");
    mg_jw_real(w, gib);
    mg_jw_obj_end(w);
}

/* The Version's text with api_version_decorate's members (new; free it), or NULL when out
 * of memory: byte for byte mg_json_text of the decorated value, without building it. The
 * text is taken from vt when there is nothing to add. */
static char *decorated_text(struct store_version_text *vt, size_t *len)
{
    /* gate_vram_estimate takes resources first: the introspection (kilobytes, with GGUF
     * metadata) is parsed only when the resources give no estimate. The common estimate, from
     * resources, is written from its members; the introspection's is built as json_t. */
    json_t *doc = vt->resources ? json_loads(vt->resources, JSON_DECODE_ANY, NULL) : NULL;
    json_t *e = NULL;
    struct gate_vram_resources res;
    bool from_res = gate_vram_from_resources(doc, &res);
    struct mg_jw w = {0};
    char *text;
    double gib;

    if (!from_res && vt->introspection != NULL) {
        json_t *in = json_loads(vt->introspection, JSON_DECODE_ANY, NULL);

        e = gate_vram_estimate(NULL, in);
        json_decref(in);
    }
    if (!from_res && e == NULL) {
        json_decref(doc);
        text = vt->text;
        *len = vt->len;
        vt->text = NULL;
        return text;
    }
    gib = round((from_res ? res.gib : json_number_value(json_object_get(e, "gib"))) * 1000.0) /
          1000.0;
    mg_jw_reopen(&w, vt->text, vt->len);
    mg_jw_key(&w, "estimated_vram_gib");
    mg_jw_real(&w, gib);
    mg_jw_key(&w, "vram_estimate");
    if (from_res) {
        put_resources_estimate(&w, &res, gib);
    } else {
        json_object_set_new(e, "gib", json_real(gib));
        mg_jw_value(&w, e);
    }
    mg_jw_obj_end(&w);
    json_decref(e);
    json_decref(doc); /* res.precision points into it */
    return mg_jw_done(&w, len);
}

static void reply_version(struct srv_req *r, enum mg_code rc, unsigned status, json_t *v,
                          const struct mg_error *err)
{
    if (rc == MG_OK)
        api_version_decorate(v);
    api_reply_result(r, rc, status, v, err);
}

/*
 * The version's introspection is what the upload read from its artifact; a declared
 * io_schema must agree with the inputs and outputs read there (400 naming the difference).
 */
static void create(struct srv_req *r)
{
    const char *artifact = json_string_value(json_object_get(r->body, "artifact"));
    json_t *out = NULL, *io = NULL, *intro = NULL, *read = NULL, *v, *scan = NULL;
    json_t *publisher = NULL;
    struct mg_version_new rec = {0};
    char detail[400];
    struct mg_error err;
    enum mg_code rc;

    if (!check_create(r, r->body) || !srv_authorize_bytes(r, artifact, "artifact"))
        return;
    if ((v = json_object_get(r->body, "io_schema")) && !json_is_null(v) &&
        !check_io_schema(r, v, &io))
        return;
    if ((rc = store_blob_introspection(r->srv->store, artifact, &intro, &err)) != MG_OK ||
        (rc = store_blob_scan(r->srv->store, artifact, &scan, &err)) != MG_OK) {
        srv_reply_error(r, &err);
        goto out;
    }
    if (io != NULL && (json_object_get(intro, "inputs") || json_object_get(intro, "outputs"))) {
        read = json_pack("{s:O*, s:O*}", "inputs", json_object_get(intro, "inputs"), "outputs",
                         json_object_get(intro, "outputs"));
        if (read != NULL && !gate_schema_agree(read, io, detail, sizeof(detail))) {
            srv_fail(r, MG_EINVAL, "io_schema",
                     "io_schema disagrees with the graph the server read from the artifact: %s; "
                     "fix io_schema or leave it out",
                     detail);
            goto out;
        }
    }
    /* The body's record, with what the server read, io_schema in its normalised form
     * (canonical dtypes) and the publisher; a client's "scan" is never kept (the allowed
     * members leave it out). */
    if ((rc = mg_version_new_init(&rec, r->body, &err)) != MG_OK) {
        srv_reply_error(r, &err);
        goto out;
    }
    rec.introspection = intro;
    rec.scan = scan;
    rec.io_schema = io;
    if ((rec.publisher = publisher = srv_identity_publisher(r)) == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = store_version_create(r->srv->store, r->who.name, srv_param(r, "model"), &rec, &out, &err);
    reply_version(r, rc, 201, out, &err);
out:
    mg_version_new_release(&rec);
    json_decref(publisher);
    json_decref(io);
    json_decref(intro);
    json_decref(scan);
    json_decref(read);
}

/* ?metric=name<op>value into slot i of f (name: the slot's buffer). */
static bool parse_metric_filter(struct srv_req *r, const char *q, struct store_version_filter *f,
                                size_t slot, char *name, size_t namesz)
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
            f->metrics[slot].op = ops[i];
            f->metrics[slot].value = strtod(q + n + ol, &end);
            if (end == q + n + ol || *end != '\0' || !isfinite(f->metrics[slot].value))
                goto bad;
            f->metrics[slot].name = name;
            return true;
        }
    }
bad:
    srv_fail(r, MG_EINVAL, "metric", "metric filters look like auc>=0.9 (operators >= > <= < =)");
    return false;
}

/* ?tag=k:v into slot i of f (key: the slot's buffer). */
static bool parse_tag_filter(struct srv_req *r, const char *tag, struct store_version_filter *f,
                             size_t slot, char *key, size_t keysz)
{
    const char *colon = strchr(tag, ':');
    size_t kl = colon ? (size_t)(colon - tag) : 0;

    if (colon == NULL || kl == 0 || kl >= keysz) {
        srv_fail(r, MG_EINVAL, "tag", "tag filters look like team:risk (key:value)");
        return false;
    }
    memcpy(key, tag, kl);
    key[kl] = '\0';
    f->tags[slot].key = key;
    f->tags[slot].value = colon + 1;
    return true;
}

static void list(struct srv_req *r)
{
    struct store_version_filter f = {0};
    struct store_page page;
    const char *tags[STORE_VERSION_FILTERS_MAX], *metrics[STORE_VERSION_FILTERS_MAX];
    const char *ds = srv_query(r, "dataset"), *status = srv_query(r, "status");
    char tagkey[STORE_VERSION_FILTERS_MAX][129], mname[STORE_VERSION_FILTERS_MAX][129];
    size_t ntags = srv_query_all(r, "tag", tags, STORE_VERSION_FILTERS_MAX);
    size_t nmetrics = srv_query_all(r, "metric", metrics, STORE_VERSION_FILTERS_MAX);
    json_t *out = NULL, *v;
    struct mg_error err;
    enum mg_code rc;
    size_t i;

    if (!srv_page(r, &page))
        return;
    /* Repeated filters all apply (AND). */
    if (ntags > STORE_VERSION_FILTERS_MAX || nmetrics > STORE_VERSION_FILTERS_MAX) {
        srv_fail(r, MG_EINVAL, ntags > STORE_VERSION_FILTERS_MAX ? "tag" : "metric",
                 "at most %d tag and %d metric filters apply at once", STORE_VERSION_FILTERS_MAX,
                 STORE_VERSION_FILTERS_MAX);
        return;
    }
    for (i = 0; i < ntags; i++) {
        if (!parse_tag_filter(r, tags[i], &f, i, tagkey[i], sizeof(tagkey[i])))
            return;
    }
    for (i = 0; i < nmetrics; i++) {
        if (!parse_metric_filter(r, metrics[i], &f, i, mname[i], sizeof(mname[i])))
            return;
    }
    if (ds) {
        if (!mg_valid_digest(ds, strlen(ds))) {
            srv_fail(r, MG_EINVAL, "dataset",
                     "dataset must be sha256: followed by 64 lowercase hex");
            return;
        }
        f.dataset = ds;
    }
    /* docs/contract.md "Lifecycle": archived (and deleted) versions are listed only when asked for.
     */
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
        json_array_foreach(json_object_get(out, "items"), i, v) api_version_decorate(v);
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
    char key[SRV_CACHE_KEY_MAX], *text;
    struct store_version_text vt;
    struct mg_error err;
    uint64_t epoch;
    enum mg_code rc;
    size_t len;

    snprintf(key, sizeof(key), "version\n%s\n%lld", model, (long long)n);
    if (srv_reply_cached(r, model, key, &epoch))
        return;
    rc = store_version_get_text(r->srv->store, model, n, &vt, &err);
    if (rc != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    text = decorated_text(&vt, &len);
    store_version_text_clear(&vt);
    if (text == NULL) {
        srv_reply_json(r, 500, NULL);
        return;
    }
    srv_reply_text_keep(r, text, len, key, epoch);
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
    struct mg_metric *metrics = NULL;
    json_t *m, *out = NULL;
    struct mg_error err;
    enum mg_code rc;
    size_t n = 0;

    if (!api_object(r, r->body, allowed))
        return;
    m = json_object_get(r->body, "metrics");
    if (m == NULL) {
        srv_fail(r, MG_EINVAL, "metrics", "'metrics' is required");
        return;
    }
    if (!api_metrics(r, m, "metrics"))
        return;
    if ((rc = mg_metrics_from_json(m, &metrics, &n, &err)) == MG_OK)
        rc = store_version_add_metrics(r->srv->store, r->who.name, srv_param(r, "model"),
                                       srv_param_version(r), metrics, n, &out, &err);
    reply_version(r, rc, 200, out, &err);
    free(metrics);
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
    rc = rel_gates_dry_run(r->srv->ctl, srv_param(r, "model"), srv_param_version(r), alias, &out,
                           &err);
    api_reply_result(r, rc, 200, out, &err);
}

#define V "/api/v1/models/{model}/versions"
const struct srv_route api_routes_versions[] = {
    {"POST", V, MG_ROLE_PUBLISHER, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", V, MG_ROLE_READER, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", V "/{n}", MG_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"PATCH", V "/{n}", MG_ROLE_PUBLISHER, SRV_BODY_JSON, patch, NULL, NULL, NULL},
    {"POST", V "/{n}/metrics", MG_ROLE_PUBLISHER, SRV_BODY_JSON, add_metrics, NULL, NULL, NULL},
    {"GET", V "/{n}/artifact", MG_ROLE_READER, SRV_BODY_NONE, artifact, NULL, NULL, NULL},
    {"GET", V "/{n}/files", MG_ROLE_READER, SRV_BODY_NONE, files, NULL, NULL, NULL},
    {"GET", V "/{n}/gates", MG_ROLE_READER, SRV_BODY_NONE, gates, NULL, NULL, NULL},
    {"GET", V "/{n}/signature", MG_ROLE_READER, SRV_BODY_NONE, signature, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
