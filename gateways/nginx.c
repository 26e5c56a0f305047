/*
 * nginx.c - apply an alias's generation to nginx: write an include file (temp + fsync +
 * rename), run the test command (`nginx -t`), restore the previous file if the test fails,
 * then run the reload command.
 *
 * The file sets $modelgate_<model>_<alias> ('-', '.' and '_' escaped one-to-one, names.c)
 * to the upstream name of the version that serves the request: the first match rule whose
 * header equals its value (a `map` per rule, chained through their defaults), else the
 * weighted split (a split_clients block). $modelgate_<model>_<alias>_shadow is the shadow's
 * upstream for the sampled share of requests, else "". The site's own config uses both,
 * e.g. `proxy_pass http://$modelgate_fraud_production;` and a `mirror` (README).
 */
#include "push_int.h"

#include "../os/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/util.h"
#include "../gates/routing.h"
#include "../os/proc.h"

#define NGINX_FILE_MAX (64 * 1024)
#define COMMAND_TIMEOUT_MS 30000
/* `nginx -s reload` only signals the master, which re-reads the config a
 * moment later; nothing else may touch the config tree until it has (the
 * caller holds the nginx lock through this). */
#define RELOAD_SETTLE_MS 500
#define ARGV_MAX 32

static bool argv_ok(const json_t *a)
{
    json_t *x;
    size_t i;

    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) >= ARGV_MAX)
        return false;
    json_array_foreach(a, i, x)
    {
        if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > 1024 ||
            strlen(json_string_value(x)) != json_string_length(x))
            return false;
    }
    return true;
}

enum mg_code push_nginx_validate(const struct push_env *env, const json_t *body, json_t **config,
                                 char **secret, struct mg_error *err)
{
    (void)env;
    *secret = NULL;
    const char *file = json_string_value(json_object_get(body, "file"));
    const char *up = json_string_value(json_object_get(body, "upstream"));
    json_t *test = json_object_get(body, "test_command"),
           *reload = json_object_get(body, "reload_command");
    char probe[PATH_MAX];
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)body, k, v)
    {
        if (strcmp(k, "kind") && strcmp(k, "file") && strcmp(k, "upstream") &&
            strcmp(k, "test_command") && strcmp(k, "reload_command") && strcmp(k, "models") &&
            strcmp(k, "aliases"))
            return mg_fail(err, MG_EINVAL, k, "unknown field '%.64s' for an nginx gateway", k);
    }
    if (file == NULL || file[0] != '/' || strstr(file, "/../") || strlen(file) > 1024 ||
        !push_expand(file, "m", "a", 1, probe, sizeof(probe)))
        return mg_fail(err, MG_EINVAL, "file",
                       "file is an absolute path template such as "
                       "/etc/nginx/modelgate/{model}_{alias}.conf");
    /* After expansion the name goes into nginx syntax: nothing that could
     * end the statement or open a variable. */
    if (up == NULL || strstr(up, "{version}") == NULL || strlen(up) > 200 ||
        !push_expand(up, "m", "a", 1, probe, sizeof(probe)) || strpbrk(probe, " ;{}\"'\n\t\\$#"))
        return mg_fail(err, MG_EINVAL, "upstream",
                       "upstream is a name template with {version}, such as {model}_v{version}");
    if (test && !argv_ok(test))
        return mg_fail(err, MG_EINVAL, "test_command",
                       "test_command is an argv array such as [\"nginx\",\"-t\"]");
    if (reload && !argv_ok(reload))
        return mg_fail(err, MG_EINVAL, "reload_command",
                       "reload_command is an argv array such as [\"nginx\",\"-s\",\"reload\"]");
    /* o steals: the commands are copies (or fresh defaults), never borrowed. */
    *config =
        json_pack("{s:s, s:s, s:o, s:o}", "file", file, "upstream", up, "test_command",
                  test ? json_deep_copy(test) : json_pack("[s,s]", "nginx", "-t"), "reload_command",
                  reload ? json_deep_copy(reload) : json_pack("[s,s,s]", "nginx", "-s", "reload"));
    return *config ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

/* The first match rule whose header nginx cannot read ($http_<name>: a-z, 0-9 and '-'),
 * or NULL. */
