/*
 * weights.c - the byte source the weight-header readers share, their per-file result, and
 * the content sniff for plain blobs (weights_int.h). The dtype names are in dtype.c.
 */
#include "weights_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_int.h"

enum mg_code art_src_fail(const struct art_src *s, uint64_t off, struct mg_error *err,
                          const char *fmt, ...)
{
    char why[320], show[SHOW_BUF];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (s->name == NULL)
        return mg_fail(err, MG_EINVAL, "artifact",
                       "malformed %s header in the blob at byte offset %llu: %s; re-export the "
                       "file",
                       s->format, (unsigned long long)off, why);
    art_name_show(s->name, strlen(s->name), show);
    return mg_fail(err, MG_EINVAL, "artifact",
                   "malformed %s header in archive member '%s' at byte offset %llu: %s; "
                   "re-export the file",
                   s->format, show, (unsigned long long)off, why);
}

uint64_t art_src_left(const struct art_src *s)
{
    return s->size == UINT64_MAX ? UINT64_MAX : s->size - s->off;
}

/* Refill buf so that at least `want` bytes (<= ART_SRC_BUF) are there, or the data ends. */
static enum mg_code fill(struct art_src *s, size_t want, struct mg_error *err)
{
    ssize_t r;

    if (s->len - s->pos >= want)
        return MG_OK;
    memmove(s->buf, s->buf + s->pos, s->len - s->pos);
    s->len -= s->pos;
    s->pos = 0;
    while (s->len < want) {
        r = s->read(s->ctx, s->buf + s->len, sizeof(s->buf) - s->len, err);
        if (r < 0)
            return err->code != MG_OK ? err->code : MG_EIO;
        if (r == 0)
            break;
        s->len += (size_t)r;
    }
    return MG_OK;
}

enum mg_code art_src_peek(struct art_src *s, size_t n, const uint8_t **p, size_t *got,
                          struct mg_error *err)
{
    enum mg_code rc;

    if (n > ART_SRC_BUF)
        n = ART_SRC_BUF;
    if ((rc = fill(s, n, err)) != MG_OK)
        return rc;
    *p = s->buf + s->pos;
    *got = s->len - s->pos < n ? s->len - s->pos : n;
    return MG_OK;
}

enum mg_code art_src_read(struct art_src *s, void *out, size_t n, struct mg_error *err)
{
    uint8_t *o = out;
    enum mg_code rc;
    size_t k;

    if (n > art_src_left(s))
        return art_src_fail(s, s->off, err,
                            "it needs %zu more bytes but the file ends %llu bytes later", n,
                            (unsigned long long)art_src_left(s));
    while (n > 0) {
        if ((rc = fill(s, n < ART_SRC_BUF ? n : ART_SRC_BUF, err)) != MG_OK)
            return rc;
        k = s->len - s->pos;
        if (k == 0)
            return art_src_fail(s, s->off, err, "the file is truncated here");
        if (k > n)
            k = n;
        memcpy(o, s->buf + s->pos, k);
        s->pos += k;
        s->off += k;
        o += k;
        n -= k;
    }
    return MG_OK;
}

enum mg_code art_src_skip(struct art_src *s, uint64_t n, struct mg_error *err)
{
    enum mg_code rc;
    size_t k;

    if (n > art_src_left(s))
        return art_src_fail(s, s->off, err,
                            "a field claims %llu bytes but the file ends %llu bytes later",
                            (unsigned long long)n, (unsigned long long)art_src_left(s));
    k = s->len - s->pos < n ? s->len - s->pos : (size_t)n;
    s->pos += k;
    s->off += k;
    n -= k;
    if (n > 0 && s->seek_ahead != NULL) {
        if ((rc = s->seek_ahead(s->ctx, n, err)) != MG_OK)
            return rc;
        s->off += n;
        return MG_OK;
    }
    while (n > 0) {
        if ((rc = fill(s, 1, err)) != MG_OK)
            return rc;
        k = s->len - s->pos;
        if (k == 0)
            return art_src_fail(s, s->off, err, "the file is truncated here");
        if (k > n)
            k = (size_t)n;
        s->pos += k;
        s->off += k;
        n -= k;
    }
    return MG_OK;
}

enum mg_code art_src_u32(struct art_src *s, uint32_t *v, struct mg_error *err)
{
    uint8_t b[4];
    enum mg_code rc = art_src_read(s, b, 4, err);

    if (rc == MG_OK)
        *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return rc;
}

enum mg_code art_src_u64(struct art_src *s, uint64_t *v, struct mg_error *err)
{
    uint8_t b[8];
    enum mg_code rc = art_src_read(s, b, 8, err);
    int i;

    if (rc != MG_OK)
        return rc;
    *v = 0;
    for (i = 7; i >= 0; i--)
        *v = *v << 8 | b[i];
    return MG_OK;
}

/* ---- the per-file result ------------------------------------------------------------- */

void art_weights_init(struct art_weights *w, const char *format)
{
    memset(w, 0, sizeof(*w));
    w->format = format;
    w->dtypes = json_object();
    w->metadata = json_object();
    w->data_complete = true;
}

void art_weights_release(struct art_weights *w)
{
    json_decref(w->dtypes);
    json_decref(w->metadata);
    json_decref(w->inputs);
    json_decref(w->outputs);
    memset(w, 0, sizeof(*w));
}

enum mg_code art_weights_add(struct art_weights *w, const struct art_src *s, uint64_t at,
                             const char *dtype, uint64_t n, uint64_t b, struct mg_error *err)
{
    json_t *cur = json_object_get(w->dtypes, dtype);
    uint64_t have = cur ? (uint64_t)json_integer_value(cur) : 0;

    if (w->dtypes == NULL || w->metadata == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (!art_add(w->parameters, n, &w->parameters) ||
        !art_add(w->weights_bytes, b, &w->weights_bytes) || !art_add(have, n, &have) ||
        w->parameters > INT64_MAX || w->weights_bytes > INT64_MAX)
        return art_src_fail(s, at, err, "the tensor sizes add up to more than 2^63");
    w->tensors++;
    if (json_object_set_new(w->dtypes, dtype, json_integer((json_int_t)have)) != 0)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    return MG_OK;
}

/* ---- sniffing a plain blob -------------------------------------------------------------- */

const char *art_sniff(const uint8_t *p, size_t n, uint64_t size)
{
    uint64_t hlen = 0;
    size_t i;

    if (n >= 4 && memcmp(p, "GGUF", 4) == 0)
        return "gguf";
    if (n >= 9) {
        for (i = 8; i-- > 0;)
            hlen = hlen << 8 | p[i];
        if (p[8] == '{' && hlen >= 2 && hlen <= size - 8)
            return "safetensors";
    }
    /* ModelProto: onnx writes ir_version (field 1, a varint) first. */
    if (n >= 2 && p[0] == 0x08 && p[1] >= 1 && p[1] < 0x80)
        return "onnx";
    return NULL;
}
