/*
 * authz.c - see authz.h.
 */
#include "authz.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void deny(struct gate_decision *out, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void deny(struct gate_decision *out, unsigned status, const char *fmt, ...)
{
    va_list ap;

    out->allow = false;
    out->status = status;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
    va_end(ap);
}

/* "a, b, c" of a list, cut to fit. */
static const char *join(const char *const *v, size_t n, char *buf, size_t cap)
{
    size_t o = 0, i;

    buf[0] = '\0';
    for (i = 0; i < n && o + 1 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", v[i]);
    return buf;
}

static const char *role_names(unsigned need, char *buf, size_t cap)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{MG_ROLE_ADMIN, "admin"},
                 {MG_ROLE_PUBLISHER, "publisher"},
                 {MG_ROLE_REVIEWER, "reviewer"},
                 {MG_ROLE_DEPLOYER, "deployer"},
                 {MG_ROLE_READER, "reader"}};
    size_t o = 0, i;

    buf[0] = '\0';
    for (i = 0; i < sizeof(names) / sizeof(names[0]) && o + 1 < cap; i++) {
        if (need & names[i].bit)
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", names[i].name);
    }
    return buf;
}

bool gate_alias_pattern_valid(const char *p)
{
    size_t n = p ? strlen(p) : 0, i;

    if (n > 0 && p[n - 1] == '*')
        n--; /* a prefix of an alias name ("*" alone: every alias, said explicitly) */
    else if (n == 0)
        return false;
    if (n == 0)
        return true;
    /* docs/contract.md: an alias is ^[a-z][a-z0-9-]{0,31}$ */
    if (n > 32 || !(p[0] >= 'a' && p[0] <= 'z'))
        return false;
    for (i = 1; i < n; i++) {
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-'))
            return false;
    }
    return true;
}

bool gate_alias_allowed(const struct gate_token *t, const char *alias)
{
    size_t i, n;

    if (t->naliases == 0)
        return true;
    for (i = 0; alias != NULL && i < t->naliases; i++) {
        n = strlen(t->aliases[i]);
        if (n > 0 && t->aliases[i][n - 1] == '*') {
            if (strncmp(alias, t->aliases[i], n - 1) == 0)
                return true;
        } else if (strcmp(alias, t->aliases[i]) == 0) {
            return true;
        }
    }
    return false;
}

bool gate_team_owns(const struct gate_token *t, const struct gate_model *m)
{
    size_t i, j;

    if (t->nteams == 0)
        return true;
    for (i = 0; i < t->nteams; i++) {
        for (j = 0; j < m->nowners; j++) {
            if (strcmp(t->teams[i], m->owners[j]) == 0)
                return true;
        }
    }
    return false;
}

/* One of the token's teams uploaded the bytes, or owns a model that cites them. */
static bool bytes_held(const struct gate_token *t, const struct gate_bytes *b)
{
    size_t i, j;

    for (i = 0; i < b->nuploaders; i++) {
        for (j = 0; j < t->nteams; j++) {
            if (strcmp(b->uploaders[i], t->teams[j]) == 0)
                return true;
        }
    }
    for (i = 0; i < b->nciters; i++) {
        if (b->citers[i].nowners > 0 && gate_team_owns(t, &b->citers[i]))
            return true;
    }
    return false;
}

void gate_authorize(const struct gate_token *t, const struct gate_request *q,
                    struct gate_decision *out)
{
    unsigned need = q->need;
    bool read_only;
    char a[160], b[160];

    out->allow = true;
    out->status = 200;
    out->reason[0] = '\0';
    if (need == MG_NEED_PUBLIC)
        return;
    if (t == NULL || t->roles == 0) {
        deny(out, 403, "token '%s' holds no role", t && t->name ? t->name : "?");
        return;
    }
    if (t->roles & MG_ROLE_ADMIN)
        return; /* admin is global: no team or alias narrows it */
    /* Every role includes reading: a route that needs only reader (or any role) admits
     * every token. */
    read_only = need == MG_NEED_ANY || need == MG_ROLE_READER;
    if (!read_only && (t->roles & need) == 0) {
        deny(out, 403, "token '%s' lacks the role this needs (one of %s)", t->name,
             role_names(need, a, sizeof(a)));
        return;
    }
    if (q->model != NULL && !gate_team_owns(t, q->model)) {
        /* A model hidden from this token is missing for every route, writes included: a
         * 403 naming its owners would say it exists, and whose it is. */
        if (q->read_scope == GATE_READ_TEAM) {
            deny(out, 404, "model '%s' does not exist", q->model->name);
            return;
        }
        if (read_only)
            return;
        if (q->model->nowners == 0)
            deny(out, 403,
                 "model '%s' is owned by no team, and token '%s' acts only for team %s; ask "
                 "an admin to set its owners",
                 q->model->name, t->name, join(t->teams, t->nteams, b, sizeof(b)));
        else
            deny(out, 403, "model '%s' is owned by team %s; token '%s' acts only for team %s",
                 q->model->name, join(q->model->owners, q->model->nowners, a, sizeof(a)), t->name,
                 join(t->teams, t->nteams, b, sizeof(b)));
        return;
    }
    if (q->team != NULL && q->read_scope == GATE_READ_TEAM && t->nteams > 0) {
        size_t i;

        for (i = 0; i < t->nteams && strcmp(t->teams[i], q->team) != 0; i++)
            ;
        if (i == t->nteams) {
            /* Another team's quota and usage are its own business: missing, as its models are. */
            deny(out, 404, "team '%s' is not visible to token '%s', which acts only for team %s",
                 q->team, t->name, join(t->teams, t->nteams, b, sizeof(b)));
            return;
        }
    }
    if (q->bytes != NULL) {
        /* Possession is proved by uploading: a digest alone never reaches another team's
         * bytes (docker-registry's cross-repository mount likewise needs pull access). */
        if (q->read_scope == GATE_READ_TEAM && t->nteams > 0 && !bytes_held(t, q->bytes)) {
            deny(out, 404, "blob %s does not exist; upload it first", q->bytes->digest);
            return;
        }
        if (q->bytes->released) {
            deny(out, 410,
                 "blob %s is no longer cited by any version and awaits garbage collection; "
                 "upload it again to use it",
                 q->bytes->digest);
            return;
        }
    }
    if (!read_only && q->alias != NULL && (need & MG_ROLE_DEPLOYER) != 0 &&
        !gate_alias_allowed(t, q->alias)) {
        deny(out, 403, "token '%s' may deploy only to alias %s, not '%s'", t->name,
             join(t->aliases, t->naliases, a, sizeof(a)), q->alias);
        return;
    }
}
