/*
 * output.c - what the CLI prints: JSON for --json, aligned tables and short
 * human renderings otherwise.
 */
#include "mgc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/text.h"
#include "../base/util.h"

#define TABLE_CELL_MAX 200 /* longer cells are cut with "..." */

/* v as text (new; free it), or NULL: every real as the shortest text that reads back as
 * the same double ("0.942", never "0.94199999999999995"). */
static char *json_text(const json_t *v, size_t flags)
{
    char *exact = json_dumps(v, flags | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    char *text = exact ? mg_json_short_reals(exact) : NULL;

    free(exact);
    return text;
}

int mgc_print_json(const json_t *v)
{
    char *text = json_text(v, JSON_INDENT(2));
    int ok = text != NULL && fputs(text, stdout) != EOF && putchar('\n') != EOF;

    free(text);
    return ok ? MGC_OK : mgc_fail("cannot write the output");
}

void mgc_table_init(struct mgc_table *t, size_t ncols)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols;
}

static char *cell_copy(const char *s)
{
    size_t n;
    char *out;

    if (s == NULL)
        s = "-";
    n = strlen(s);
    if (n > TABLE_CELL_MAX) {
        out = malloc(TABLE_CELL_MAX + 4);
        if (out != NULL) {
            memcpy(out, s, TABLE_CELL_MAX);
            memcpy(out + TABLE_CELL_MAX, "...", 4);
        }
        return out;
    }
    return strdup(s);
}

void mgc_table_row(struct mgc_table *t, ...)
{
    va_list ap;
    char **nc;
    size_t i, ncap;

    if (t->nrows * t->ncols + t->ncols > t->cap) {
        ncap = t->cap ? t->cap * 2 : t->ncols * 16;
        nc = realloc(t->cells, ncap * sizeof(*nc));
        if (nc == NULL)
            return; /* out of memory: the row is dropped */
        t->cells = nc;
        t->cap = ncap;
    }
    va_start(ap, t);
    for (i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = cell_copy(va_arg(ap, const char *));
    va_end(ap);
    t->nrows++;
}

void mgc_table_print(const struct mgc_table *t)
{
    size_t w[16] = {0}, r, i, n;
    const char *s;

    for (r = 0; r < t->nrows; r++) {
        for (i = 0; i < t->ncols && i < 16; i++) {
            s = t->cells[r * t->ncols + i];
            n = s ? strlen(s) : 1;
            if (n > w[i])
                w[i] = n;
        }
    }
    for (r = 0; r < t->nrows; r++) {
        for (i = 0; i < t->ncols && i < 16; i++) {
            s = t->cells[r * t->ncols + i];
            if (i + 1 == t->ncols)
                printf("%s\n", s ? s : "-");
            else
                printf("%-*s  ", (int)w[i], s ? s : "-");
        }
    }
}

void mgc_table_release(struct mgc_table *t)
{
    size_t i;

    for (i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

char *mgc_text(const json_t *v)
{
    char buf[64];

    if (v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
        (json_is_object(v) && json_object_size(v) == 0))
        return strdup("-");
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
        return strdup(buf);
    }
    if (json_is_real(v))
        return strdup(mg_fmt_double(json_real_value(v), buf, sizeof(buf)));
    if (json_is_true(v))
        return strdup("true");
    if (json_is_false(v))
        return strdup("false");
    return json_text(v, JSON_COMPACT);
}

const char *mgc_str(const json_t *obj, const char *key, const char *fallback)
{
    json_t *v = json_object_get(obj, key); /* BORROWED */

    return json_is_string(v) ? json_string_value(v) : fallback;
}

void mgc_short_digest(const char *digest, char out[24])
{
    if (digest == NULL) {
        snprintf(out, 24, "-");
        return;
    }
    snprintf(out, 24, "%.19s", digest);
}

void mgc_human_bytes(double n, char out[32])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;

    while (n >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        n /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, 32, "%.0f %s", n, units[u]);
    else
        snprintf(out, 32, "%.1f %s", n, units[u]);
}

char *mgc_metrics_text(const json_t *metrics)
{
    struct mg_buf b;
    const char *k;
    json_t *v; /* BORROWED */
    char *t;

    mg_buf_init(&b, 1 << 20);
    json_object_foreach((json_t *)metrics, k, v)
    {
        t = mgc_text(v);
        if (b.len > 0)
            mg_buf_puts(&b, " ");
        mg_buf_puts(&b, k);
        mg_buf_puts(&b, "=");
        mg_buf_puts(&b, t ? t : "?");
        free(t);
    }
    if (b.data == NULL)
        return strdup("-");
    return b.data;
}
