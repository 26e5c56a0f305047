/*
 * weights.c - the byte source the weight-header readers share, their per-file result, the
 * dtype names, and the content sniff for plain blobs (weights_int.h, introspect.h).
 */
#include "weights_int.h"

#include <ctype.h>
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

/* ---- dtype names ---------------------------------------------------------------------- */

/* Canonical names (safetensors' spelling), with ONNX's data type number and the other
 * spellings a user may write. */
static const struct dtype_name {
    const char *name;
    int onnx;
    unsigned bits; /* per element; 0: variable (strings) */
    const char *alias[4];
} dtypes[] = {
    {"F32", 1, 32, {"FLOAT", "float32", "fp32", NULL}},
    {"U8", 2, 8, {"UINT8", NULL, NULL, NULL}},
    {"I8", 3, 8, {"INT8", NULL, NULL, NULL}},
    {"U16", 4, 16, {"UINT16", NULL, NULL, NULL}},
    {"I16", 5, 16, {"INT16", NULL, NULL, NULL}},
    {"I32", 6, 32, {"INT32", NULL, NULL, NULL}},
    {"I64", 7, 64, {"INT64", NULL, NULL, NULL}},
    {"STRING", 8, 0, {"str", NULL, NULL, NULL}},
    {"BOOL", 9, 8, {NULL, NULL, NULL, NULL}},
    {"F16", 10, 16, {"FLOAT16", "half", "fp16", NULL}},
    {"F64", 11, 64, {"DOUBLE", "float64", "fp64", NULL}},
    {"U32", 12, 32, {"UINT32", NULL, NULL, NULL}},
    {"U64", 13, 64, {"UINT64", NULL, NULL, NULL}},
    {"C64", 14, 64, {"COMPLEX64", NULL, NULL, NULL}},
    {"C128", 15, 128, {"COMPLEX128", NULL, NULL, NULL}},
    {"BF16", 16, 16, {"BFLOAT16", NULL, NULL, NULL}},
    {"F8_E4M3", 17, 8, {"FLOAT8E4M3FN", "float8_e4m3fn", NULL, NULL}},
    {"F8_E4M3FNUZ", 18, 8, {"FLOAT8E4M3FNUZ", "float8_e4m3fnuz", NULL, NULL}},
    {"F8_E5M2", 19, 8, {"FLOAT8E5M2", "float8_e5m2", NULL, NULL}},
    {"F8_E5M2FNUZ", 20, 8, {"FLOAT8E5M2FNUZ", "float8_e5m2fnuz", NULL, NULL}},
    {"U4", 21, 4, {"UINT4", NULL, NULL, NULL}},
    {"I4", 22, 4, {"INT4", NULL, NULL, NULL}},
    {"F4", 23, 4, {"FLOAT4E2M1", NULL, NULL, NULL}},
};

const char *art_onnx_dtype_name(int32_t t)
{
    size_t i;

    for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (dtypes[i].onnx == t)
            return dtypes[i].name;
    }
    return NULL;
}

unsigned art_dtype_bits(const char *name)
{
    size_t i;

    for (i = 0; name && i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (strcmp(dtypes[i].name, name) == 0)
            return dtypes[i].bits;
    }
    return 0;
}

static const char *scalar_canonical(const char *s, size_t n)
{
    size_t i, j;

    for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (strlen(dtypes[i].name) == n && strncasecmp(dtypes[i].name, s, n) == 0)
            return dtypes[i].name;
        for (j = 0; j < 4 && dtypes[i].alias[j]; j++) {
            if (strlen(dtypes[i].alias[j]) == n && strncasecmp(dtypes[i].alias[j], s, n) == 0)
                return dtypes[i].name;
        }
    }
    /* numpy's names for the rest: int8 … uint64, bool, complex64, complex128 */
    static const struct {
        const char *np, *name;
    } np[] = {{"int8", "I8"},   {"int16", "I16"},     {"int32", "I32"},       {"int64", "I64"},
              {"uint8", "U8"},  {"uint16", "U16"},    {"uint32", "U32"},      {"uint64", "U64"},
              {"bool", "BOOL"}, {"complex64", "C64"}, {"complex128", "C128"}, {"string", "STRING"}};
    for (i = 0; i < sizeof(np) / sizeof(np[0]); i++) {
        if (strlen(np[i].np) == n && strncasecmp(np[i].np, s, n) == 0)
            return np[i].name;
    }
    return NULL;
}

/* Canonicalise s[0..n) into out at *o; false when unknown or too deep/long. */
static bool canon(const char *s, size_t n, char *out, size_t cap, size_t *o, int depth)
{
    static const char *const wrap[] = {"seq", "optional", "sparse", "map"};
    const char *name;
    size_t i, k, lvl, comma;

    while (n > 0 && isspace((unsigned char)s[0]))
        s++, n--;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (depth > 8 || n == 0)
        return false;
    for (i = 0; i < 4; i++) {
        k = strlen(wrap[i]);
        if (n > k + 1 && strncasecmp(s, wrap[i], k) == 0 && s[k] == '(' && s[n - 1] == ')')
            break;
    }
    if (i == 4) {
        if ((name = scalar_canonical(s, n)) == NULL || *o + strlen(name) >= cap)
            return false;
        memcpy(out + *o, name, strlen(name));
        *o += strlen(name);
        out[*o] = '\0';
        return true;
    }
    if (*o + k + 1 >= cap)
        return false;
    memcpy(out + *o, wrap[i], k);
    out[*o + k] = '(';
    *o += k + 1;
    s += k + 1;
    n -= k + 2;
    if (i == 3) { /* map(K,V): split at the top-level comma */
        for (comma = 0, lvl = 0; comma < n; comma++) {
            if (s[comma] == '(')
                lvl++;
            else if (s[comma] == ')' && lvl > 0)
                lvl--;
            else if (s[comma] == ',' && lvl == 0)
                break;
        }
        if (comma == n || !canon(s, comma, out, cap, o, depth + 1) || *o + 1 >= cap)
            return false;
        out[(*o)++] = ',';
        s += comma + 1;
        n -= comma + 1;
    }
    if (!canon(s, n, out, cap, o, depth + 1) || *o + 1 >= cap)
        return false;
    out[(*o)++] = ')';
    out[*o] = '\0';
    return true;
}

bool art_dtype_canonical(const char *name, char *out, size_t cap)
{
    size_t o = 0;

    if (name == NULL || cap == 0)
        return false;
    out[0] = '\0';
    if (!canon(name, strlen(name), out, cap, &o, 0)) {
        out[0] = '\0';
        return false;
    }
    return true;
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
