/*
 * errors.c - what every command shares for talking to its user: the error and usage
 * messages (mgc_fail, mgc_usage), checks of the names and numbers on the command line, and
 * sleeping between polls.
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

/* ---- messages ----------------------------------------------------------------------------- */

int mgc_fail(const char *fmt, ...)
{
    va_list ap;

    fputs("modelgate: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return MGC_ERR;
}

int mgc_usage(const struct mgc *c, const char *fmt, ...)
{
    va_list ap;

    fputs("modelgate: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (c != NULL && c->cmd != NULL)
        fprintf(stderr, "usage: modelgate %s %s\n(see modelgate %s --help)\n", c->cmd->name,
                c->cmd->synopsis, c->cmd->name);
    else
        fputs("see modelgate --help\n", stderr);
    return MGC_USAGE;
}

bool mgc_parse_int(const struct mgc *c, const char *what, const char *s, int64_t min, int64_t max,
                   int64_t *out)
{
    if (s != NULL && mg_parse_i64(s, min, max, out))
        return true;
    mgc_usage(c, "%s must be a whole number from %lld to %lld, not '%s'", what, (long long)min,
              (long long)max, s ? s : "");
    return false;
}

bool mgc_check_model(const struct mgc *c, const char *model)
{
    if (mg_valid_model_name(model, strlen(model)))
        return true;
    mgc_usage(c, "'%s' is not a model name (^[a-z0-9][a-z0-9._-]{0,62}$)", model);
    return false;
}

bool mgc_check_alias(const struct mgc *c, const char *alias)
{
    if (alias == NULL) {
        mgc_usage(c, "give the alias with --alias NAME");
        return false;
    }
    if (mg_valid_alias_name(alias, strlen(alias)))
        return true;
    mgc_usage(c, "'%s' is not an alias name (^[a-z][a-z0-9-]{0,31}$)", alias);
    return false;
}

bool mgc_check_promotion_id(const struct mgc *c, const char *id)
{
    size_t i, n = strlen(id);

    for (i = 0; i < n; i++) {
        char ch = id[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-'))
            break;
    }
    if (n > 0 && n <= 64 && i == n)
        return true;
    mgc_usage(c, "'%s' is not a promotion id", id);
    return false;
}

void mgc_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0)
        ;
}
