/*
 * api.c - see api.h.
 */
#include "api.h"

#include <math.h>
#include <string.h>

#include "../base/util.h"
#include "../control/control.h"

static bool no_controls(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

bool api_object(struct srv_req *r, const json_t *body, const char *const *allowed)
{
    const char *key;
    json_t *v;
    size_t i;

    if (!json_is_object(body)) {
        srv_fail(r, MG_EINVAL, NULL, "the body must be a JSON object");
        return false;
    }
    json_object_foreach((json_t *)body, key, v)
    {
        bool ok = false;
        for (i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            srv_fail(r, MG_EINVAL, key, "unknown field '%.64s'; remove it", key);
            return false;
        }
    }
    return true;
}

bool api_string(struct srv_req *r, const json_t *obj, const char *key, const char *field,
                bool required, size_t maxlen, const char **out)
{
    json_t *v = json_object_get(obj, key);
    const char *s;
    size_t n;

    *out = NULL;
    if (v == NULL || (json_is_null(v) && !required)) {
        if (!required)
            return true;
        srv_fail(r, MG_EINVAL, field, "'%s' is required", field);
        return false;
    }
    if (!json_is_string(v)) {
        srv_fail(r, MG_EINVAL, field, "'%s' must be a string", field);
        return false;
    }
    s = json_string_value(v);
    n = json_string_length(v);
    if (n > maxlen || strlen(s) != n || !no_controls(s, n)) {
        srv_fail(r, MG_EINVAL, field,
                 "'%s' must be at most %zu bytes of text without control characters", field,
                 maxlen);
        return false;
    }
    *out = s;
    return true;
}

bool api_tags(struct srv_req *r, const json_t *v, const char *field)
{
    const char *k;
    json_t *val;

    if (!json_is_object(v) || json_object_size(v) > 64) {
        srv_fail(r, MG_EINVAL, field, "'%s' must be an object of at most 64 string values", field);
        return false;
    }
    json_object_foreach((json_t *)v, k, val)
    {
        size_t kl = strlen(k);
        if (kl == 0 || kl > 128 || strchr(k, ':') || !no_controls(k, kl)) {
            srv_fail(r, MG_EINVAL, field,
                     "tag keys are 1 to 128 bytes without ':' or control characters");
            return false;
        }
        if (!json_is_string(val) || json_string_length(val) > 1024 ||
            strlen(json_string_value(val)) != json_string_length(val) ||
            !no_controls(json_string_value(val), json_string_length(val))) {
            srv_fail(r, MG_EINVAL, field,
                     "tag '%.64s' must have a string value of at most 1024 bytes without "
                     "control characters",
                     k);
            return false;
        }
    }
    return true;
}

bool api_metric_name_ok(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || n > 128)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_.:/-", c) != NULL) ||
            c == '\0')
            return false;
    }
    return true;
}

bool api_metrics(struct srv_req *r, const json_t *v, const char *field)
{
    const char *k;
    json_t *val;

    if (!json_is_object(v) || json_object_size(v) > 1000) {
        srv_fail(r, MG_EINVAL, field, "'%s' must be an object of at most 1000 numbers", field);
        return false;
    }
    json_object_foreach((json_t *)v, k, val)
    {
        if (!api_metric_name_ok(k, strlen(k))) {
            srv_fail(r, MG_EINVAL, field,
                     "metric names match ^[A-Za-z0-9_.:/-]{1,128}$; '%.64s' does not", k);
            return false;
        }
        if (!json_is_number(val) || !isfinite(json_number_value(val))) {
            srv_fail(r, MG_EINVAL, field, "metric '%.64s' must be a finite number", k);
            return false;
        }
        /* Metrics are doubles: an integer beyond 2^53 would silently become another number. */
        if (json_is_integer(val) && (json_integer_value(val) > (json_int_t)1 << 53 ||
                                     json_integer_value(val) < -((json_int_t)1 << 53))) {
            srv_fail(r, MG_EINVAL, field,
                     "metric '%.64s' is an integer beyond 2^53, which a metric (a double) cannot "
                     "hold exactly; send it as a decimal or scale it",
                     k);
            return false;
        }
    }
    return true;
}

/* Decimal digits at *p (at least one, no sign), advancing *p; false on overflow. */
static bool range_number(const char **p, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = *p;

    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *p = s;
    *out = v;
    return true;
}

