/*
 * read.c - read-only commands: `versions`, `show` and `gates`.
 */
#include "mgc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

int mgc_cmd_versions(struct mgc *c, const struct mgc_args *a)
{
    const char *model = a->pos[0];
    json_t *list = NULL, *items, *v; /* NEW, BORROWED, BORROWED */
    struct mgc_table t;
    char path[256], sd[24], num[32];
    int64_t limit = 50;
    size_t i;
    int rc;

    if (!mgc_check_model(c, model))
        return MGC_USAGE;
    if (mgc_opt(a, "limit") && !mgc_parse_int(c, "--limit", mgc_opt(a, "limit"), 1, 1000, &limit))
        return MGC_USAGE;
    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    snprintf(path, sizeof(path), "/api/v1/models/%s/versions?limit=%lld", model, (long long)limit);
    if ((rc = mgc_call(c, "GET", path, NULL, &list)) != MGC_OK)
        return rc;
    if (c->json) {
        rc = mgc_print_json(list);
        json_decref(list);
        return rc;
    }
    items = json_object_get(list, "items");
    if (!json_is_array(items)) {
        json_decref(list);
        return mgc_fail("the server's reply has no list of versions; refusing to guess");
    }
    mgc_table_init(&t, 6);
    mgc_table_row(&t, "VERSION", "CREATED", "BY", "ARTIFACT", "FILES", "METRICS");
    json_array_foreach(items, i, v)
    {
        json_t *art = json_object_get(v, "artifact");
        char *files = mgc_text(json_object_get(art, "files"));
        char *metrics = mgc_metrics_text(json_object_get(v, "metrics"));
        snprintf(num, sizeof(num), "%lld",
                 (long long)json_integer_value(json_object_get(v, "version")));
        mgc_short_digest(mgc_str(art, "digest", NULL), sd);
        mgc_table_row(&t, num, mgc_str(v, "created_at", NULL), mgc_str(v, "created_by", NULL), sd,
                      files, metrics);
        free(files);
        free(metrics);
    }
    if (json_array_size(items) == 0)
        fprintf(stderr, "%s has no versions yet\n", model);
    else
        mgc_table_print(&t);
    mgc_table_release(&t);
    json_decref(list);
    return MGC_OK;
}

static void show_line(const char *key, const char *value)
{
    printf("%-11s %s\n", key, value ? value : "-");
}

int mgc_cmd_show(struct mgc *c, const struct mgc_args *a)
{
    const char *model = a->pos[0];
    json_t *v = NULL, *art, *ds, *d, *src; /* NEW, then BORROWED */
    char path[256], line[1024], hb[32];
    char *t;
    int64_t n;
    size_t i;
    int rc;

    if (!mgc_check_model(c, model) || !mgc_parse_int(c, "the version", a->pos[1], 1, INT64_MAX, &n))
        return MGC_USAGE;
    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    snprintf(path, sizeof(path), "/api/v1/models/%s/versions/%lld", model, (long long)n);
    if ((rc = mgc_call(c, "GET", path, NULL, &v)) != MGC_OK)
        return rc;
    if (c->json) {
        rc = mgc_print_json(v);
        json_decref(v);
        return rc;
    }
    art = json_object_get(v, "artifact");
    snprintf(line, sizeof(line), "%s v%lld", model, (long long)n);
    show_line("version", line);
    snprintf(line, sizeof(line), "%s by %s", mgc_str(v, "created_at", "?"),
             mgc_str(v, "created_by", "?"));
    show_line("created", line);
    mgc_human_bytes((double)json_integer_value(json_object_get(art, "size")), hb);
    t = mgc_text(json_object_get(art, "files"));
    snprintf(line, sizeof(line), "%s (%s, %s, %s files)", mgc_str(art, "digest", "?"),
             mgc_str(art, "media_type", "?"), hb, t ? t : "-");
    free(t);
    show_line("artifact", line);
    show_line("image", mgc_str(v, "image", NULL));
    show_line("run_id", mgc_str(v, "run_id", NULL));
    src = json_object_get(v, "source");
    if (src != NULL) {
        snprintf(line, sizeof(line), "%s @ %s", mgc_str(src, "repo", "-"),
                 mgc_str(src, "commit", "-"));
        show_line("source", line);
    }
    ds = json_object_get(v, "datasets");
    json_array_foreach(ds, i, d)
    {
        snprintf(line, sizeof(line), "%s  %s  %s", mgc_str(d, "digest", "?"),
                 mgc_str(d, "name", "-"), mgc_str(d, "role", "-"));
        show_line(i == 0 ? "datasets" : "", line);
    }
    t = mgc_metrics_text(json_object_get(v, "metrics"));
    show_line("metrics", t);
    free(t);
    t = mgc_text(json_object_get(v, "params"));
    show_line("params", t);
    free(t);
    t = mgc_text(json_object_get(v, "tags"));
    show_line("tags", t);
    free(t);
    show_line("signature", mgc_str(json_object_get(v, "signature"), "keyid", NULL));
    t = mgc_text(json_object_get(v, "bad_for"));
    show_line("bad_for", t);
    free(t);
    if (mgc_str(v, "description", "")[0] != '\0')
        show_line("description", mgc_str(v, "description", NULL));
    json_decref(v);
    return MGC_OK;
}

