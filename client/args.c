/*
 * args.c - command-line options: each command's long and short options plus the common
 * ones (--json, --help), parsed into struct mgc_args.
 */
#include "mgc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/util.h"

static const struct mgc_optdef common_opts[] = {
    {"json", 0, false}, {"help", 'h', false}, {NULL, 0, false}};

/* ---- options ------------------------------------------------------------------------------ */

static const struct mgc_optdef *find_long(const struct mgc_optdef *defs, const char *name,
                                          size_t len)
{
    for (; defs->name; defs++) {
        if (strlen(defs->name) == len && strncmp(defs->name, name, len) == 0)
            return defs;
    }
    return NULL;
}

static const struct mgc_optdef *find_short(const struct mgc_optdef *defs, char ch)
{
    for (; defs->name; defs++) {
        if (defs->short_name == ch)
            return defs;
    }
    return NULL;
}

int mgc_args_parse(const struct mgc_cmd *cmd, int argc, char **argv, struct mgc_args *a)
{
    struct mgc fake = {.cmd = cmd};
    const struct mgc_optdef *d;
    const char *arg, *eq, *val;
    bool only_pos = false;
    int i;

    memset(a, 0, sizeof(*a));
    a->pos = calloc((size_t)argc + 1, sizeof(*a->pos));
    a->given = calloc((size_t)argc + 1, sizeof(*a->given));
    if (a->pos == NULL || a->given == NULL)
        return mgc_fail("out of memory");
    for (i = 0; i < argc; i++) {
        arg = argv[i];
        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            a->pos[a->npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = true;
            continue;
        }
        val = NULL;
        if (arg[1] == '-') {
            eq = strchr(arg + 2, '=');
            size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
            d = find_long(cmd->opts, arg + 2, len);
            if (d == NULL)
                d = find_long(common_opts, arg + 2, len);
            if (d == NULL)
                return mgc_usage(&fake, "unknown option '%.*s'", (int)(len + 2), arg);
            if (eq != NULL && !d->has_arg)
                return mgc_usage(&fake, "option '--%s' takes no value", d->name);
            if (eq != NULL)
                val = eq + 1;
        } else {
            d = arg[2] == '\0' ? find_short(cmd->opts, arg[1]) : NULL;
            if (d == NULL && arg[2] == '\0')
                d = find_short(common_opts, arg[1]);
            if (d == NULL)
                return mgc_usage(&fake, "unknown option '%s'", arg);
        }
        if (d->has_arg && val == NULL) {
            if (i + 1 >= argc)
                return mgc_usage(&fake, "option '--%s' needs a value", d->name);
            val = argv[++i];
        }
        a->given[a->ngiven].def = d;
        a->given[a->ngiven].val = val ? val : "";
        a->ngiven++;
    }
    if (mgc_flag(a, "help"))
        return MGC_OK;
    if (a->npos < cmd->min_pos || a->npos > cmd->max_pos)
        return mgc_usage(&fake, "%s arguments", a->npos < cmd->min_pos ? "missing" : "too many");
    return MGC_OK;
}

void mgc_args_release(struct mgc_args *a)
{
    free(a->pos);
    free(a->given);
    memset(a, 0, sizeof(*a));
}

const char *mgc_opt_nth(const struct mgc_args *a, const char *name, int n)
{
    int i;

    for (i = 0; i < a->ngiven; i++) {
        if (strcmp(a->given[i].def->name, name) == 0 && n-- == 0)
            return a->given[i].val;
    }
    return NULL;
}

const char *mgc_opt(const struct mgc_args *a, const char *name)
{
    const char *v = NULL;
    int i;

    for (i = 0; i < a->ngiven; i++) {
        if (strcmp(a->given[i].def->name, name) == 0)
            v = a->given[i].val;
    }
    return v;
}

bool mgc_flag(const struct mgc_args *a, const char *name)
{
    return mgc_opt(a, name) != NULL;
}