static const char *unreadable_header(const struct store_delivery *d)
{
    json_t *r;
    size_t i;

    json_array_foreach(json_object_get(d->payload, "match"), i, r)
    {
        const char *h = json_string_value(json_object_get(r, "header"));

        if (h == NULL || h[0] == '\0' ||
            strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(h))
            return h ? h : "";
    }
    return NULL;
}

static bool put(struct mg_buf *b, char *line, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Format one piece of the file into line and append it; false when it does not fit. */
static bool put(struct mg_buf *b, char *line, size_t cap, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, cap, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < cap && mg_buf_puts(b, line) == MG_OK;
}

/* The upstream name of version v into name. */
static bool upstream(const struct store_delivery *d, const char *up_tmpl, const json_t *item,
                     char *name, size_t cap)
{
    return push_expand(up_tmpl, d->model, d->alias,
                       json_integer_value(json_object_get(item, "version")), name, cap);
}

/* The weighted split: a split_clients block setting var to the upstream of each route with a
 * weight above 0 (the last share is "*"), or to "" when none has. */
static bool render_split(const struct store_delivery *d, const char *up_tmpl, const char *var,
                         struct mg_buf *b)
{
    json_t *routes = json_object_get(d->payload, "routes"), *r;
    char name[256], line[640];
    size_t i, last = SIZE_MAX;

    if (!put(b, line, sizeof(line), "split_clients \"${request_id}\" $%s {\n", var))
        return false;
    json_array_foreach(routes, i, r)
    {
        if (json_integer_value(json_object_get(r, "weight")) > 0)
            last = i;
    }
    json_array_foreach(routes, i, r)
    {
        json_int_t w = json_integer_value(json_object_get(r, "weight"));
        if (w <= 0)
            continue;
        if (!upstream(d, up_tmpl, r, name, sizeof(name)))
            return false;
        /* The last share is "*": percentages then always cover everyone. */
        if (!(i == last ? put(b, line, sizeof(line), "    * %s;\n", name)
                        : put(b, line, sizeof(line), "    %lld%% %s;\n", (long long)w, name)))
            return false;
    }
    if (last == SIZE_MAX && mg_buf_puts(b, "    * \"\";\n") != MG_OK)
        return false; /* no routes (alias deleted): an empty value */
    return mg_buf_puts(b, "}\n") == MG_OK;
}

/* Match rule i: a map from the header to the rule's upstream when the value is exactly the
 * rule's (a case-sensitive regular expression with every other character escaped: nginx's
 * plain strings ignore case), else to `next`. */
static bool render_rule(const struct store_delivery *d, const char *up_tmpl, const json_t *rule,
                        const char *var, const char *next, struct mg_buf *b)
{
    const char *h = json_string_value(json_object_get(rule, "header"));
    const char *v = json_string_value(json_object_get(rule, "value"));
    char hv[GATE_HEADER_NAME_MAX + 1], re[4 * GATE_HEADER_VALUE_MAX + 1], name[256], line[1024];
    size_t i, o = 0;

    if (h == NULL || v == NULL || strlen(h) >= sizeof(hv) || strlen(v) > GATE_HEADER_VALUE_MAX ||
        !upstream(d, up_tmpl, rule, name, sizeof(name)))
        return false;
    for (i = 0; h[i]; i++)
        hv[i] = h[i] == '-' ? '_' : h[i];
    hv[i] = '\0';
    /* In a quoted nginx string "\\" is one backslash: each escapes a character for PCRE. The
     * value holds no '"', '\\', ';', '{', '}' or space (gates/routing.c). */
    for (i = 0; v[i]; i++) {
        bool alnum = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
                     (v[i] >= '0' && v[i] <= '9');
        if (!alnum) {
            re[o++] = '\\';
            re[o++] = '\\';
        }
        re[o++] = v[i];
    }
    re[o] = '\0';
    return put(b, line, sizeof(line),
               "map $http_%s $%s {\n    \"~^%s$\" %s;\n    default $%s;\n}\n", hv, var, re, name,
               next);
}

/* The shadow: var_shadow is the shadow's upstream for `percent`% of requests, else "". */
static bool render_shadow(const struct store_delivery *d, const char *up_tmpl, const char *var,
                          struct mg_buf *b)
{
    json_t *sh = json_object_get(d->payload, "shadow");
    json_int_t pct = json_integer_value(json_object_get(sh, "percent"));
    char name[256], line[640];

    if (!put(b, line, sizeof(line), "split_clients \"${request_id}\" $%s_shadow {\n", var))
        return false;
    if (!json_is_object(sh) || pct <= 0)
        return mg_buf_puts(b, "    * \"\";\n}\n") == MG_OK;
    if (!upstream(d, up_tmpl, sh, name, sizeof(name)))
        return false;
    if (pct >= 100)
        return put(b, line, sizeof(line), "    * %s;\n}\n", name);
    return put(b, line, sizeof(line), "    %lld%% %s;\n    * \"\";\n}\n", (long long)pct, name);
}

/* The include file (push_int.h). */
bool push_nginx_render(const struct store_delivery *d, const char *up_tmpl, struct mg_buf *b)
{
    json_t *match = json_object_get(d->payload, "match");
    size_t n = json_array_size(match), i;
    /* var: the longest names, every character escaped, make 199 bytes (names.c) */
    char var[256], cur[288], next[288], line[640];

    /* one-to-one: no other (model, alias) can define the same variables (names.c) */
    if (!push_nginx_variable(d->model, d->alias, var, sizeof(var)) || unreadable_header(d))
        return false;
    if (!put(b, line, sizeof(line),
             "# Managed by modelgate: model %s, alias %s, generation %lld. Do not edit.\n",
             d->model, d->alias, (long long)d->generation))
        return false;
    /* $var: the first match rule's map, whose default is the next rule's variable, ... and
     * the last rule's default the weighted split. Without rules the split is $var itself. */
    for (i = 0; i < n; i++) {
        snprintf(cur, sizeof(cur), i == 0 ? "%s" : "%s_pin%zu", var, i);
        snprintf(next, sizeof(next), i + 1 < n ? "%s_pin%zu" : "%s_split", var, i + 1);
        if (!render_rule(d, up_tmpl, json_array_get(match, i), cur, next, b))
            return false;
    }
    snprintf(cur, sizeof(cur), n > 0 ? "%s_split" : "%s", var);
    return render_split(d, up_tmpl, cur, b) && render_shadow(d, up_tmpl, var, b);
}

/* The include replaced whole or not at all (os/file.c), readable by nginx. */
static int write_atomic(const char *path, const char *data, size_t n, char *err, size_t errsz)
{
    struct mg_error e;

    if (mg_file_write_atomic(path, data, n, 0644, &e) == MG_OK)
        return 0;
    snprintf(err, errsz, "%s", e.message);
    return -1;
}

/* Read the current file (to restore it); *data NULL when there is none. */
static bool read_old(const char *path, char **data, size_t *n)
{
    FILE *f = fopen(path, "re");
    struct mg_buf b;
    char buf[4096];
    size_t r;

    *data = NULL;
    *n = 0;
    if (f == NULL)
        return errno == ENOENT;
    mg_buf_init(&b, NGINX_FILE_MAX);
    while ((r = fread(buf, 1, sizeof(buf), f)) > 0) {
        if (mg_buf_append(&b, buf, r) != MG_OK) {
            fclose(f);
            mg_buf_release(&b);
            return false;
        }
    }
    fclose(f);
    *data = b.data ? b.data : strdup("");
    *n = b.len;
    return *data != NULL;
}

static bool run(const json_t *argvj, struct srv_proc_result *res)
{
    const char *argv[ARGV_MAX + 1];
    struct srv_proc_opts o = {COMMAND_TIMEOUT_MS, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t i;

    for (i = 0; i < json_array_size(argvj) && i < ARGV_MAX; i++)
        argv[i] = json_string_value(json_array_get(argvj, i));
    argv[i] = NULL;
    return srv_proc_run(argv, &o, res) && !res->timed_out && res->exit_code == 0;
}

static void nginx_deliver(const struct push_env *env, const struct store_delivery *d,
                          struct push_result *res);

/* One at a time: a reload must never pick up another delivery's untested file. */
void push_nginx_deliver(const struct push_env *env, const struct store_delivery *d,
                        struct push_result *res)
{
    if (env->nginx_lock)
        pthread_mutex_lock(env->nginx_lock);
    nginx_deliver(env, d, res);
    if (env->nginx_lock)
        pthread_mutex_unlock(env->nginx_lock);
}

static void nginx_deliver(const struct push_env *env, const struct store_delivery *d,
                          struct push_result *res)
{
    const char *ft = json_string_value(json_object_get(d->config, "file"));
    const char *up = json_string_value(json_object_get(d->config, "upstream"));
    char path[PATH_MAX], err[512] = "", *old = NULL;
    struct srv_proc_result pr;
    struct mg_buf b;
    size_t oldn = 0;

    mg_buf_init(&b, NGINX_FILE_MAX);
    if (unreadable_header(d)) {
        snprintf(res->error, sizeof(res->error),
                 "nginx reads headers only by names of a-z, 0-9 and '-', not '%.64s'; change "
                 "the alias's match rules",
                 unreadable_header(d));
        goto out;
    }
    if (!ft || !up || !push_expand(ft, d->model, d->alias, 0, path, sizeof(path)) ||
        !push_nginx_render(d, up, &b)) {
        snprintf(res->error, sizeof(res->error), "gateway misconfigured");
        goto out;
    }
    if (!read_old(path, &old, &oldn)) {
        snprintf(res->error, sizeof(res->error), "cannot read the current %.300s", path);
        goto out;
    }
    if (!push_fence(env, d, res))
        goto out;
    if (write_atomic(path, b.data, b.len, err, sizeof(err)) != 0) {
        snprintf(res->error, sizeof(res->error), "%s", err);
        goto out;
    }
    if (!run(json_object_get(d->config, "test_command"), &pr)) {
        /* Keep nginx on the config it had: put the old file back. */
        if (old)
            write_atomic(path, old, oldn, err, sizeof(err));
        else
            unlink(path);
        snprintf(res->error, sizeof(res->error),
                 "the nginx config test failed (exit %d%s); the previous file was kept: %.300s",
                 pr.exit_code, pr.timed_out ? ", timed out" : "", pr.tail);
        goto out;
    }
    if (!push_fence(env, d, res)) {
        /* Another claim owns the file now; a newer one may already be in place. */
        goto out;
    }
    if (!run(json_object_get(d->config, "reload_command"), &pr)) {
        snprintf(res->error, sizeof(res->error), "the nginx reload failed (exit %d%s): %.300s",
                 pr.exit_code, pr.timed_out ? ", timed out" : "", pr.tail);
        goto out;
    }
    {
        struct timespec ts = {0, RELOAD_SETTLE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    res->ok = true;
out:
    free(old);
    mg_buf_release(&b);
}

bool push_nginx_check(const struct push_env *env, const struct store_delivery *d, bool *drift,
                      char *why, size_t whylen)
{
    const char *ft = json_string_value(json_object_get(d->config, "file"));
    const char *up = json_string_value(json_object_get(d->config, "upstream"));
    char path[PATH_MAX], *now = NULL;
    struct mg_buf b;
    size_t n = 0;
    bool ok = false;

    (void)env;
    *drift = false;
    mg_buf_init(&b, NGINX_FILE_MAX);
    if (unreadable_header(d) || !ft || !up ||
        !push_expand(ft, d->model, d->alias, 0, path, sizeof(path)) ||
        !push_nginx_render(d, up, &b)) {
        snprintf(why, whylen, "gateway misconfigured");
        goto out;
    }
    if (!read_old(path, &now, &n)) {
        snprintf(why, whylen, "cannot read %.300s", path);
        goto out;
    }
    ok = true;
    if (now == NULL) {
        snprintf(why, whylen, "the include file %.300s is missing", path);
        *drift = true;
    } else if (n != b.len || (n > 0 && memcmp(now, b.data, n) != 0)) {
        snprintf(why, whylen, "the include file %.300s was changed", path);
        *drift = true;
    }
out:
    free(now);
    mg_buf_release(&b);
    return ok;
}