bool api_range_parse(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    uint64_t a, b;

    if (strncmp(h, "bytes=", 6) != 0 || size == 0)
        return false;
    h += 6;
    if (*h == '-') { /* the last a bytes */
        h++;
        if (!range_number(&h, &a) || *h != '\0' || a == 0)
            return false;
        *len = a > size ? size : a;
        *off = size - *len;
        return true;
    }
    if (!range_number(&h, &a) || *h++ != '-' || a >= size)
        return false;
    if (*h == '\0') { /* from a to the end */
        *off = a;
        *len = size - a;
        return true;
    }
    if (!range_number(&h, &b) || *h != '\0' || b < a)
        return false; /* also several ranges: "a-b,c-d" */
    if (b >= size)
        b = size - 1;
    *off = a;
    *len = b - a + 1;
    return true;
}

bool api_wait(struct srv_req *r, int64_t *secs)
{
    const char *w = srv_query(r, "wait");

    *secs = 0;
    if (w && !mg_parse_i64(w, 0, 60, secs)) {
        srv_fail(r, MG_EINVAL, "wait", "wait is a number of seconds from 0 to 60");
        return false;
    }
    return true;
}

void api_reply_result(struct srv_req *r, enum mg_code rc, unsigned status, json_t *out,
                      const struct mg_error *err)
{
    if (rc != MG_OK)
        srv_reply_error(r, err);
    else
        srv_reply_json(r, status, out);
}

enum mg_code api_page_visible(struct srv_req *r, void *ctx, const struct store_page *page,
                              api_fetch_fn fetch, api_keep_fn keep, const char *cursor_key,
                              json_t **out, struct mg_error *err)
{
    struct store_page p = *page;
    json_t *acc = json_array(), *got = NULL, *item, *next, *last;
    char cursor[260];
    enum mg_code rc = MG_OK;
    bool more = true, k;
    size_t i;

    *out = NULL;
    if (acc == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    /* Until one visible item beyond the page shows there is more, or the list ends. */
    while (more && json_array_size(acc) <= page->limit) {
        if ((rc = fetch(r, ctx, &p, &got, err)) != MG_OK)
            break;
        json_array_foreach(json_object_get(got, "items"), i, item)
        {
            if ((rc = keep(r, item, &k, err)) != MG_OK)
                break;
            if (k && json_array_append(acc, item) != 0)
                rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            if (rc != MG_OK)
                break;
        }
        next = json_object_get(got, "next_page_token");
        more = json_is_string(next) && json_string_length(next) < sizeof(cursor);
        if (more) {
            snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
            p.page_token = cursor; /* the store's own cursor: it never leaves this loop */
        }
        json_decref(got);
        got = NULL;
        if (rc != MG_OK)
            break;
    }
    if (rc != MG_OK) {
        json_decref(acc);
        return rc;
    }
    more = json_array_size(acc) > page->limit;
    while (json_array_size(acc) > page->limit)
        json_array_remove(acc, json_array_size(acc) - 1);
    last = json_object_get(json_array_get(acc, json_array_size(acc) - 1), cursor_key);
    *out = json_pack("{s:o, s:o}", "items", acc, "next_page_token",
                     more && json_is_string(last) ? json_copy(last) : json_null());
    return *out != NULL ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

struct waiting {
    struct api_waiting w; /* first: api_waiting_of */
    int64_t deadline_ms;
};

static void wake(void *arg)
{
    srv_resume(arg);
}

static void wait_start(struct srv_req *r)
{
    struct waiting *x = r->defer_ctx;

    ctl_gateways_wait(r->srv->ctl, x->w.model, x->w.alias, x->w.gen, x->deadline_ms, wake, r);
}

void api_defer_wait(struct srv_req *r, const char *model, const char *alias, int64_t gen,
                    int64_t wait_s, const char *id, unsigned status,
                    void (*on_resume)(struct srv_req *r))
{
    struct waiting *x = calloc(1, sizeof(*x));

    if (x == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        return;
    }
    snprintf(x->w.model, sizeof(x->w.model), "%s", model);
    snprintf(x->w.alias, sizeof(x->w.alias), "%s", alias);
    snprintf(x->w.id, sizeof(x->w.id), "%s", id ? id : "");
    x->w.gen = gen;
    x->w.status = status;
    x->deadline_ms = mg_now_ms() + wait_s * 1000;
    srv_defer(r, x, wait_start, on_resume);
}

const struct api_waiting *api_waiting_of(const struct srv_req *r)
{
    return r->defer_ctx;
}

const struct srv_route *const api_routes[] = {
    api_routes_health,   api_routes_tokens,     api_routes_blobs,
    api_routes_models,   api_routes_versions,   api_routes_datasets,
    api_routes_audit,    api_routes_keys,       api_routes_aliases,
    api_routes_policies, api_routes_promotions, api_routes_gateways,
    api_routes_runner,   api_routes_ui,         api_routes_metrics,
    api_routes_oci,      api_routes_lifecycle,  api_routes_identity,
    api_routes_sso,      api_routes_usage,      NULL,
};
