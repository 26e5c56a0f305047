/*
 * version.c - a validated VersionCreate body into the typed record (version.h).
 */
#include "version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A member that is absent or null reads as NULL. */
static const json_t *member(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    return v == NULL || json_is_null(v) ? NULL : v;
}

enum mg_code mg_metrics_from_json(const json_t *obj, struct mg_metric **out, size_t *n,
                                  struct mg_error *err)
{
    struct mg_metric *m = NULL;
    const char *name;
    json_t *val;
    size_t i = 0;

    *out = NULL;
    *n = 0;
    if (!json_is_object(obj))
        return mg_fail(err, MG_EINVAL, "metrics", "'metrics' must be an object of numbers");
    if (json_object_size(obj) > 0 && (m = calloc(json_object_size(obj), sizeof(*m))) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_object_foreach((json_t *)obj, name, val)
    {
        m[i].name = name;
        m[i].value = json_number_value(val);
        m[i].integral = json_is_integer(val);
        i++;
    }
    *out = m;
    *n = i;
    return MG_OK;
}

json_t *mg_metrics_json(const struct mg_metric *m, size_t n)
{
    json_t *o = json_object();
    size_t i;

    for (i = 0; o != NULL && i < n; i++) {
        json_t *v = m[i].integral ? json_integer((json_int_t)m[i].value) : json_real(m[i].value);
        if (json_object_set_new(o, m[i].name, v) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

static enum mg_code datasets_of(struct mg_version_new *v, const json_t *arr, struct mg_error *err)
{
    const json_t *d;
    size_t i;

    v->datasets_given = true;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return MG_OK;
    v->datasets = calloc(json_array_size(arr), sizeof(*v->datasets));
    if (v->datasets == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_array_foreach(arr, i, d)
    {
        struct mg_dataset_use *u = &v->datasets[i];
        const char *digest = json_string_value(json_object_get(d, "digest"));
        const char *role = json_string_value(json_object_get(d, "role"));

        snprintf(u->digest, sizeof(u->digest), "%s", digest ? digest : "");
        snprintf(u->role, sizeof(u->role), "%s", role ? role : "");
        u->name = json_string_value(json_object_get(d, "name"));
        u->uri = json_string_value(json_object_get(d, "uri"));
    }
    v->ndatasets = json_array_size(arr);
    return MG_OK;
}

enum mg_code mg_version_new_init(struct mg_version_new *v, const json_t *body, struct mg_error *err)
{
    const char *artifact = json_string_value(json_object_get(body, "artifact"));
    const json_t *ds = json_object_get(body, "datasets"),
                 *metrics = json_object_get(body, "metrics");
    enum mg_code rc = MG_OK;

    memset(v, 0, sizeof(*v));
    if (!json_is_object(body))
        return mg_fail(err, MG_EINVAL, NULL, "a version needs a VersionCreate object");
    snprintf(v->artifact, sizeof(v->artifact), "%s", artifact ? artifact : "");
    v->image = json_string_value(json_object_get(body, "image"));
    v->run_id = json_string_value(json_object_get(body, "run_id"));
    v->description = json_string_value(json_object_get(body, "description"));
    v->source = member(body, "source");
    v->params = member(body, "params");
    v->tags = member(body, "tags");
    v->smoke = member(body, "smoke");
    v->resources = member(body, "resources");
    if (ds != NULL)
        rc = datasets_of(v, ds, err);
    if (rc == MG_OK && metrics != NULL) {
        v->metrics_given = true;
        rc = mg_metrics_from_json(metrics, &v->metrics, &v->nmetrics, err);
    }
    if (rc != MG_OK)
        mg_version_new_release(v);
    return rc;
}

void mg_version_new_release(struct mg_version_new *v)
{
    free(v->datasets);
    free(v->metrics);
    memset(v, 0, sizeof(*v));
}