bool mgc_print_gates(const json_t *gates)
{
    struct mgc_table t;
    json_t *g; /* BORROWED */
    bool failed = false;
    size_t i;

    mgc_table_init(&t, 5);
    mgc_table_row(&t, "GATE", "STATUS", "OBSERVED", "EXPECTED", "DETAIL");
    json_array_foreach(gates, i, g)
    {
        char *obs = mgc_text(json_object_get(g, "observed"));
        char *exp = mgc_text(json_object_get(g, "expected"));
        const char *status = mgc_str(g, "status", "?");
        failed = failed || strcmp(status, "failed") == 0;
        mgc_table_row(&t, mgc_str(g, "name", "?"), status, obs, exp, mgc_str(g, "detail", NULL));
        free(obs);
        free(exp);
    }
    if (json_array_size(gates) > 0)
        mgc_table_print(&t);
    mgc_table_release(&t);
    return failed;
}

int mgc_cmd_gates(struct mgc *c, const struct mgc_args *a)
{
    const char *model = a->pos[0], *alias = mgc_opt(a, "alias");
    json_t *rep = NULL, *gates, *g; /* NEW, BORROWED, BORROWED */
    char path[256];
    bool failed = false;
    int64_t n;
    size_t i;
    int rc;

    if (!mgc_check_model(c, model) ||
        !mgc_parse_int(c, "the version", a->pos[1], 1, INT64_MAX, &n) || !mgc_check_alias(c, alias))
        return MGC_USAGE;
    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    snprintf(path, sizeof(path), "/api/v1/models/%s/versions/%lld/gates?alias=%s", model,
             (long long)n, alias);
    if ((rc = mgc_call(c, "GET", path, NULL, &rep)) != MGC_OK)
        return rc;
    gates = json_object_get(rep, "gates");
    /* Only the server's own "passed": true is a pass; a reply without it is an error. */
    if (!json_is_boolean(json_object_get(rep, "passed")) || !json_is_array(gates) ||
        !json_is_boolean(json_object_get(rep, "pending"))) {
        json_decref(rep);
        return mgc_fail("the server's gate report is not one this client can read; refusing "
                        "to guess");
    }
    json_array_foreach(gates, i, g)
    {
        failed = failed || strcmp(mgc_str(g, "status", ""), "failed") == 0;
    }
    failed = failed || (!json_is_true(json_object_get(rep, "passed")) &&
                        !json_is_true(json_object_get(rep, "pending")));
    if (c->json) {
        rc = mgc_print_json(rep);
    } else {
        mgc_print_gates(gates);
        printf("%s v%lld for %s: %s\n", model, (long long)n, alias,
               failed                                          ? "a gate FAILED"
               : json_is_true(json_object_get(rep, "pending")) ? "passing so far, some pending"
                                                               : "all gates pass");
    }
    json_decref(rep);
    return rc != MGC_OK ? rc : failed ? MGC_FAILED : MGC_OK;
}
