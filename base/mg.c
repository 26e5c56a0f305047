/*
 * mg.c - see mg.h: the one error record every layer fills.
 */
#include "mg.h"

#include <stdarg.h>
#include <stdio.h>

enum mg_code mg_fail(struct mg_error *err, enum mg_code code, const char *field, const char *fmt,
                     ...)
{
    va_list ap;

    if (err == NULL)
        return code;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
    return code;
}

void mg_error_clear(struct mg_error *err)
{
    if (err == NULL)
        return;
    err->code = MG_OK;
    err->message[0] = '\0';
    err->field[0] = '\0';
}
