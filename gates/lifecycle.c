/*
 * lifecycle.c - archive/unarchive/delete guards and retention selection.
 */
#include "lifecycle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {"ready", "archived", "deleted"};

const char *life_status_name(enum life_status s)
{
    return (unsigned)s < 3 ? status_names[s] : "ready";
}

bool life_status_parse(const char *name, enum life_status *out)
{
    unsigned i;

    for (i = 0; name != NULL && i < 3; i++) {
        if (strcmp(name, status_names[i]) == 0) {
            *out = (enum life_status)i;
            return true;
        }
    }
    return false;
}

static const char *op_verb(enum life_op op)
{
    switch (op) {
    case LIFE_ARCHIVE:
        return "archived";
    case LIFE_UNARCHIVE:
        return "unarchived";
    default:
        return "deleted";
    }
}

/* The guards archive and delete share: what still holds the version. */
static enum mg_code held(enum life_op op, const struct life_facts *f, struct mg_error *err)
{
    long long v = (long long)f->version;

    if (f->routed_by != NULL)
        return mg_fail(err, MG_ECONFLICT, NULL,
                       "version %lld is routed by alias '%s' and cannot be %s; move the alias "
                       "to another version first",
                       v, f->routed_by, op_verb(op));
    if (f->promotion != NULL)
        return mg_fail(err, MG_ECONFLICT, NULL,
                       "version %lld is the candidate of active promotion %s (alias '%s') and "
                       "cannot be %s; abort the promotion first",
                       v, f->promotion, f->promo_alias ? f->promo_alias : "?", op_verb(op));
    if (f->lkg_of != NULL)
        return mg_fail(err, MG_ECONFLICT, NULL,
                       "version %lld is the last-known-good of alias '%s' or the version its "
                       "rollback goes to, and cannot be %s; promote a newer version first",
                       v, f->lkg_of, op_verb(op));
    return MG_OK;
}

enum mg_code life_check(enum life_op op, const struct life_facts *f, bool *noop,
                        struct mg_error *err)
{
    *noop = false;
    switch (op) {
    case LIFE_ARCHIVE:
        if (f->status == LIFE_ARCHIVED) {
            *noop = true;
            return MG_OK;
        }
        if (f->status == LIFE_DELETED)
            return mg_fail(err, MG_ECONFLICT, NULL,
                           "version %lld is deleted; a deleted version cannot be archived",
                           (long long)f->version);
        return held(op, f, err);
    case LIFE_UNARCHIVE:
        if (f->status == LIFE_READY) {
            *noop = true;
            return MG_OK;
        }
        if (f->status == LIFE_DELETED)
            return mg_fail(err, MG_ECONFLICT, NULL,
                           "version %lld is deleted and its artifact is gone; it cannot be "
                           "unarchived (register the model again as a new version)",
                           (long long)f->version);
        return MG_OK;
    case LIFE_DELETE:
        if (f->status == LIFE_DELETED) {
            *noop = true;
            return MG_OK;
        }
        return held(op, f, err);
    }
    return mg_fail(err, MG_EINVAL, NULL, "unknown lifecycle operation");
}

/* ---- retention ------------------------------------------------------------ */

static enum mg_code parse_limit(const json_t *j, const char *key, int64_t max, int64_t *out,
                                bool *has, struct mg_error *err)
{
    json_t *v = json_object_get(j, key);

    *has = false;
    if (v == NULL || json_is_null(v))
        return MG_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return mg_fail(err, MG_EINVAL, key, "%s must be a whole number from 0 to %lld", key,
                       (long long)max);
    *out = json_integer_value(v);
    *has = true;
    return MG_OK;
}

enum mg_code life_rule_parse(const json_t *j, struct life_rule *out, struct mg_error *err)
{
    struct life_rule r = {0};
    const char *key, *action;
    json_t *v;
    enum mg_code rc;

    if (!json_is_object(j))
        return mg_fail(err, MG_EINVAL, NULL,
                       "the body must be a JSON object {\"keep_last\",\"keep_days\",\"action\"}");
    json_object_foreach((json_t *)j, key, v)
    {
        if (strcmp(key, "keep_last") != 0 && strcmp(key, "keep_days") != 0 &&
            strcmp(key, "action") != 0)
            return mg_fail(err, MG_EINVAL, key,
                           "unknown member '%s'; a retention rule has keep_last, keep_days and "
                           "action",
                           key);
    }
    if ((rc = parse_limit(j, "keep_last", LIFE_KEEP_LAST_MAX, &r.keep_last, &r.has_keep_last,
                          err)) != MG_OK ||
        (rc = parse_limit(j, "keep_days", LIFE_KEEP_DAYS_MAX, &r.keep_days, &r.has_keep_days,
                          err)) != MG_OK)
        return rc;
    if (!r.has_keep_last && !r.has_keep_days)
        return mg_fail(err, MG_EINVAL, "keep_last",
                       "a retention rule needs keep_last, keep_days or both");
    action = json_string_value(json_object_get(j, "action"));
    if (action == NULL)
        return mg_fail(err, MG_EINVAL, "action", "action must be \"archive\" or \"delete\"");
    if (strcmp(action, "archive") == 0)
        r.action = LIFE_ARCHIVE;
    else if (strcmp(action, "delete") == 0)
        r.action = LIFE_DELETE;
    else
        return mg_fail(err, MG_EINVAL, "action", "action must be \"archive\" or \"delete\"");
    *out = r;
    return MG_OK;
}

json_t *life_rule_to_json(const struct life_rule *r)
{
    return json_pack("{s:o, s:o, s:s}", "keep_last",
                     r->has_keep_last ? json_integer(r->keep_last) : json_null(), "keep_days",
                     r->has_keep_days ? json_integer(r->keep_days) : json_null(), "action",
                     r->action == LIFE_ARCHIVE ? "archive" : "delete");
}

static int newest_first(const void *a, const void *b)
{
    int64_t x = (*(const struct life_facts *const *)a)->version;
    int64_t y = (*(const struct life_facts *const *)b)->version;

    return x < y ? 1 : x > y ? -1 : 0;
}

size_t life_retention_select(const struct life_rule *r, const struct life_facts *facts, size_t n,
                             int64_t now_ms, int64_t *out)
{
    const struct life_facts **order;
    int64_t kept = 0, age_ms = r->keep_days * 86400000LL;
    size_t i, m = 0;

    if (n == 0 || (order = malloc(n * sizeof(*order))) == NULL)
        return 0;
    for (i = 0; i < n; i++)
        order[i] = &facts[i];
    qsort(order, n, sizeof(*order), newest_first);
    for (i = 0; i < n; i++) {
        const struct life_facts *f = order[i];
        bool young;

        if (f->status == LIFE_DELETED)
            continue; /* gone already: counts for nothing */
        if (r->has_keep_last && kept < r->keep_last) {
            kept++;
            continue;
        }
        young = r->has_keep_days && now_ms - f->created_ms < age_ms;
        if (young || f->ever_routed || f->routed_by != NULL || f->lkg_of != NULL ||
            f->promotion != NULL)
            continue;
        if (r->action == LIFE_ARCHIVE && f->status != LIFE_READY)
            continue;
        out[m++] = f->version;
    }
    free(order);
    return m;
}
